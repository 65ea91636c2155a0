"""KIP-1243 request/response headers: RequestHeader v2 and ResponseHeader v1 with ``consistency_state``.

``consistency_state`` is tag 0 of the flexible header versions, exactly as the proposal defines it: a
struct ``ConsistencyState(cluster_id: str | None = None, consistency_token: int = -1)``. It defaults to
``None`` and is then not sent, so a header without consistency state is byte-identical to kafka-python's.
kafka-python's own header classes are left as they are.

The per-request paths (kafka_kip's connections, :mod:`kafka_kip.protocol.connection`, and the reference brokers)
do not build these objects: :func:`consistency_state_tags` encodes a header's tagged-field section carrying a
:class:`ConsistencyState` (the same bytes as these classes, tested), :func:`read_header_tags` reads one.

:data:`METADATA_CACHE_APIS` are the APIs that read a broker's metadata cache (the proposal's list): a broker
whose metadata is older than their consistency token does not answer them from it.
"""
from __future__ import annotations

import functools
import struct
from typing import Any, NamedTuple

from kafka.protocol import api_header
from kafka.protocol.api_key import ApiKey
from kafka.protocol.schemas.fields.codecs import UnsignedVarInt32

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

CONSISTENCY_STATE_TAG = 0
_INT64 = struct.Struct('>q')
_uvarint = UnsignedVarInt32.encode  # an unsigned varint (tags, lengths of the tagged fields)


def flexible_response_header(api_key: int, request_flexible: bool) -> bool:
    """True if the response has a flexible header (ResponseHeader v1, with tagged fields): a flexible request's
    response does, except ApiVersions', whose header is always v0 (KIP-511) so that a client can read it
    whatever version it asked for. Brokers, kafka_kip's connections and the wire client all follow this one rule.
    """
    return request_flexible and api_key != ApiKey.ApiVersions


class ConsistencyState(NamedTuple):
    """Tag 0 of a flexible header: a cluster id (None: unknown) and a consistency token (-1: none)."""

    cluster_id: str | None
    consistency_token: int


class MalformedHeader(ValueError):
    """A header's tagged-field section that cannot be read."""


@functools.lru_cache(maxsize=64)  # per request and response; changes only with the metadata
def consistency_state_tags(cluster_id: str | None, consistency_token: int) -> bytes:
    """The tagged-field section of a flexible request or response header carrying ``ConsistencyState(cluster_id,
    consistency_token)`` (tag 0), as kafka-python's encoder writes it for the classes above."""
    name = b'' if cluster_id is None else cluster_id.encode('utf-8')
    payload = _uvarint(0 if cluster_id is None else len(name) + 1) + name + _INT64.pack(consistency_token) + b'\0'
    return b'\x01' + _uvarint(CONSISTENCY_STATE_TAG) + _uvarint(len(payload)) + payload


def read_header_tags(data: bytes | bytearray, pos: int) -> tuple[ConsistencyState | None, int]:
    """The tagged-field section of a flexible header at ``pos``: (tag 0's state or None, the position after it).

    Other tags are skipped. Raises MalformedHeader for bytes that are not a tagged-field section.
    """
    count, pos = _read_uvarint(data, pos)
    state = None
    for _ in range(count):
        tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        end = pos + size
        if end > len(data):
            raise MalformedHeader('truncated tagged field')
        if tag == CONSISTENCY_STATE_TAG:
            state = _read_state(bytes(data[pos:end]))
        pos = end
    return state, pos


@functools.lru_cache(maxsize=64)  # per response; the same state until the metadata changes
def _read_state(payload: bytes) -> ConsistencyState:
    length, pos = _read_uvarint(payload, 0)  # compact nullable string: length + 1, 0 for null
    cluster_id = None
    if length:
        try:
            cluster_id = payload[pos:pos + length - 1].decode('utf-8')
        except UnicodeDecodeError:
            raise MalformedHeader('consistency state cluster id is not UTF-8') from None
        pos += length - 1
    if pos + _INT64.size > len(payload):
        raise MalformedHeader('truncated consistency state')
    return ConsistencyState(cluster_id, _INT64.unpack_from(payload, pos)[0])


def _read_uvarint(data: bytes | bytearray, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise MalformedHeader('bad varint in tagged fields')
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


__all__ = ['CONSISTENCY_STATE_TAG', 'ConsistencyState', 'MalformedHeader', 'consistency_state_tags',
           'flexible_response_header',
           'read_header_tags', 'METADATA_CACHE_APIS', 'RequestHeader', 'ResponseHeader', 'RequestConsistencyState',
           'ResponseConsistencyState']
