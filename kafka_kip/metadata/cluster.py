"""``KipClusterMetadata``: kafka-python's cluster cache, which does not apply outdated metadata (KIP-232)."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka.cluster import ClusterMetadata
from kafka.structs import TopicPartition

from kafka_kip.metadata import freshness
from kafka_kip.metadata.freshness import (
    UNKNOWN_EPOCH,
    Epochs,
    MetadataEpochs,
    Outdated,
    TopicEpochs,
    find_outdated,
    is_new_incarnation,
)

log = logging.getLogger(__name__)

#: First Metadata version with reliable leader epochs (KAFKA-9212) and the only ones with tagged fields.
RELIABLE_EPOCHS_VERSION = 9


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

    A changed cluster id, or a changed topic id without a lower partition epoch, is a new incarnation:
    it is applied and its epochs replace the cached ones. If nothing but outdated responses arrives for
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

    def update_metadata(self, metadata: Any) -> None:
        """Apply ``metadata`` unless it is outdated; then leave the cache as it is and refresh again."""
        if not metadata.brokers:
            return super().update_metadata(metadata)
        if metadata.API_VERSION >= RELIABLE_EPOCHS_VERSION:
            received = self._received_epochs(metadata)
            outdated = find_outdated(received, self._cached_epochs(received))
            if outdated is not None and not self._outdated_too_long(outdated):
                self._refuse(outdated)
                return None
            self._forget_replaced_topic_ids(metadata)
        self._outdated_since_ms = None
        self.max_partition_epoch = getattr(metadata, 'max_partition_epoch', UNKNOWN_EPOCH)
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

    def _forget_replaced_topic_ids(self, metadata: Any) -> None:
        # kafka-python resets a recreated topic's leader epochs to -1; a new incarnation's epochs are
        # valid (as in the Java client), so let it see the topic as new instead.
        for topic in metadata.topics:
            cached_id = self._topic_ids.get(topic.name)
            if is_new_incarnation(topic.topic_id, cached_id):
                log.info('Topic %s was recreated (topic id %s -> %s): accepting its epochs',
                         topic.name, cached_id, topic.topic_id)
                del self._topic_ids[topic.name]


def _epochs(p_data: Any) -> Epochs:
    # kafka-python's own (unpatched) partition struct has no partition_epoch.
    return Epochs(p_data.leader_epoch, getattr(p_data, 'partition_epoch', UNKNOWN_EPOCH))
