"""KIP-1243 on the reference brokers: the ConsistencyState of request and response headers, and its check.

A request header v2 may carry tag 0, ``ConsistencyState(ClusterId, ConsistencyToken)``. A broker that honours
``kip.1243`` checks it before the request's handler runs (:func:`check`; ApiVersions excepted):

- another cluster id: the whole request is answered with INCONSISTENT_CLUSTER_ID (Apache Kafka's 104);
- an API that reads the metadata cache (the proposal's list,
  :data:`~kafka_kip.protocol.headers.METADATA_CACHE_APIS`) with a token newer
  than the broker's image: the broker waits up to ``metadata.consistency.wait.max.ms`` for its image to catch
  up (it does when its delayed metadata is released), then answers from it, else with STALE_METADATA.

Every flexible response header then carries the broker's cluster id and its image's offset, read when the
response has been built (:func:`response_header_tags`). A broker that does not honour ``kip.1243`` ignores the
tag and sends empty response tags, as Apache Kafka does.
"""
from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.errors import StaleMetadataError
from kafka_kip.protocol.headers import METADATA_CACHE_APIS
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip.testing.codes import INCONSISTENT_CLUSTER_ID
from kafka_kip.testing.error_responses import error_response
from kafka_kip.testing.model import MetadataImage
from kafka_kip.testing.state import ClusterState

STALE_METADATA = StaleMetadataError.errno
CONSISTENCY_STATE_TAG = 0
_INT64 = struct.Struct('>q')
_EMPTY_TAGS = b'\0'


class MalformedHeader(ValueError):
    """The header's tagged fields cannot be read (the broker closes the connection, as Kafka does)."""


@dataclass(frozen=True)
class ConsistencyState:
    """Tag 0 of a request header: the client's cluster id (None: unknown) and consistency token (-1: none)."""

    cluster_id: str | None
    token: int


def read_header_tags(data: bytes, pos: int) -> tuple[ConsistencyState | None, int]:
    """The tagged fields of a request header v2 at ``pos``: (tag 0's state or None, the position after them).

    Raises MalformedHeader for bytes that are not a tagged-field section.
    """
    count, pos = _uvarint(data, pos)
    state = None
    for _ in range(count):
        tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        end = pos + size
        if end > len(data):
            raise MalformedHeader('truncated tagged field')
        if tag == CONSISTENCY_STATE_TAG:
            state = _consistency_state(data[:end], pos)
        pos = end
    return state, pos


def _consistency_state(data: bytes, pos: int) -> ConsistencyState:
    length, pos = _uvarint(data, pos)  # compact nullable string: length + 1, 0 for null
    cluster_id = None
    if length:
        raw = data[pos:pos + length - 1]
        pos += length - 1
        try:
            cluster_id = raw.decode('utf-8')
        except UnicodeDecodeError:
            raise MalformedHeader('consistency state cluster id is not UTF-8') from None
    if pos + _INT64.size > len(data):
        raise MalformedHeader('truncated consistency state')
    (token,) = _INT64.unpack_from(data, pos)
    return ConsistencyState(cluster_id, token)


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
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


def _write_uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@functools.lru_cache(maxsize=64)  # per response; the offset changes only with the metadata
def response_header_tags(cluster_id: str, offset: int) -> bytes:
    """The tagged-field section of a response header v1 carrying ``ConsistencyState(cluster_id, offset)``."""
    name = cluster_id.encode('utf-8')
    payload = _write_uvarint(len(name) + 1) + name + _INT64.pack(offset) + _EMPTY_TAGS
    return b'\x01' + _write_uvarint(CONSISTENCY_STATE_TAG) + _write_uvarint(len(payload)) + payload


async def check(cluster: ClusterState, broker_id: int, api_key: int, api_version: int, request: Any,
                consistency: ConsistencyState) -> Any:
    """The response refusing ``request`` for its consistency state, or None to let its handler answer.

    ApiVersions is always answered: a client must learn the versions, and its response header cannot carry state.
    """
    if api_key == ApiKey.ApiVersions:
        return None
    if consistency.cluster_id is not None and consistency.cluster_id != cluster.cluster_id:
        message = (f'the request is for cluster {consistency.cluster_id!r}; broker {broker_id} belongs to '
                   f'cluster {cluster.cluster_id!r}')
        return _refusal(cluster, broker_id, api_key, api_version, request, INCONSISTENT_CLUSTER_ID, message)
    if api_key not in METADATA_CACHE_APIS or consistency.token <= cluster.view(broker_id).offset:
        return None
    wait_ms = cluster.config.int('metadata.consistency.wait.max.ms')
    if await cluster.wait_for_metadata(broker_id, consistency.token, wait_ms / 1000):
        return None
    message = (f'broker {broker_id} has metadata up to offset {cluster.view(broker_id).offset}, older than the '
               f'request\'s consistency token {consistency.token}')
    return _refusal(cluster, broker_id, api_key, api_version, request, STALE_METADATA, message)


def _refusal(cluster: ClusterState, broker_id: int, api_key: int, api_version: int, request: Any, error_code: int,
             message: str) -> Any:
    if api_key != ApiKey.Metadata:
        return error_response(api_key, api_version, request, error_code, message)
    # A stale broker still names the brokers it knows, so a client bootstrapped on it can go elsewhere; a
    # broker of another cluster names none, but says which cluster it is.
    view = cluster.view(broker_id)
    brokers = _brokers(view) if error_code == STALE_METADATA else []
    topics = None if request.topics is not None else _all_topics(view, api_version, error_code)
    extra = {} if topics is None else {'topics': topics}
    return error_response(api_key, api_version, request, error_code, message, brokers=brokers,
                          cluster_id=cluster.cluster_id, controller_id=view.controller_id, **extra)


def _brokers(view: MetadataImage) -> list:
    broker = RESPONSES[ApiKey.Metadata].MetadataResponseBroker
    return [broker(node_id=a.node_id, host=a.host, port=a.port, rack=a.rack) for a in view.brokers]


def _all_topics(view: MetadataImage, api_version: int, error_code: int) -> list | None:
    """Before v13 a Metadata response has no top-level error: a request for every topic gets the error on
    every topic the broker knows."""
    if RESPONSES[ApiKey.Metadata]._struct.fields['error_code'].for_version_q(api_version):
        return None
    topic = RESPONSES[ApiKey.Metadata].MetadataResponseTopic
    return [topic(error_code=error_code, name=name, topic_id=view.topics[name].topic_id, partitions=[])
            for name in sorted(view.topics)]


__all__ = ['ConsistencyState', 'MalformedHeader', 'check', 'read_header_tags',
           'response_header_tags']
