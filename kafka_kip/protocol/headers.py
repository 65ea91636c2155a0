"""KIP-1243 request/response headers: RequestHeader v2 and ResponseHeader v1 with ``consistency_state``.

``consistency_state`` is tag 0 of the flexible header versions, exactly as the proposal defines it: a
struct ``ConsistencyState(cluster_id: str | None = None, consistency_token: int = -1)``. It defaults to
``None`` and is then not sent, so a header without consistency state is byte-identical to kafka-python's.
kafka_kip's connections use them with brokers that advertise ``kip.1243`` (:mod:`kafka_kip.protocol.connection`);
kafka-python's own header classes are left as they are.

:data:`METADATA_CACHE_APIS` are the APIs that read a broker's metadata cache (the proposal's list): a broker
whose metadata is older than their consistency token does not answer them from it.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol import api_header
from kafka.protocol.api_key import ApiKey

#: The APIs that read the metadata cache (KIP-1243's list).
METADATA_CACHE_APIS = frozenset({
    ApiKey.Metadata, ApiKey.DescribeAcls, ApiKey.DescribeConfigs, ApiKey.DescribeLogDirs,
    ApiKey.DescribeDelegationToken, ApiKey.DescribeClientQuotas, ApiKey.DescribeUserScramCredentials,
    ApiKey.DescribeCluster, ApiKey.ListConfigResources, ApiKey.DescribeTopicPartitions,
})


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

__all__ = ['METADATA_CACHE_APIS', 'RequestHeader', 'ResponseHeader', 'RequestConsistencyState', 'ResponseConsistencyState']
