"""``KipNetClient``: kafka-python's network client with kafka_kip's connections, KIP-232 cluster metadata and
KIP-1243 consistency.

Pass it as ``kafka_client=KipNetClient`` to ``KafkaConsumer``, ``KafkaProducer`` or ``KafkaAdminClient``
(kafka-python's or kafka_kip's); it takes the same arguments as ``kafka.net.compat.KafkaNetClient``, plus
``consistency_context_store`` (kafka_kip's clients take it as a config).
"""
from __future__ import annotations

import random
import time
from typing import Any

from kafka.future import Future
from kafka.net.compat import KafkaNetClient
from kafka.net.manager import KafkaConnectionManager
from kafka.net.selector import NetworkSelector
from kafka.protocol.api_key import ApiKey

from kafka_kip._patch import manager_connection, manager_init, manager_transport
from kafka_kip.errors import StaleMetadataError
from kafka_kip.metadata.cluster import KipClusterMetadata
from kafka_kip.metadata.consistency_session import Address, ConsistencySession
from kafka_kip.metadata.store import ConsistencyContextStore, require_store
from kafka_kip.protocol.connection import KipConnection
from kafka_kip.protocol.headers import METADATA_CACHE_APIS
from kafka_kip.protocol.transport import KipSSLTransport, KipTCPTransport

_init_with_kip_cluster = manager_init.install(cluster_metadata=KipClusterMetadata)
_get_kip_connection = manager_connection.install(connection=KipConnection)
_build_kip_transport = manager_transport.install(tcp=KipTCPTransport, ssl=KipSSLTransport)


def answered_stale(request: Any, response: Any) -> bool:
    """True if ``response`` came from a broker whose metadata is older than the context ``request`` carried
    (its header's consistency token is lower: the broker answered STALE_METADATA)."""
    sent = getattr(request.header, 'consistency_state', None)
    received = getattr(getattr(response, 'header', None), 'consistency_state', None)
    return sent is not None and received is not None and received.consistency_token < sent.consistency_token


