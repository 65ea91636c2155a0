"""KIP-1243 request/response headers: RequestHeader v2 and ResponseHeader v1 with ``consistency_state``.

``consistency_state`` is tag 0 of the flexible header versions, exactly as the proposal defines it: a
struct ``ConsistencyState(cluster_id: str | None = None, consistency_token: int = -1)``. It defaults to
``None`` and is then not sent, so a header without consistency state is byte-identical to kafka-python's.
These classes are the wire encoding only: kafka_kip's clients do not send or read consistency state yet
(KIP-1243's client side is still to come), and kafka-python's own header classes are left as they are.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol import api_header


def _consistency_state(versions: str) -> dict[str, Any]:
    return {
        'name': 'ConsistencyState', 'type': 'ConsistencyState', 'versions': versions,
        'taggedVersions': versions, 'tag': 0,
        'about': 'Consistency context for the request (KIP-1243).', 'fields': [
            {'name': 'ClusterId', 'type': 'string', 'versions': versions, 'nullableVersions': versions,
             'default': 'null', 'about': 'The cluster id if known.'},
            {'name': 'ConsistencyToken', 'type': 'int64', 'versions': versions, 'default': '-1',
             'about': 'The latest consistency token (cluster metadata offset) seen.'},
        ]}


def _with_consistency_state(json: dict[str, Any]) -> dict[str, Any]:
    json['fields'].append(_consistency_state(json['flexibleVersions']))
    return json


class RequestHeader(api_header.RequestHeader):
    """kafka-python's RequestHeader + ``consistency_state`` (tag 0 of v2)."""

    @classmethod
    def json_patch(cls, json: dict[str, Any]) -> dict[str, Any]:
        return _with_consistency_state(json)


class ResponseHeader(api_header.ResponseHeader):
    """kafka-python's ResponseHeader + ``consistency_state`` (tag 0 of v1)."""

    @classmethod
    def json_patch(cls, json: dict[str, Any]) -> dict[str, Any]:
        return _with_consistency_state(json)


#: ``RequestHeader.ConsistencyState(cluster_id=..., consistency_token=...)``, the struct both headers carry.
RequestConsistencyState = RequestHeader.ConsistencyState
ResponseConsistencyState = ResponseHeader.ConsistencyState

__all__ = ['RequestHeader', 'ResponseHeader', 'RequestConsistencyState', 'ResponseConsistencyState']
