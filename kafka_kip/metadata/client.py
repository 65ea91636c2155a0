"""``KipNetClient``: kafka-python's network client with kafka_kip's connections and KIP-232 cluster metadata.

Pass it as ``kafka_client=KipNetClient`` to ``KafkaConsumer``, ``KafkaProducer`` or ``KafkaAdminClient``
(kafka-python's or kafka_kip's); it takes the same arguments as ``kafka.net.compat.KafkaNetClient``.
"""
from __future__ import annotations

from typing import Any

from kafka.net.compat import KafkaNetClient
from kafka.net.manager import KafkaConnectionManager
from kafka.net.selector import NetworkSelector

from kafka_kip._patch import manager_connection, manager_init
from kafka_kip.metadata.cluster import KipClusterMetadata
from kafka_kip.protocol.connection import KipConnection

_init_with_kip_cluster = manager_init.install(cluster_metadata=KipClusterMetadata)


class KipConnectionManager(KafkaConnectionManager):
    """kafka-python's connection manager with a :class:`KipClusterMetadata` as its ``cluster`` and a
    :class:`~kafka_kip.protocol.connection.KipConnection` per broker (extension fields decoded, features
    recorded).

    The cluster refreshes metadata again after the client's ``retry_backoff_ms`` (kafka-python builds its
    cluster without it, so its own default of 100 ms applies), which is the backoff KIP-232 asks for
    after an outdated response.
    """

    get_connection = manager_connection.install(connection=KipConnection)

    def __init__(self, net: NetworkSelector, **configs: Any) -> None:
        _init_with_kip_cluster(self, net, **configs)
        if 'retry_backoff_ms' in configs:
            self.cluster.config['retry_backoff_ms'] = configs['retry_backoff_ms']


class KipNetClient(KafkaNetClient):
    """``KafkaNetClient`` whose manager is a :class:`KipConnectionManager` (unless one is given)."""

    def __init__(self, net: NetworkSelector | None = None, manager: KafkaConnectionManager | None = None,
                 **configs: Any) -> None:
        if manager is None:
            net = NetworkSelector(**configs) if net is None else net
            manager = KipConnectionManager(net, **configs)
        super().__init__(net=net, manager=manager, **configs)