class KipConnectionManager(KafkaConnectionManager):
    """kafka-python's connection manager with a :class:`KipClusterMetadata` as its ``cluster``, a
    :class:`~kafka_kip.protocol.connection.KipConnection` per broker (extension fields decoded, features
    recorded) and a :class:`~kafka_kip.metadata.consistency_session.ConsistencySession` (``consistency``) over the
    ``consistency_context_store`` config (default: a store of this client's own, ``ConsistencyContextStore.empty()``).

    The cluster refreshes metadata again after the client's ``retry_backoff_ms`` (kafka-python builds its
    cluster without it, so its own default of 100 ms applies), which is the backoff KIP-232 asks for
    after an outdated response.

    KIP-1243: a request of an API that reads the metadata cache (``METADATA_CACHE_APIS``) that a broker answers
    from older metadata than the request's context (STALE_METADATA) is sent again until the request times out:
    a Metadata request, or one that was not for a given broker, at once to another broker that is not known
    stale (:meth:`least_loaded_node` avoids those), otherwise to the same broker after ``retry_backoff_ms``. A
    request still answered stale once its request timeout has passed since it was first sent fails with
    ``StaleMetadataError`` (retriable); while no
    broker is known (at bootstrap) the stale answer is returned, for its broker list. Once the session is fatal (another cluster than the
    context's), every send fails with its ``InconsistentClusterIdError`` and no connection is opened
    (:meth:`get_connection` raises it, which also ends a bootstrap under way with it).
    """

    DEFAULT_CONFIG = dict(KafkaConnectionManager.DEFAULT_CONFIG, consistency_context_store=None)

    def __init__(self, net: NetworkSelector, **configs: Any) -> None:
        store = require_store(configs.get('consistency_context_store'))
        _init_with_kip_cluster(self, net, **configs)
        if 'retry_backoff_ms' in configs:
            self.cluster.config['retry_backoff_ms'] = configs['retry_backoff_ms']
        self.consistency = ConsistencySession(store or ConsistencyContextStore.empty(),
                                              stale_backoff_ms=self.config['reconnect_backoff_max_ms'])
        self.consistency.address_of = self._address_of
        self.consistency.on_context_advanced = self.cluster.context_advanced
        self.cluster.consistency = self.consistency

    #: kafka-python's, building :mod:`kafka_kip.protocol.transport`'s transports (sockets read in large pieces)
    _build_transport = _build_kip_transport

    def get_connection(self, node_id: Any, *args: Any, **kwargs: Any) -> KipConnection:
        """kafka-python's ``get_connection`` building a :class:`KipConnection`; raises the session's fatal error
        once there is one."""
        fatal = self.consistency.fatal_error
        if fatal is not None:
            raise fatal
        connection = _get_kip_connection(self, node_id, *args, **kwargs)
        connection.consistency_session = self.consistency
        return connection

    def _address_of(self, node_id: Any) -> Address | None:
        broker = self.cluster.broker_metadata(node_id)
        return None if broker is None else (broker.host, broker.port)

    def send(self, request: Any, node_id: Any = None, request_timeout_ms: int | None = None) -> Future:
        fatal = self.consistency.fatal_error
        if fatal is not None:
            return Future().failure(fatal)
        future = super().send(request, node_id=node_id, request_timeout_ms=request_timeout_ms)
        if request.API_KEY not in METADATA_CACHE_APIS:
            return future
        timeout_ms = self.config['request_timeout_ms'] if request_timeout_ms is None else request_timeout_ms
        answer = Future()
        self._follow(future, request, (node_id, request_timeout_ms, time.monotonic() + timeout_ms / 1000), answer)
        return answer

    def _follow(self, future: Future, request: Any, sending: tuple[Any, int | None, float], answer: Future) -> None:
        """``answer`` gets ``future``'s outcome, or that of ``request`` sent again (``sending``: the node it was for,
        its request timeout and the deadline of all attempts)."""
        future.add_callback(self._answered, request, sending, answer)
        future.add_errback(answer.failure)

    def _answered(self, request: Any, sending: tuple[Any, int | None, float], answer: Future, response: Any) -> None:
        node_id, request_timeout_ms, deadline = sending
        if not answered_stale(request, response):
            answer.success(response)
            return
        if time.monotonic() >= deadline:
            answer.failure(StaleMetadataError(
                f'{type(request).__name__}: answers until the request timed out came from metadata older than '
                f'the consistency context (token {request.header.consistency_state.consistency_token})'))
            return
        anywhere = node_id is None or request.API_KEY == ApiKey.Metadata
        target = self.least_loaded_node() if anywhere else node_id
        if target is None:  # no broker known yet (bootstrap): the cluster takes the answer's broker list
            answer.success(response)
            return
        delay = 0.0 if anywhere and not self.consistency.is_stale(target) else \
            self.cluster.config['retry_backoff_ms'] / 1000

        def resend() -> None:
            if self.consistency.fatal_error is not None:
                answer.failure(self.consistency.fatal_error)
                return
            again = super(KipConnectionManager, self).send(request, node_id=target,
                                                           request_timeout_ms=request_timeout_ms)
            self._follow(again, request, sending, answer)

        self._net.call_later(delay, resend)

    def least_loaded_node(self) -> Any:
        """kafka-python's choice, unless that broker recently answered from metadata older than the client's
        context (KIP-1243): then another broker that did not, if there is one."""
        node_id = super().least_loaded_node()
        if node_id is None or not self.consistency.is_stale(node_id):
            return node_id
        fresh = [broker.node_id for broker in self.cluster.brokers()
                 if not self.consistency.is_stale(broker.node_id) and self.connection_delay(broker.node_id) == 0]
        return random.choice(fresh) if fresh else node_id


class KipNetClient(KafkaNetClient):
    """``KafkaNetClient`` whose manager is a :class:`KipConnectionManager` (unless one is given)."""

    def __init__(self, net: NetworkSelector | None = None, manager: KafkaConnectionManager | None = None,
                 **configs: Any) -> None:
        if manager is None:
            net = NetworkSelector(**configs) if net is None else net
            manager = KipConnectionManager(net, **configs)
        super().__init__(net=net, manager=manager, **configs)
