"""One cluster's connections for the mirror: raw requests on kafka-python's connection manager.

The mirror talks to each cluster through a :class:`~kafka_kip.metadata.KipConnectionManager` (kafka-python's
manager whose metadata cache refuses outdated responses, KIP-232) on an event loop it drives itself: the
source and target clients of one mirror share one :class:`~kafka.net.selector.NetworkSelector`, and the
copier polls it. Blocking calls (:meth:`ClusterClient.request`) are for set-up and housekeeping between
polls; the copy loop uses :meth:`ClusterClient.send` futures and coroutines.

Back-pressure waits, it never fails: a request for a connection that is paused (as many requests in
flight as it allows, its socket buffer full, or throttled by the broker) queues in the client, in order,
and goes out when the connection takes requests again. Only a connection that is down fails a request.
"""
from __future__ import annotations

import uuid
from collections import Counter, deque
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
_PAUSED_RETRY_S = 0.01  # a paused connection with nothing in flight (throttled) is looked at again this often


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
        #: Requests sent, by API name (``'FetchRequest'``, ...): the mirror's request counts.
        self.requests_sent: Counter[str] = Counter()
        self._waiting: dict[Any, deque[tuple[Any, Future]]] = {}  # node -> requests held by back-pressure
        self._pumping: set[Any] = set()  # nodes with a pump scheduled
        self._id_texts: dict[uuid.UUID, str | None] = {}

    @property
    def cluster(self) -> Any:
        """The metadata cache (a KipClusterMetadata)."""
        return self.manager.cluster

    def bootstrap(self, timeout_ms: int | None = None) -> None:
        """Connect and load metadata within ``timeout_ms`` (default: the request timeout); raises
        KafkaTimeoutError naming the cluster on failure."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
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
        """Send ``request`` to ``node_id`` (least loaded node if None); a future of the response.

        While the connection is paused the request waits in the client (see the module docstring).
        """
        node_id = node_id if node_id is not None else self.manager.least_loaded_node()
        waiting = self._waiting.get(node_id)
        if waiting or self._paused(node_id):
            future = Future()
            self._waiting.setdefault(node_id, deque()).append((request, future))
            self._schedule_pump(node_id)
            return future
        return self._send_now(request, node_id)

    @property
    def requests_waiting(self) -> int:
        """Requests held by back-pressure right now."""
        return sum(len(waiting) for waiting in self._waiting.values())

    def _paused(self, node_id: Any) -> bool:
        conn = self.manager._conns.get(node_id)
        return conn is not None and bool(conn.paused) and not conn.closed

    def _send_now(self, request: Any, node_id: Any) -> Future:
        self.requests_sent[type(request).__name__] += 1
        future = self.manager.send(request, node_id=node_id)
        if self._waiting.get(node_id):
            future.add_both(lambda _: self._schedule_pump(node_id))
        return future

    def _schedule_pump(self, node_id: Any, delay: float = 0.0) -> None:
        if node_id in self._pumping:
            return
        self._pumping.add(node_id)
        pump = lambda: self._pump(node_id)  # noqa: E731
        self.net.call_later(delay, pump) if delay else self.net.call_soon(pump)

    def _pump(self, node_id: Any) -> None:
        """Send the requests waiting for ``node_id`` while its connection takes them."""
        self._pumping.discard(node_id)
        waiting = self._waiting.get(node_id)
        while waiting and not self._paused(node_id):
            request, future = waiting.popleft()
            self._send_now(request, node_id).chain(future)
        if not waiting:
            self._waiting.pop(node_id, None)
            return
        conn = self.manager._conns.get(node_id)
        if conn is not None and conn.in_flight_requests:
            # an answer frees a slot: look again once the connection has handled it
            conn.in_flight_requests[0][1].add_both(lambda _: self._schedule_pump(node_id))
        else:
            self._schedule_pump(node_id, _PAUSED_RETRY_S)

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
        cluster = self.manager.cluster
        leader = cluster.leader_for_partition(tp)
        epoch = cluster.leader_epoch_for_partition(tp)
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
        found = self.cluster.topic_id(topic)
        text = self._id_texts.get(found)
        if text is None and found is not None:
            text = self._id_texts[found] = topic_id_text(found)
        return text

    def close(self) -> None:
        self.manager.close()
