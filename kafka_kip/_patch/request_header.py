"""A request header with KIP-1243's consistency state, built where kafka-python builds the header itself.

kafka-python's ``KafkaProtocol.send_request`` gives each request its header (``request.with_header(...)``, a
kafka-python ``RequestHeader``) and encodes it at once; there is no argument for other header fields. The
request handed to it instead is a :class:`RequestWithHeaderState`, which answers ``with_header`` by building
the header kafka-python would and then putting kafka_kip's ``RequestHeader`` (same fields plus
``consistency_state``) in the request's header slot (``_header``, which ``with_header`` sets and ``encode``
reads), and passes everything else through to the request. Scoped: only
:class:`kafka_kip.protocol.connection.KipProtocol` does this, for a connection to a ``kip.1243`` broker.

The tripwire sends an ApiVersions v3 request through kafka-python's own ``send_request`` this way and checks
that the bytes on the wire carry the state and that the queued header is kafka_kip's.
"""
from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.parser import KafkaProtocol

from kafka_kip._patch.rebind import KAFKA_PYTHON_VERSION, KafkaPythonChanged, require_names
from kafka_kip.protocol.headers import RequestConsistencyState, RequestHeader

_HEADER_FIELDS = tuple(RequestHeader._struct.fields)


class RequestWithHeaderState:
    """``request`` as kafka-python's ``send_request`` sees it, its header carrying ``consistency_state``."""

    __slots__ = ('request', 'consistency_state')

    def __init__(self, request: Any, consistency_state: RequestConsistencyState) -> None:
        self.request = request
        self.consistency_state = consistency_state

    def with_header(self, *args: Any, **kwargs: Any) -> None:
        request = self.request
        request.with_header(*args, **kwargs)
        stock = request._header
        fields = {name: getattr(stock, name) for name in _HEADER_FIELDS if name != 'consistency_state'}
        request._header = RequestHeader(**fields, consistency_state=self.consistency_state)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.request, name)

    def __repr__(self) -> str:
        return repr(self.request)


def _check(send_request: Callable[..., int]) -> None:
    state = RequestConsistencyState(cluster_id='tripwire', consistency_token=42)
    request = ApiVersionsRequest(version=3, client_software_name='kafka-kip', client_software_version='0')
    protocol = KafkaProtocol(client_id='tripwire')
    problem = None
    try:
        send_request(protocol, RequestWithHeaderState(request, state))
        frame = protocol.send_bytes()
        header = RequestHeader.decode(io.BytesIO(frame[4:]), flexible=True)
        if header.consistency_state != state or header.request_api_key != request.API_KEY:
            problem = f'the header on the wire is {header}'
        elif not isinstance(protocol.in_flight_requests[-1], RequestHeader):
            problem = f'the queued header is {protocol.in_flight_requests[-1]!r}'
    except Exception as exc:  # whatever broke: the header is not built where kafka_kip replaces it
        problem = f'{type(exc).__name__}: {exc}'
    if problem is not None:
        raise KafkaPythonChanged(f'kafka-python {KAFKA_PYTHON_VERSION}: KafkaProtocol.send_request no longer '
                                 f'encodes the header request.with_header() sets ({problem}); kafka_kip must be '
                                 'adapted')


def install(send_request: Callable[..., int] = KafkaProtocol.send_request) -> type[RequestWithHeaderState]:
    """The wrapper that gives a request kafka_kip's header with a consistency state when ``send_request``
    (kafka-python's by default) encodes it; raises KafkaPythonChanged if it would not."""
    require_names(KafkaProtocol.send_request, {'with_header', 'encode', 'header'},
                  'to build, encode and queue the request header')
    _check(send_request)
    return RequestWithHeaderState


__all__ = ['RequestWithHeaderState', 'install']
