"""A minimal blocking Kafka protocol client for tests: send one request object, get its response.

It speaks exactly what it is told (version, fields, raw frames), which is what protocol-level
tests of the reference cluster (and of other brokers) need and what full clients hide::

    with WireClient(cluster.brokers()[0]) as wire:
        response = wire.request(MetadataRequest(version=12, topics=None))

A flexible request header can carry a KIP-1243 consistency state (``consistency=``); the state of the last
response header is ``last_consistency`` (None when it carried none).
"""
from __future__ import annotations

import select
import socket
import ssl
import struct
import uuid
from typing import Any

from kafka_kip.protocol.headers import ConsistencyState, consistency_state_tags, read_header_tags
from kafka_kip.protocol.messages import REQUESTS, RESPONSES

_SIZE = struct.Struct('>i')
_HEADER = struct.Struct('>hhi')
API_VERSIONS_KEY = 18


class WireClient:
    """One TCP connection to a broker (``address`` is ``(host, port)`` or has ``.host``/``.port``), over TLS with
    ``ssl_context`` (the broker's certificate checked against ``host``)."""

    def __init__(self, address: Any, client_id: str = 'wire-client', timeout: float = 10.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        host, port = (address.host, address.port) if hasattr(address, 'host') else address
        self._sock = socket.create_connection((host, port), timeout=timeout)
        if ssl_context is not None:
            try:
                self._sock = ssl_context.wrap_socket(self._sock, server_hostname=host)
            except BaseException:
                self._sock.close()
                raise
        self._client_id = client_id.encode()
        self._correlation_id = 0
        #: the KIP-1243 state of the last response header read (None: it carried none)
        self.last_consistency: ConsistencyState | None = None

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def request(self, request: Any, version: int | None = None, consistency: ConsistencyState | None = None) -> Any:
        """Send ``request`` (at ``version`` or its own, with ``consistency`` in a flexible header) and return the
        decoded response."""
        version = request.version if version is None else version
        self.send(request.API_KEY, version, request.encode(version=version), consistency)
        if not request.expect_response():
            return None
        return self.read_response(request.API_KEY, version)

    def send(self, api_key: int, version: int, body: bytes, consistency: ConsistencyState | None = None) -> None:
        """Send ``body`` under a request header of ``api_key``/``version`` (any version, even unknown)."""
        request_class = REQUESTS.get(api_key)
        flexible = request_class is not None and request_class.flexible_version_q(version)
        self._correlation_id += 1
        if consistency is not None and not flexible:
            raise ValueError(f'api {api_key} v{version} has no flexible header to carry a consistency state')
        tags = b'' if not flexible else b'\0' if consistency is None else consistency_state_tags(*consistency)
        header = _HEADER.pack(api_key, version, self._correlation_id) + \
            struct.pack('>h', len(self._client_id)) + self._client_id + tags
        self.send_frame(header + body)

    def read_response(self, api_key: int, version: int) -> Any:
        """Read one response frame and decode it as ``RESPONSES[api_key]`` of ``version``."""
        data = self.read_frame()
        correlation_id = _SIZE.unpack_from(data)[0]
        if correlation_id != self._correlation_id:
            raise ValueError(f'correlation id {correlation_id}, expected {self._correlation_id}')
        pos = 4
        response_class = RESPONSES[api_key]
        self.last_consistency = None
        if response_class.flexible_version_q(version) and api_key != API_VERSIONS_KEY:
            self.last_consistency, pos = read_header_tags(data, pos)  # tagged fields of ResponseHeader v1
        return response_class.decode(data[pos:], version=version)

    def send_frame(self, payload: bytes) -> None:
        """Send ``payload`` with its size prefix."""
        self._sock.sendall(_SIZE.pack(len(payload)) + payload)

    def pending(self) -> bool:
        """True if the broker has sent bytes not read yet (or closed the connection); never blocks."""
        pending = getattr(self._sock, 'pending', None)  # TLS: bytes already decrypted count too
        return bool(pending and pending()) or bool(select.select([self._sock], [], [], 0)[0])

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (no framing)."""
        self._sock.sendall(data)

    def read_frame(self) -> bytes:
        """Read one size-prefixed frame; raises ConnectionError if the broker closed the connection."""
        size = _SIZE.unpack(self._read_exactly(4))[0]
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(n)
            if not chunk:
                raise ConnectionError('connection closed by the broker')
            chunks.append(chunk)
            n -= len(chunk)
        return b''.join(chunks)


# -- request builders for the partition-level APIs (one topic, the given partitions) ----------------


def metadata_request(topics: list[str] | None = None, version: int = 12) -> Any:
    """A MetadataRequest for ``topics`` (None: every topic), never creating topics."""
    request_class = REQUESTS[3]
    wanted = None if topics is None else [request_class.MetadataRequestTopic(name=t) for t in topics]
    return request_class(version=version, topics=wanted, allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)


def produce_request(topic: str, partition: int, records: bytes, acks: int = -1, use_offset: bool = False,
                    version: int = 9, timeout_ms: int = 5000, topic_id: uuid.UUID | None = None,
                    transactional_id: str | None = None) -> Any:
    """A ProduceRequest; v13+ addresses the topic by ``topic_id``."""
    request_class = REQUESTS[0]
    data = request_class.TopicProduceData
    return request_class(
        version=version, transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, use_offset=use_offset,
        topic_data=[data(name=topic, topic_id=topic_id,
                         partition_data=[data.PartitionProduceData(index=partition, records=records)])])


def fetch_request(topic: str, partition: int, offset: int, current_leader_epoch: int = -1,
                  last_fetched_epoch: int = -1, max_wait_ms: int = 0, min_bytes: int = 1,
                  max_bytes: int = 1 << 20, version: int = 12, topic_id: uuid.UUID | None = None) -> Any:
    """A sessionless FetchRequest of one partition; v13+ addresses the topic by ``topic_id``."""
    request_class = REQUESTS[1]
    fetch_topic = request_class.FetchTopic
    return request_class(
        version=version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id='',
        topics=[fetch_topic(topic=topic, topic_id=topic_id, partitions=[fetch_topic.FetchPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1, partition_max_bytes=max_bytes)])])


def list_offsets_request(topic: str, partition: int, timestamp: int, current_leader_epoch: int = -1,
                         version: int = 7) -> Any:
    """A ListOffsetsRequest of one partition (``timestamp`` -1 latest, -2 earliest, -3 max)."""
    request_class = REQUESTS[2]
    list_topic = request_class.ListOffsetsTopic
    return request_class(
        version=version, replica_id=-1, isolation_level=0,
        topics=[list_topic(name=topic, partitions=[list_topic.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=current_leader_epoch, timestamp=timestamp)])])


def offset_for_leader_epoch_request(topic: str, partition: int, leader_epoch: int,
                                    current_leader_epoch: int = -1, version: int = 4) -> Any:
    """An OffsetForLeaderEpochRequest of one partition, as a consumer sends it."""
    request_class = REQUESTS[23]
    epoch_topic = request_class.OffsetForLeaderTopic
    return request_class(
        version=version, replica_id=-1,
        topics=[epoch_topic(topic=topic, partitions=[epoch_topic.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])
