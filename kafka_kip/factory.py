"""KIP-1243's ``Factory``: clients that share one consistency context store, and each other's writes.

Every client a :class:`ClientFactory` builds uses the factory's :class:`~kafka_kip.ConsistencyContextStore`, so
on brokers that advertise ``kip.1243`` each of them reads metadata at least as new as anything any of them has
seen (the proposal's guarantee). On every broker, stock ones included, the factory also records what its admin
clients create, grow or delete (:mod:`kafka_kip.metadata.written_topics`), and its producers and consumers do
not apply metadata that contradicts those writes, for at most ``max_block_ms`` in a row: a producer sends to a
topic its factory's admin just created or grew with the new partition count, or waits, instead of failing or
using the old count. (Across processes that needs ``kip.1243``: hand the context over with
``store.read().to_bytes()``.)
"""
from __future__ import annotations

from typing import Any

from kafka.errors import KafkaConfigurationError

from kafka_kip.admin import KafkaAdminClient
from kafka_kip.consumer import KafkaConsumer
from kafka_kip.metadata.store import ConsistencyContextStore
from kafka_kip.metadata.written_topics import WrittenTopics
from kafka_kip.producer import KafkaProducer

#: kafka-python's producer default ``max_block_ms``, the factory's default bound for its consumers' waits.
DEFAULT_MAX_BLOCK_MS = 60_000


class ClientFactory:
    """Builds admin clients, producers and consumers that share ``store`` (the proposal's ``Factory``).

    ``max_block_ms``: how long the factory's consumers wait for metadata that reflects the factory's writes
    before taking what the brokers say (a producer uses its own ``max_block_ms``). With
    ``ConsistencyContextStore.eventually_consistent()`` the clients share nothing, writes included.
    """

    def __init__(self, store: ConsistencyContextStore, *, max_block_ms: int = DEFAULT_MAX_BLOCK_MS) -> None:
        if not isinstance(store, ConsistencyContextStore):
            raise TypeError(f'ClientFactory needs a ConsistencyContextStore, got {store!r}')
        if isinstance(max_block_ms, bool) or not isinstance(max_block_ms, int) or max_block_ms < 0:
            raise ValueError(f'max_block_ms must be an int >= 0 (milliseconds), got {max_block_ms!r}')
        self.store = store
        self.max_block_ms = max_block_ms
        #: the writes of this factory's admin clients (None with an eventually consistent store)
        self.written_topics: WrittenTopics | None = WrittenTopics() if store.shares_writes else None

    def _configs(self, configs: dict[str, Any]) -> dict[str, Any]:
        given = configs.get('consistency_context_store', self.store)
        if given is not self.store:
            raise KafkaConfigurationError(f'a ClientFactory builds clients with its own store {self.store!r}; '
                                          f'got consistency_context_store={given!r}')
        return {**configs, 'consistency_context_store': self.store}

    def admin(self, **configs: Any) -> KafkaAdminClient:
        """A :class:`kafka_kip.KafkaAdminClient` with ``configs``; the topics it writes are the factory's writes."""
        admin = KafkaAdminClient(**self._configs(configs))
        admin.written_topics = self.written_topics
        return admin

    def producer(self, **configs: Any) -> KafkaProducer:
        """A :class:`kafka_kip.KafkaProducer` with ``configs`` that sends by metadata reflecting the factory's
        writes (waiting up to its ``max_block_ms``)."""
        producer = KafkaProducer(**self._configs(configs))
        if self.written_topics is not None:
            producer._metadata.follow_writes(self.written_topics, producer.config['max_block_ms'],
                                             drop_contradicted=True)
        return producer

    def consumer(self, *topics: str, **configs: Any) -> KafkaConsumer:
        """A :class:`kafka_kip.KafkaConsumer` subscribed to ``topics`` with ``configs``, whose metadata reflects
        the factory's writes (waiting up to the factory's ``max_block_ms``)."""
        consumer = KafkaConsumer(*topics, **self._configs(configs))
        if self.written_topics is not None:
            consumer._cluster.follow_writes(self.written_topics, self.max_block_ms)
        return consumer

    def __repr__(self) -> str:
        return f'ClientFactory({self.store!r})'


__all__ = ['ClientFactory', 'DEFAULT_MAX_BLOCK_MS']
