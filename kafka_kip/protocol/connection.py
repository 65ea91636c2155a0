"""kafka_kip's broker connections: the patched response classes and the broker's advertised features.

:class:`KipConnectionManager <kafka_kip.metadata.KipConnectionManager>` builds a :class:`KipConnection` for
every broker; connections of stock kafka-python clients in the same process stay kafka-python's own.
"""
from __future__ import annotations

from kafka.net.connection import KafkaConnection
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.protocol.parser import KafkaProtocol

from kafka_kip._patch import connection_features, connection_parser, parser_response_class
from kafka_kip.protocol.features import FeatureVersions, parse_supported_features
from kafka_kip.protocol.messages import EXTENDED_RESPONSES


class KipProtocol(KafkaProtocol):
    """kafka-python's framing and decoding; responses of the extended APIs decode with kafka_kip's classes
    (:data:`~kafka_kip.protocol.messages.EXTENDED_RESPONSES`), so their extension fields are read."""

    send_request = parser_response_class.install(EXTENDED_RESPONSES)


def _record_features(connection: KipConnection, response: ApiVersionsResponse) -> None:
    connection.supported_features = parse_supported_features(response)


class KipConnection(KafkaConnection):
    """kafka-python's ``KafkaConnection`` parsing with :class:`KipProtocol` and keeping the broker's features.

    ``supported_features`` holds the features of the connection's last ApiVersionsResponse without error
    (see :func:`kafka_kip.protocol.features.supports`), ``None`` before it arrived.
    """

    supported_features: FeatureVersions | None = None
    connection_made = connection_parser.install(parser=KipProtocol)
    _send_request = connection_features.install(_record_features)


__all__ = ['KipConnection', 'KipProtocol']
