"""``KipClusterMetadata``: kafka-python's cluster cache, which does not apply outdated metadata (KIP-232) nor
metadata a KIP-1243 broker answered STALE_METADATA, and never metadata of another cluster than its context's."""
from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka.cluster import ClusterMetadata
from kafka.future import Future
from kafka.protocol.metadata import MetadataResponse
from kafka.structs import TopicPartition

from kafka_kip.metadata import freshness
from kafka_kip.metadata.freshness import (
    UNKNOWN_EPOCH,
    Epochs,
    MetadataEpochs,
    Outdated,
    TopicEpochs,
    find_outdated,
)
from kafka_kip.metadata.written_topics import TopicWrite, WrittenTopics
from kafka_kip.protocol.constants import STALE_METADATA

log = logging.getLogger(__name__)

#: First Metadata version with reliable leader epochs (KAFKA-9212) and the only ones with tagged fields.
RELIABLE_EPOCHS_VERSION = 9
#: First Metadata version with the cluster id.
CLUSTER_ID_VERSION = 2


def is_stale_metadata(metadata: Any) -> bool:
    """True if a KIP-1243 broker answered ``metadata`` STALE_METADATA (top-level error from v13, else on every
    topic of the response)."""
    if getattr(metadata, 'error_code', 0) == STALE_METADATA:
        return True
    return bool(metadata.topics) and all(topic.error_code == STALE_METADATA for topic in metadata.topics)


@dataclass(frozen=True)
class Interest:
    """The partitions a client's metadata freshness checks cover: every partition of ``topics`` (those
    subscribed to) plus ``partitions`` (those assigned by the application)."""

    topics: frozenset[str] = frozenset()
    partitions: frozenset[TopicPartition] = frozenset()

    def covers(self, topic: str, partition: int) -> bool:
        return topic in self.topics or TopicPartition(topic, partition) in self.partitions


