"""Feature negotiation: which broker advertises which extension.

A broker that implements an extension lists it in ApiVersionsResponse ``SupportedFeatures`` (tag 0 of
v3+, decoded by kafka-python as ``response.supported_features``) with min_version 1 and max_version 1.
kafka-python does not keep the ApiVersionsResponse of a connection (it keeps only the api versions); kafka_kip's
connections (:class:`kafka_kip.protocol.connection.KipConnection`) record its parsed features as
``supported_features``. :func:`supports` then answers "does broker N support feature F" for a kafka_kip
client, consumer, producer, admin client or connection manager; a connection of a stock kafka-python client
has no recorded features, so for it every feature counts as not advertised.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka.net.manager import KafkaConnectionManager
from kafka.protocol.metadata import ApiVersionsResponse

KIP_232 = 'kip.232'
KIP_253 = 'kip.253'
KIP_391 = 'kip.391'
KIP_1243 = 'kip.1243'
#: Every extension feature name, in proposal order.
ALL_FEATURES: tuple[str, ...] = (KIP_232, KIP_253, KIP_391, KIP_1243)
#: The one version of each feature defined so far.
FEATURE_VERSION = 1

#: (min_version, max_version) per advertised feature name.
FeatureVersions = dict[str, tuple[int, int]]


def parse_supported_features(response: ApiVersionsResponse) -> FeatureVersions:
    """``{name: (min_version, max_version)}`` from an ApiVersionsResponse; empty for v0-2 or no features."""
    return {feature.name: (feature.min_version, feature.max_version)
            for feature in (response.supported_features or ())}


def supported_features_for_broker(features: Iterable[str] = ALL_FEATURES) -> list[Any]:
    """The ApiVersionsResponse ``supported_features`` list a broker implementing ``features`` sends."""
    key = ApiVersionsResponse.SupportedFeatureKey
    return [key(name=name, min_version=FEATURE_VERSION, max_version=FEATURE_VERSION) for name in features]


def manager_of(client_or_manager: Any) -> KafkaConnectionManager:
    """The connection manager of a kafka-python or kafka_kip client (or the manager itself)."""
    # consumer/admin/KafkaNetClient/ClusterMetadata hold ._manager; a producer holds ._sender._client._manager
    obj = client_or_manager
    for _ in range(4):
        if isinstance(obj, KafkaConnectionManager):
            return obj
        obj = next((getattr(obj, name) for name in ('_manager', '_client', '_sender') if hasattr(obj, name)),
                   None)
    raise TypeError(f'expected a kafka client or KafkaConnectionManager, got {client_or_manager!r}')


def broker_features(client_or_manager: Any, node_id: Any) -> FeatureVersions | None:
    """The features broker ``node_id`` advertised on its current connection, or None if not yet known.

    None means there is no connection to the node, its ApiVersions exchange has not completed, or it is a
    connection of a stock kafka-python client (which records no features).
    """
    conn = manager_of(client_or_manager)._conns.get(node_id)
    return getattr(conn, 'supported_features', None)


def supports(client_or_manager: Any, node_id: Any, feature: str, version: int = FEATURE_VERSION) -> bool:
    """True if broker ``node_id`` advertised ``feature`` at ``version`` on its current connection."""
    return feature_supported(broker_features(client_or_manager, node_id), feature, version)


def feature_supported(features: Mapping[str, tuple[int, int]] | None, feature: str,
                      version: int = FEATURE_VERSION) -> bool:
    """True if ``features`` (see :func:`parse_supported_features`) covers ``feature`` at ``version``."""
    if not features or feature not in features:
        return False
    low, high = features[feature]
    return low <= version <= high


__all__ = [
    'KIP_232', 'KIP_253', 'KIP_391', 'KIP_1243', 'ALL_FEATURES', 'FEATURE_VERSION', 'FeatureVersions',
    'parse_supported_features', 'supported_features_for_broker',
    'broker_features', 'supports', 'feature_supported',
]
