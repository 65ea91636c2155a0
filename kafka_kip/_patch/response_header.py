"""A response keeps its header (with KIP-1243's consistency state), which kafka-python's parser drops.

kafka-python's ``KafkaProtocol._process_response`` asks the queued entry of a request for its response class
(``get_response_class()``), decodes the response header with that class's ``parse_header`` (kafka-python's
``ResponseHeader``, which keeps tag 0 only as raw bytes) and the body with its ``decode``, and returns the body
alone. An entry wrapped by :func:`keeping_header` answers with itself: it reads the header's correlation id and
tagged fields (:func:`kafka_kip.protocol.headers.read_header_tags`) and hands the response back with a
:class:`ReceivedHeader` as ``response.header`` (kafka-python's own slot for it, which ``decode(header=True)``
fills). Cost: one small object per response and the header's bytes read once. Scoped: only
:class:`kafka_kip.protocol.connection.KipProtocol` wraps entries, for flexible responses of a ``kip.1243`` broker.

The tripwire feeds a kafka-python ``KafkaProtocol`` one response (framed with kafka_kip's ``ResponseHeader``
class) through a wrapped entry and checks that the response comes back with the state its header carried.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kafka.protocol.admin.cluster import DescribeClusterResponse
from kafka.protocol.api_header import RequestHeader as StockRequestHeader
from kafka.protocol.parser import KafkaProtocol

from kafka_kip._patch.parser_frame import ResponseFrame
from kafka_kip._patch.rebind import require_behaviour, require_names
from kafka_kip.protocol.headers import (
    ConsistencyState,
    ResponseConsistencyState,
    ResponseHeader,
    read_header_tags,
)

_INT32 = struct.Struct('>i')


class ReceivedHeader(NamedTuple):
    """A flexible response header as read: its correlation id and consistency state (None: it had none)."""

    correlation_id: int
    consistency_state: ConsistencyState | None


class HeaderKeepingEntry:
    """A queued request entry whose response keeps its header: it is also the response class the parser uses."""

    __slots__ = ('entry', 'correlation_id', 'response_class', 'header')

    def __init__(self, entry: Any) -> None:
        self.entry = entry
        self.correlation_id = entry.correlation_id
        self.response_class: Any = None
        self.header: ReceivedHeader | None = None

    def get_response_class(self) -> HeaderKeepingEntry | None:
        self.response_class = self.entry.get_response_class()
        return None if self.response_class is None else self

    def parse_header(self, data: Any, version: Any = None) -> ReceivedHeader:
        pos = data.tell()
        frame = data.getbuffer() if isinstance(data, ResponseFrame) else data  # (else kafka-python's bytearray)
        state, end = read_header_tags(frame, pos + _INT32.size)
        data.seek(end)
        self.header = ReceivedHeader(_INT32.unpack_from(frame, pos)[0], state)
        return self.header

    def decode(self, data: Any, version: Any = None) -> Any:
        response = self.response_class.decode(data)
        response._header = self.header
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.entry, name)

    def __repr__(self) -> str:
        return f'{self.entry!r} (response header kept)'


def keeping_header(entry: Any) -> HeaderKeepingEntry:
    """``entry`` (a queued request header, or what kafka_kip queues in its place) keeping its response's header."""
    return HeaderKeepingEntry(entry)


def _check() -> str | None:
    """What is wrong with a response decoded through a wrapped entry (None: nothing)."""
    state = ResponseConsistencyState(cluster_id='tripwire', consistency_token=42)
    body = DescribeClusterResponse(version=0, throttle_time_ms=0, error_code=0, error_message=None,
                                   cluster_id='tripwire', controller_id=0, brokers=[])
    payload = ResponseHeader(correlation_id=1, consistency_state=state).encode(flexible=True) + body.encode(version=0)
    protocol = KafkaProtocol(client_id='tripwire')
    protocol.in_flight_requests.append(keeping_header(StockRequestHeader(
        request_api_key=DescribeClusterResponse.API_KEY, request_api_version=0, correlation_id=1, client_id='t')))
    [(correlation_id, response)] = protocol.receive_bytes(struct.pack('>i', len(payload)) + payload)
    kept = getattr(response, 'header', None)
    if (correlation_id, kept, response.cluster_id) != (1, (1, ('tripwire', 42)), 'tripwire'):
        return f'got {response!r} with header {kept!r}'
    return None


def install() -> Any:
    """:func:`keeping_header`, after checking that kafka-python's parser still decodes a response through the
    queued entry's class; raises KafkaPythonChanged otherwise."""
    require_names(KafkaProtocol._process_response, {'get_response_class', 'parse_header', 'decode'},
                  'to decode responses by the class the queued request entry names')
    require_behaviour(_check, 'KafkaProtocol._process_response no longer decodes responses by the class the '
                              'queued entry names')
    return keeping_header


__all__ = ['HeaderKeepingEntry', 'ReceivedHeader', 'install', 'keeping_header']