class KipClusterMetadata(ClusterMetadata):
    """kafka-python's ``ClusterMetadata`` that refuses an outdated ``MetadataResponse`` (KIP-232).

    A response is outdated when its max partition epoch is lower than the cached one, or when for a
    partition of interest (see :meth:`set_interest`) its partition epoch is lower than the cached one, or
    equal with a lower leader epoch (see
    :func:`~kafka_kip.metadata.freshness.find_outdated`). On stock brokers only leader epochs order
    metadata, from Metadata v9 on (older versions are applied unchecked, as kafka-python does). An outdated
    response is not applied at all (brokers, leaders and topic ids stay as cached, listeners are not
    called, waiters keep waiting) and metadata is refreshed again after ``retry_backoff_ms``.

    KIP-1243 (``consistency``, the client's
    :class:`~kafka_kip.metadata.consistency_session.ConsistencySession`, set by its connection manager): a
    response a broker answered STALE_METADATA is not applied either (counted in ``stale_responses``), except that
    a client that knows no broker yet takes its broker list, so a client bootstrapped on a stale broker can ask
    another; a response of another cluster than the context's makes the session fatal, and every update and
    refresh then fails with its ``InconsistentClusterIdError`` (stock brokers send cluster ids too).

    Writes of a :class:`kafka_kip.ClientFactory` (:meth:`follow_writes`, on any broker): a response that does not
    reflect a topic the factory's admin clients created, grew or deleted is not applied either (counted in
    ``unreflected_responses``), for at most the client's wait in a row; then it is applied with a warning.

    A changed cluster id, or a changed topic id without a lower partition epoch, is a new incarnation:
    it is applied and its epochs replace the cached ones; kafka-python then caches a recreated topic's
    leader epochs as -1 (unknown) until the next response of the same topic id, and so does this cache
    (the new incarnation's epochs start over, so no epoch of the old one may be compared with them; a
    partition held for an epoch refreshes again). If nothing but outdated responses arrives for
    ``metadata_max_age_ms``, the cluster's view is applied anyway (with a warning), so a client never
    wedges on epochs that went back with no visible new incarnation (e.g. a topic recreated on a broker
    without topic ids).
    """

    def __init__(self, **configs: Any) -> None:
        super().__init__(**configs)
        self._interest: Callable[[], Interest] | None = None
        self._outdated_since_ms: float | None = None
        #: The cluster-wide max partition epoch of the last applied response (-1: unknown).
        self.max_partition_epoch: int = UNKNOWN_EPOCH
        #: How many responses were refused as outdated.
        self.outdated_responses: int = 0
        #: How many responses were refused because a KIP-1243 broker answered STALE_METADATA.
        self.stale_responses: int = 0
        #: The consistency token the last applied response's header carried (-1: none, a stock broker).
        self.metadata_token: int = -1
        #: The client's KIP-1243 session (set by its connection manager), None for a cache of its own.
        self.consistency: Any = None
        #: How many responses were refused because they did not reflect a write of the client's factory.
        self.unreflected_responses: int = 0
        self._written: WrittenTopics | None = None
        self._write_wait_ms = 0
        self._drop_contradicted = False
        self._unreflected_since_ms: float | None = None
        self._given_up: set[TopicWrite] = set()
        self._answering_node: Any = None
        #: Topics some MetadataRequest of this cache has asked for (see :meth:`ttl`).
        self._asked_topics: set[str] = set()

    def set_interest(self, interest: Callable[[], Interest] | None) -> None:
        """Check freshness only for the partitions ``interest()`` names when a response arrives.

        A consumer passes its subscription's :meth:`~kafka_kip.consumer.subscription.SubscriptionState.interest`
        (KIP-232: "consumers can be interested in only the partitions they subscribed to"). ``None`` (the
        default) means every cached partition, which is what a producer or an admin client needs.
        """
        self._interest = interest

    def interest(self) -> Interest | None:
        """The partitions that decide whether a response is outdated now; ``None``: every cached one."""
        return None if self._interest is None else self._interest()

    def known_partitions(self, topic: str) -> Mapping[int, Any] | None:
        """The cached partitions of ``topic`` (partition -> metadata; kafka-python's own dict, not a copy: read it
        only), or None.

        ``partitions_for_topic`` without building a set: the producer's send path asks this per record.
        """
        return self._partitions.get(topic)

    def epochs_for_partition(self, partition: TopicPartition) -> Epochs | None:
        """The cached epochs of ``partition``, or ``None`` if it is not cached."""
        p_data = self._partitions.get(partition.topic, {}).get(partition.partition)
        return None if p_data is None else _epochs(p_data)

    def partition_epoch_for_partition(self, partition: TopicPartition) -> int | None:
        """The cached partition epoch of ``partition`` (-1: not reported), ``None`` if it is not cached."""
        epochs = self.epochs_for_partition(partition)
        return None if epochs is None else epochs.partition_epoch

    def is_at_least(self, partition: TopicPartition, leader_epoch: int = UNKNOWN_EPOCH,
                    partition_epoch: int = UNKNOWN_EPOCH) -> bool:
        """True if the cached metadata of ``partition`` is not older than the given epochs.

        A consumer that got epochs from a commit or ``seek`` refreshes metadata until this holds (KIP-232).
        Epochs of -1 are not checked; a partition that is not cached is not at least any known epoch.
        """
        wanted = Epochs(leader_epoch, partition_epoch)
        return freshness.is_at_least(self.epochs_for_partition(partition), wanted)

    def ttl(self) -> float:
        """kafka-python's ``ttl()``, except that a refresh for a topic no request has asked for yet goes out at once.

        kafka-python waits ``retry_backoff_ms`` after any refresh (the bootstrap's included), so every new
        producer paid it before its first send; the backoff is for retries, and the Java client likewise lets
        an update for new topics go at once (``Metadata.requestUpdateForNewTopics``). A topic's later refreshes,
        and a broker's connection backoff (KIP-580), wait as before.
        """
        if (self._need_update and not self._topics <= self._asked_topics
                and not (self._manager is not None and self._manager.connection_delay('metadata'))):
            return 0
        return super().ttl()

    def metadata_request(self) -> Any:
        """kafka-python's request for the tracked topics, which count as asked for from then on (as do the topics
        of any response)."""
        self._asked_topics |= self._topics
        return super().metadata_request()

    async def refresh_metadata(self, node_id: Any = None) -> None:
        """kafka-python's ``refresh_metadata``, choosing the broker (the least loaded one) itself, so that a
        response that did not reflect a factory's write can make the client avoid that broker for a while."""
        if node_id is None and not self.metadata_refresh_in_progress and self._manager is not None:
            node_id = self._manager.least_loaded_node()
        if not self.metadata_refresh_in_progress:
            self._answering_node = node_id
        await super().refresh_metadata(node_id)

    def context_advanced(self, context: Any) -> None:
        """The client's consistency context store moved on (another client or process saw newer metadata): refresh
        unless the cached metadata is that new."""
        if context.offset > self.metadata_token >= 0:
            self.request_update()

    def request_update(self) -> Future:
        """kafka-python's ``request_update``; a failed future once the client's session is fatal."""
        fatal = None if self.consistency is None else self.consistency.fatal_error
        return super().request_update() if fatal is None else Future().failure(fatal)

    def update_metadata(self, metadata: Any) -> None:
        """Apply ``metadata`` unless it is outdated or stale; then leave the cache as it is and refresh again."""
        self._asked_topics.update(topic.name for topic in metadata.topics)  # (answered: asked for, see ttl())
        session = self.consistency
        if session is not None:
            fatal = session.fatal_error
            if fatal is None and metadata.API_VERSION >= CLUSTER_ID_VERSION:
                fatal = session.check_cluster_id(
                    metadata.cluster_id, f"a broker of {self.config['bootstrap_servers']} (MetadataResponse)")
            if fatal is not None:
                return self.failed_update(fatal)
            if is_stale_metadata(metadata):
                self._refuse_stale(metadata)
                return None
        if not metadata.brokers:
            return super().update_metadata(metadata)
        unreflected = self._unreflected_write(metadata)
        if unreflected is not None and not self._unreflected_too_long(unreflected):
            self.unreflected_responses += 1
            if session is not None and self._answering_node is not None:
                session.avoid(self._answering_node)
            self._last_refresh_ms = time.monotonic() * 1000
            self.request_update()
            log.debug('Not applying metadata that does not reflect %s, refreshing again', unreflected)
            return None
        self._unreflected_since_ms = None
        if metadata.API_VERSION >= RELIABLE_EPOCHS_VERSION:
            received = self._received_epochs(metadata)
            outdated = find_outdated(received, self._cached_epochs(received))
            if outdated is not None and not self._outdated_too_long(outdated):
                self._refuse(outdated)
                return None
        self._outdated_since_ms = None
        self.max_partition_epoch = getattr(metadata, 'max_partition_epoch', UNKNOWN_EPOCH)
        received = getattr(getattr(metadata, 'header', None), 'consistency_state', None)
        self.metadata_token = -1 if received is None else received.consistency_token
        return super().update_metadata(metadata)

    def _received_epochs(self, metadata: Any) -> MetadataEpochs:
        # Only partitions of interest of topics that are cached can make the response outdated.
        interest = self.interest()
        topics = {}
        for topic in metadata.topics:
            if topic.error_code or topic.name not in self._partitions:
                continue
            partitions = {p_data.partition_index: _epochs(p_data) for p_data in topic.partitions
                          if interest is None or interest.covers(topic.name, p_data.partition_index)}
            if partitions:
                topics[topic.name] = TopicEpochs(topic.topic_id, partitions)
        return MetadataEpochs(metadata.cluster_id, getattr(metadata, 'max_partition_epoch', UNKNOWN_EPOCH),
                              topics)

    def _cached_epochs(self, received: MetadataEpochs) -> MetadataEpochs:
        topics = {
            name: TopicEpochs(self._topic_ids.get(name),
                              {index: _epochs(p_data) for index, p_data in self._partitions[name].items()})
            for name in received.topics
        }
        return MetadataEpochs(self.cluster_id, self.max_partition_epoch, topics)

    def _outdated_too_long(self, outdated: Outdated) -> bool:
        now_ms = time.monotonic() * 1000
        if self._outdated_since_ms is None:
            self._outdated_since_ms = now_ms
        waited_ms = now_ms - self._outdated_since_ms
        if waited_ms < self.config['metadata_max_age_ms']:
            return False
        log.warning('Applying metadata that is still outdated after %d ms (%s): '
                    'taking the cluster at its word', waited_ms, outdated)
        return True

    def _refuse(self, outdated: Outdated) -> None:
        self.outdated_responses += 1
        # Counts as an attempt: the refresh loop waits retry_backoff_ms before it tries again.
        self._last_refresh_ms = time.monotonic() * 1000
        self.request_update()
        log.debug('Not applying outdated metadata, refreshing again: %s', outdated)

    # -- a ClientFactory's writes ------------------------------------------------------------------

    def follow_writes(self, written: WrittenTopics, wait_ms: int, drop_contradicted: bool = False) -> None:
        """Do not apply metadata that contradicts a write recorded in ``written`` (a factory's), for at most
        ``wait_ms`` in a row. With ``drop_contradicted`` (a producer) a cached topic a write contradicts is
        dropped at once, so sends to it wait for new metadata instead of using the old partition count."""
        self._write_wait_ms = wait_ms
        self._drop_contradicted = drop_contradicted
        self._written = written
        written.follow(self)

    def on_write(self, write: TopicWrite) -> None:
        """A write of the factory was recorded: refresh unless the cache reflects it (dropping the topic if asked)."""
        cached = self._partitions.get(write.topic)
        if write.reflected_by(None if cached is None else len(cached), self._topic_ids.get(write.topic)):
            return
        self._given_up.discard(write)
        if cached is not None and self._drop_contradicted:
            with self._lock:
                self._partitions = {t: p for t, p in self._partitions.items() if t != write.topic}
                self._broker_partitions = collections.defaultdict(set, {
                    node: {tp for tp in tps if tp.topic != write.topic}
                    for node, tps in self._broker_partitions.items()})
        self.request_update()

    def _unreflected_write(self, metadata: Any) -> TopicWrite | None:
        if self._written is None:
            return None
        topics = {topic.name: topic for topic in metadata.topics}
        for write in self._written.writes():
            topic = topics.get(write.topic)
            if write in self._given_up or (topic is None and not self.need_all_topic_metadata
                                          and write.topic not in self._topics):
                continue  # not asked for
            partitions = None if topic is None or topic.error_code else len(topic.partitions)
            if not write.reflected_by(partitions, None if topic is None else topic.topic_id):
                return write
        return None

    def _unreflected_too_long(self, write: TopicWrite) -> bool:
        now_ms = time.monotonic() * 1000
        if self._unreflected_since_ms is None:
            self._unreflected_since_ms = now_ms
        waited_ms = now_ms - self._unreflected_since_ms
        if waited_ms < self._write_wait_ms:
            return False
        log.warning('Applying metadata that still does not reflect %s after %d ms', write, waited_ms)
        self._given_up.add(write)
        return True

    # -- KIP-1243 ----------------------------------------------------------------------------------

    def _refuse_stale(self, metadata: Any) -> None:
        self.stale_responses += 1
        if not self._brokers and metadata.brokers:
            # bootstrapped on a stale broker: its broker list is all there is to go elsewhere with
            with self._lock:
                self._brokers = {b.node_id: MetadataResponse.MetadataResponseBroker(b.node_id, b.host, b.port, b.rack)
                                 for b in metadata.brokers}
        self._last_refresh_ms = time.monotonic() * 1000
        self.request_update()
        log.debug('Not applying metadata a broker answered STALE_METADATA, refreshing again')


def _epochs(p_data: Any) -> Epochs:
    # kafka-python's own (unpatched) partition struct has no partition_epoch.
    return Epochs(p_data.leader_epoch, getattr(p_data, 'partition_epoch', UNKNOWN_EPOCH))
