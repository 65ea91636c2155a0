"""KIP-232 freshness rules: is a MetadataResponse older than the metadata the client already holds?

Pure functions over small value types; :mod:`kafka_kip.metadata.cluster` applies them to kafka-python's
cluster cache. A partition's metadata is ordered by its *partition epoch* (a new one for every incarnation
of the partition: topic creation, partition expansion, deletion) and, within one incarnation, by its
*leader epoch*. ``-1`` means unknown (a stock broker, or a Metadata version without the field); an unknown
epoch never makes metadata older, so clients fall back to the best ordering the broker provides.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kafka.structs import TopicPartition

from kafka_kip.protocol.constants import UNKNOWN_EPOCH


@dataclass(frozen=True, slots=True)
class Epochs:
    """The two epochs that order one partition's metadata (``-1``: unknown)."""

    leader_epoch: int = UNKNOWN_EPOCH
    partition_epoch: int = UNKNOWN_EPOCH

    def __str__(self) -> str:
        return f'(partition_epoch={self.partition_epoch}, leader_epoch={self.leader_epoch})'


@dataclass(frozen=True, slots=True)
class TopicEpochs:
    """One topic's identity (KIP-516 topic id, ``None`` if unknown) and per-partition epochs."""

    topic_id: uuid.UUID | None
    partitions: Mapping[int, Epochs]


@dataclass(frozen=True, slots=True)
class MetadataEpochs:
    """The part of a metadata view (a response, or the client's cache) that decides freshness.

    ``topics`` only needs the topics the client is interested in.
    """

    cluster_id: str | None
    max_partition_epoch: int
    topics: Mapping[str, TopicEpochs]


@dataclass(frozen=True, slots=True)
class Outdated:
    """Why a response is outdated: the first partition found older than the cached one.

    ``partition`` is ``None`` when the cluster-wide max partition epoch went back; ``cached`` and
    ``received`` then carry it as their ``partition_epoch``.
    """

    partition: TopicPartition | None
    cached: Epochs
    received: Epochs

    def __str__(self) -> str:
        if self.partition is None:
            return (f'max_partition_epoch {self.received.partition_epoch} < cached '
                    f'{self.cached.partition_epoch}')
        return (f'{self.partition.topic}-{self.partition.partition}: received {self.received}, '
                f'cached {self.cached}')


def is_older(received: Epochs, cached: Epochs, same_incarnation: bool = True) -> bool:
    """True if ``received`` describes an older state of the partition than ``cached``.

    Partition epochs decide when both are known and differ; otherwise leader epochs decide when both are
    known and the topic was not recreated in between (``same_incarnation``), since a new incarnation's
    leader epochs start again; otherwise nothing is older.
    """
    if (received.partition_epoch >= 0 and cached.partition_epoch >= 0
            and received.partition_epoch != cached.partition_epoch):
        return received.partition_epoch < cached.partition_epoch
    return same_incarnation and 0 <= received.leader_epoch < cached.leader_epoch


def is_at_least(cached: Epochs | None, wanted: Epochs) -> bool:
    """True if cached partition metadata ``cached`` (``None``: not cached) is not older than ``wanted``.

    With no known epoch in ``wanted`` there is nothing to wait for; a partition not cached at all is not
    at least any known epoch.
    """
    if wanted.leader_epoch < 0 and wanted.partition_epoch < 0:
        return True
    return cached is not None and not is_older(cached, wanted)


def is_new_incarnation(received_id: uuid.UUID | None, cached_id: uuid.UUID | None) -> bool:
    """True if both topic ids are known and differ: the topic was deleted and recreated (KIP-516).

    The nil UUID is what brokers send for a topic without an id, so it counts as unknown.
    """
    return _is_known(received_id) and _is_known(cached_id) and received_id != cached_id


def _is_known(topic_id: uuid.UUID | None) -> bool:
    return topic_id is not None and topic_id.int != 0


def find_outdated(received: MetadataEpochs, cached: MetadataEpochs) -> Outdated | None:
    """The reason ``received`` is outdated against ``cached``, or ``None`` if it may be applied.

    A response is outdated if its max partition epoch is lower than the cached one, or if for any topic in
    both views a partition is older (:func:`is_older`). A different cluster id is a new cluster whose
    epochs legitimately restart, so it is never outdated; a different topic id is a new incarnation of
    the topic, outdated only by a lower partition epoch (partition epochs never repeat in a cluster).
    """
    if received.cluster_id and cached.cluster_id and received.cluster_id != cached.cluster_id:
        return None
    if 0 <= received.max_partition_epoch < cached.max_partition_epoch:
        return Outdated(None, Epochs(partition_epoch=cached.max_partition_epoch),
                        Epochs(partition_epoch=received.max_partition_epoch))
    for topic, got in received.topics.items():
        have = cached.topics.get(topic)
        if have is None:
            continue
        same_incarnation = not is_new_incarnation(got.topic_id, have.topic_id)
        for partition, epochs in got.partitions.items():
            old = have.partitions.get(partition)
            if old is not None and is_older(epochs, old, same_incarnation):
                return Outdated(TopicPartition(topic, partition), old, epochs)
    return None
