"""One cluster's connections for the mirror: raw requests on kafka-python's connection manager.

The mirror talks to each cluster through a :class:`~kafka_kip.metadata.KipConnectionManager` (kafka-python's
manager whose metadata cache refuses outdated responses, KIP-232) on an event loop it drives itself: the
source and target clients of one mirror share one :class:`~kafka.net.selector.NetworkSelector`, and the
copier polls it. Blocking calls (:meth:`ClusterClient.request`) are for set-up and housekeeping between
polls; the copy loop uses :meth:`ClusterClient.send` futures and coroutines.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from kafka.future import Future
from kafka.net.selector import NetworkSelector
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.metadata import KipConnectionManager
from kafka_kip.protocol.features import supports

#: kafka-python's connection configs the mirror passes through (``source.``/``target.`` properties).
CONNECTION_CONFIGS = frozenset(KipConnectionManager.DEFAULT_CONFIG) - {'bootstrap_servers', 'metrics'}


_NO_TOPIC_ID = uuid.UUID(int=0)


def topic_id_text(topic_id: uuid.UUID | None) -> str | None:
    """A topic id as text; None when the broker gives none (Metadata before v10, or the null id)."""
    return None if topic_id is None or topic_id == _NO_TOPIC_ID else str(topic_id)


class ClusterClient:
    """Connections to one cluster (``source`` or ``target``) on a shared event loop."""

    def __init__(self, name: str, bootstrap_servers: str, net: NetworkSelector, **configs: Any) -> None:
        unknown = set(configs) - CONNECTION_CONFIGS
        if unknown:
            raise ValueError(f'unknown {name} client config(s) {sorted(unknown)}; known: {sorted(CONNECTION_CONFIGS)}')
        self.name = name
        self.net = net
        configs.setdefault('client_id', f'kafka-kip-mirror-{name}')
        # a fetch answer can be as large as the fetch size limits allow (kafka-python's consumer default)
        configs.setdefault('receive_message_max_bytes', 100_000_000)
        # the copier keeps up to 5 produces per target node in flight, plus an offset map write and a task's question
        configs.setdefault('max_in_flight_requests_per_connection', 10)
        self.manager = KipConnectionManager(net, bootstrap_servers=bootstrap_servers, **configs)
        self.request_timeout_ms: int = self.manager.config['request_timeout_ms']

    @property
    def cluster(self) -> Any:
        """The metadata cache (a KipClusterMetadata)."""
        return self.manager.cluster

    def bootstrap(self, timeout_ms: int = 30000) -> None:
        """Connect and load metadata; raises KafkaTimeoutError naming the cluster on failure."""
        future = self.manager.bootstrap_async(timeout_ms=timeout_ms)
        self.wait(future, timeout_ms)

    def wait(self, future: Future, timeout_ms: int | None = None) -> Any:
        """Drive the event loop until ``future`` resolves; return its value or raise its exception."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        self.net.poll(timeout_ms=timeout_ms, future=future)
        if not future.is_done:
            raise Errors.KafkaTimeoutError(f'{self.name} cluster: no answer within {timeout_ms} ms')
        if future.failed():
            raise future.exception
        return future.value

    def send(self, request: Any, node_id: Any = None) -> Future:
        """Send ``request`` to ``node_id`` (least loaded node if None); a future of the response."""
        return self.manager.send(request, node_id=node_id)

    def request(self, request: Any, node_id: Any = None, timeout_ms: int | None = None) -> Any:
        """Send ``request`` and wait for its response (not from inside a callback or coroutine)."""
        return self.wait(self.send(request, node_id), timeout_ms)

    def track_topics(self, topics: Iterable[str], timeout_ms: int | None = None) -> None:
        """Keep ``topics`` (besides those already tracked) in the metadata; waits for them to arrive."""
        pending = [future for future in map(self.cluster.add_topic, topics) if not future.is_done]
        if pending:
            self.refresh(timeout_ms)

    def refresh(self, timeout_ms: int | None = None) -> None:
        """Wait for a metadata update."""
        self.wait(self.cluster.request_update(), timeout_ms)

    def leader(self, tp: TopicPartition) -> tuple[int, int]:
        """``(leader node id, leader epoch)``; node id -1 when unknown or offline, epoch -1 when unknown."""
        leader = self.cluster.leader_for_partition(tp)
        epoch = self.cluster.leader_epoch_for_partition(tp)
        return (-1 if leader is None else leader), (-1 if epoch is None else epoch)

    def connect(self, node_id: Any, timeout_ms: int | None = None) -> None:
        """Open the connection to ``node_id`` (ApiVersions done, so its features are known)."""
        conn = self.manager.get_connection(node_id)
        self.wait(conn.init_future, timeout_ms)

    def supports(self, node_id: Any, feature: str) -> bool:
        """True if broker ``node_id`` advertised ``feature`` (connects first if needed)."""
        conn = self.manager._conns.get(node_id)
        if conn is None or not conn.init_future.is_done:
            self.connect(node_id)
        return supports(self.manager, node_id, feature)

    def api_versions(self, node_id: Any) -> dict[int, tuple[int, int]]:
        """The API versions broker ``node_id`` advertised, ``{api_key: (min, max)}`` (connects first if needed)."""
        conn = self.manager._conns.get(node_id)
        if conn is None or not conn.init_future.is_done:
            self.connect(node_id)
            conn = self.manager._conns.get(node_id)
        data = getattr(conn, 'broker_version_data', None)
        return dict(data.api_versions) if data is not None and data.api_versions else {}

    def topic_id(self, topic: str) -> str | None:
        """The id of ``topic`` in the metadata cache, as text (None: unknown, or the broker gives none)."""
        return topic_id_text(self.cluster.topic_id(topic))

    def close(self) -> None:
        self.manager.close()
