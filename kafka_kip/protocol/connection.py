"""kafka_kip's broker connections: the patched response classes, the broker's features, KIP-1243 headers.

:class:`KipConnectionManager <kafka_kip.metadata.KipConnectionManager>` builds a :class:`KipConnection` for
every broker; connections of stock kafka-python clients in the same process stay kafka-python's own.

KIP-1243: once a broker has advertised ``kip.1243``, every flexible request to it carries the client's
consistency context (``connection.consistency_session``, a
:class:`~kafka_kip.metadata.consistency_session.ConsistencySession` its manager sets) in its header, and every flexible response
keeps its header (``response.header``): its state goes to the session. A response from another cluster than
the session's context fails its request with ``InconsistentClusterIdError`` instead of being returned. Nothing
of this happens on a connection to a broker that did not advertise ``kip.1243``.
"""
from __future__ import annotations

from typing import Any

from kafka.future import Future
from kafka.net.connection import KafkaConnection
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.protocol.parser import KafkaProtocol

from kafka_kip._patch import (
    connection_features,
    connection_parser,
    parser_frame,
    parser_response_class,
    request_header,
    response_header,
)
from kafka_kip.protocol.features import KIP_1243, FeatureVersions, feature_supported, parse_supported_features
from kafka_kip.protocol.headers import flexible_response_header
from kafka_kip.protocol.messages import EXTENDED_RESPONSES

_send_extended = parser_response_class.install(EXTENDED_RESPONSES)
_with_header_state = request_header.install()
_keeping_header = response_header.install()


class KipProtocol(KafkaProtocol):
    """kafka-python's framing and decoding; responses of the extended APIs decode with kafka_kip's classes
    (:data:`~kafka_kip.protocol.messages.EXTENDED_RESPONSES`), so their extension fields are read.

    ``consistency`` (set by the connection once its broker advertised ``kip.1243``): the session whose state
    flexible requests carry, and whose flexible responses keep their header.
    """

    consistency: Any = None
    receive_bytes = parser_frame.install()

    def send_request(self, request: Any, correlation_id: int | None = None) -> int:
        session = self.consistency
        # no response header to carry state back (ApiVersions', KIP-511): no state sent either
        if session is None or not flexible_response_header(request.API_KEY,
                                                           request.flexible_version_q(request.API_VERSION)):
            return _send_extended(self, request, correlation_id)
        sent = session.request_state()
        correlation_id = _send_extended(self, request if sent is None else _with_header_state(request, *sent),
                                        correlation_id)
        if request.expect_response():
            self.in_flight_requests[-1] = _keeping_header(self.in_flight_requests[-1])
        return correlation_id


def _record_features(connection: KipConnection, response: ApiVersionsResponse) -> None:
    connection.supported_features = parse_supported_features(response)
    session = connection.consistency_session
    if session is not None and feature_supported(connection.supported_features, KIP_1243):
        connection.parser.consistency = session


_send_recording_features = connection_features.install(_record_features)


class KipConnection(KafkaConnection):
    """kafka-python's ``KafkaConnection`` parsing with :class:`KipProtocol`, keeping the broker's features and
    speaking KIP-1243 with a broker that advertises it (see the module docstring).

    ``supported_features`` holds the features of the connection's last ApiVersionsResponse without error
    (see :func:`kafka_kip.protocol.features.supports`), ``None`` before it arrived.
    """

    supported_features: FeatureVersions | None = None
    #: the client's KIP-1243 session, set by its connection manager (None: a connection of its own)
    consistency_session: Any = None
    connection_made = connection_parser.install(parser=KipProtocol)

    def _send_request(self, request: Any, future: Future | None = None, timeout_at: float | None = None) -> Future:
        session = getattr(self.parser, 'consistency', None)
        if session is None:
            return _send_recording_features(self, request, future=future, timeout_at=timeout_at)
        answered = future if future is not None else Future()
        received = _send_recording_features(self, request, future=Future(), timeout_at=timeout_at)
        received.add_callback(self._consistency_checked, session, request, answered)
        received.add_errback(answered.failure)
        return answered

    def _consistency_checked(self, session: Any, request: Any, answered: Future, response: Any) -> None:
        kept = getattr(response, 'header', None)
        received = getattr(kept, 'consistency_state', None)
        if received is None:
            answered.success(response)
            return
        error = session.on_response(self.node_id, getattr(request.header, 'consistency_state', None), received)
        if error is not None:
            answered.failure(error)
        else:
            answered.success(response)


__all__ = ['KipConnection', 'KipProtocol']
