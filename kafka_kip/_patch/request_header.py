"""A request header with KIP-1243's consistency state, built where kafka-python builds the header itself.

kafka-python's ``KafkaProtocol.send_request`` gives each request its header (``request.with_header(...)``, a
kafka-python ``RequestHeader`` in the request's ``_header`` slot) and encodes it at once (``encode`` asks the
header for its bytes); there is no argument for other header fields. The request handed to it instead is a
:class:`RequestWithHeaderState`, which answers ``with_header`` by letting the request build kafka-python's header
and then wrapping it in a :class:`HeaderWithState`: the same header, whose flexible encoding ends with a tagged
section carrying tag 0 (bytes from :func:`kafka_kip.protocol.headers.consistency_state_tags`) instead of the empty
one. Everything else passes through to the request. Cost: two small objects and one bytes concatenation per
request. Scoped: only :class:`kafka_kip.protocol.connection.KipProtocol` does this, for a connection to a
``kip.1243`` broker.

The tripwire sends an ApiVersions v3 request through kafka-python's own ``send_request`` this way and checks that
the bytes on the wire decode, with kafka_kip's ``RequestHeader`` class, to the state, and that the queued header
is the wrapped one.
"""
from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.parser import KafkaProtocol

from kafka_kip._patch.rebind import require_behaviour, require_names
from kafka_kip.protocol.headers import ConsistencyState, RequestHeader, consistency_state_tags


class HeaderWithState:
    """kafka-python's request ``header``, encoded (flexible) with ``tags`` as its tagged-field section."""

    __slots__ = ('header', 'consistency_state', 'tags')

    def __init__(self, header: Any, consistency_state: ConsistencyState, tags: bytes) -> None:
        object.__setattr__(self, 'header', header)
        object.__setattr__(self, 'consistency_state', consistency_state)
        object.__setattr__(self, 'tags', tags)

    def encode(self, flexible: bool = False) -> bytes:
        data = self.header.encode(flexible=flexible)
        return data[:-1] + self.tags if flexible else data  # the empty tagged section is the last byte

    def __getattr__(self, name: str) -> Any:
        return getattr(self.header, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.header, name, value)

    def __repr__(self) -> str:
        return f'{self.header!r} + {self.consistency_state}'


class RequestWithHeaderState:
    """``request`` as kafka-python's ``send_request`` sees it: its header carries ``consistency_state``."""

    __slots__ = ('request', 'consistency_state', 'tags')

    def __init__(self, request: Any, consistency_state: ConsistencyState, tags: bytes) -> None:
        self.request = request
        self.consistency_state = consistency_state
        self.tags = tags

    def with_header(self, *args: Any, **kwargs: Any) -> None:
        request = self.request
        request.with_header(*args, **kwargs)
        request._header = HeaderWithState(request._header, self.consistency_state, self.tags)

    # what kafka-python's send_request asks, passed through without a __getattr__ lookup (this runs per request)
    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        return self.request.encode(*args, **kwargs)

    def expect_response(self) -> bool:
        return self.request.expect_response()

    @property
    def header(self) -> Any:
        return self.request._header

    @property
    def API_KEY(self) -> int:  # noqa: N802  (kafka-python's name)
        return self.request.API_KEY

    def __getattr__(self, name: str) -> Any:
        return getattr(self.request, name)

    def __repr__(self) -> str:
        return repr(self.request)


def _check(send_request: Callable[..., int]) -> str | None:
    """What is wrong with the header ``send_request`` puts on the wire for a wrapped request (None: nothing)."""
    state = ConsistencyState('tripwire', 42)
    request = ApiVersionsRequest(version=3, client_software_name='kafka-kip', client_software_version='0')
    protocol = KafkaProtocol(client_id='tripwire')
    send_request(protocol, RequestWithHeaderState(request, state, consistency_state_tags(*state)))
    frame = protocol.send_bytes()
    header = RequestHeader.decode(io.BytesIO(frame[4:]), flexible=True)
    wire_state = header.consistency_state
    if (wire_state.cluster_id, wire_state.consistency_token) != state or header.correlation_id != 1:
        return f'the header on the wire is {header}'
    if not isinstance(protocol.in_flight_requests[-1], HeaderWithState):
        return f'the queued header is {protocol.in_flight_requests[-1]!r}'
    return None


def install(send_request: Callable[..., int] = KafkaProtocol.send_request) -> type[RequestWithHeaderState]:
    """The wrapper that gives a request a header with a consistency state when ``send_request`` (kafka-python's
    by default) encodes it; raises KafkaPythonChanged if it would not."""
    require_names(KafkaProtocol.send_request, {'with_header', 'encode', 'header'},
                  'to build, encode and queue the request header')
    require_behaviour(lambda: _check(send_request),
                      'KafkaProtocol.send_request no longer encodes the header request.with_header() sets')
    return RequestWithHeaderState


__all__ = ['HeaderWithState', 'RequestWithHeaderState', 'install']
