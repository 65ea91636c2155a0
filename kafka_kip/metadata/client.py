"""``KipNetClient``: kafka-python's network client whose cluster metadata follows the KIP-232 rules.

Pass it as ``kafka_client=KipNetClient`` to ``KafkaConsumer``, ``KafkaProducer`` or ``KafkaAdminClient``
(kafka-python's or kafka_kip's); it takes the same arguments as ``kafka.net.compat.KafkaNetClient``.
"""
from __future__ import annotations

from typing import Any

from kafka.net.compat import KafkaNetClient
from kafka.net.manager import KafkaConnectionManager
from kafka.net.selector import NetworkSelector

# Registers the patched MetadataResponse, so responses are decoded with the partition epoch fields.
import kafka_kip.protocol.messages  # noqa: F401
from kafka_kip.metadata.cluster import KipClusterMetadata


class KipConnectionManager(KafkaConnectionManager):
    """kafka-python's connection manager with a :class:`KipClusterMetadata` as its ``cluster``."""

    def __init__(self, net: NetworkSelector, **configs: Any) -> None:
        super().__init__(net, **configs)
        # kafka-python builds its ClusterMetadata inline in __init__, with no factory to override, and
        # only starts using it at bootstrap: swap it for ours, with the very same configuration.
        self.cluster = KipClusterMetadata(**self.cluster.config)
        self.cluster.attach(self)


class KipNetClient(KafkaNetClient):
    """``KafkaNetClient`` whose manager is a :class:`KipConnectionManager` (unless one is given)."""

    def __init__(self, net: NetworkSelector | None = None, manager: KafkaConnectionManager | None = None,
                 **configs: Any) -> None:
        if manager is None:
            net = NetworkSelector(**configs) if net is None else net
            manager = KipConnectionManager(net, **configs)
        super().__init__(net=net, manager=manager, **configs)
