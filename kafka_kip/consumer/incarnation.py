"""KIP-232 on the consumer: compare the partition incarnation a position belongs to with what the cluster says.

An incarnation is identified by its partition epoch (KIP-232 brokers) or, on stock brokers, by its topic id
(KIP-516). The cluster metadata is :class:`kafka_kip.metadata.KipClusterMetadata` when the consumer uses
``KipNetClient`` (its default) and kafka-python's ``ClusterMetadata`` otherwise; with the latter only leader
epochs and topic ids are known.
"""
from __future__ import annotations

import enum
import uuid
from typing import Any

from kafka.structs import TopicPartition

from kafka_kip.metadata.freshness import UNKNOWN_EPOCH, Epochs, is_at_least, is_new_incarnation


class MetadataVerdict(enum.Enum):
    """How the cluster metadata compares with the epochs tied to a position."""

    CAUGHT_UP = 'caught up'          # at least as new: the position may be validated and fetched
    BEHIND = 'behind'                # older or missing: refresh metadata and ask again
    RECREATED = 'recreated'          # a later incarnation of the partition: the position is invalid


def cached_epochs(cluster: Any, tp: TopicPartition) -> Epochs | None:
    """The cluster's epochs for ``tp`` (``None`` if not cached); kafka-python's cache has no partition epoch."""
    epochs_for_partition = getattr(cluster, 'epochs_for_partition', None)
    if epochs_for_partition is not None:
        return epochs_for_partition(tp)
    leader_epoch = cluster.leader_epoch_for_partition(tp)
    return None if leader_epoch is None else Epochs(leader_epoch, UNKNOWN_EPOCH)


def compare_with_metadata(cluster: Any, tp: TopicPartition, leader_epoch: int, partition_epoch: int,
                          topic_id: uuid.UUID | None) -> MetadataVerdict:
    """Compare the cluster metadata of ``tp`` with a position's leader epoch and incarnation."""
    cached = cached_epochs(cluster, tp)
    if cached is None:
        return MetadataVerdict.BEHIND
    if partition_epoch >= 0 and cached.partition_epoch >= 0:
        # Partition epochs only grow; an older one in the cache is stale metadata, not a new incarnation.
        if cached.partition_epoch > partition_epoch:
            return MetadataVerdict.RECREATED
    elif is_new_incarnation(cluster.topic_id(tp.topic), topic_id):
        return MetadataVerdict.RECREATED
    if is_at_least(cached, Epochs(leader_epoch, partition_epoch)):
        return MetadataVerdict.CAUGHT_UP
    return MetadataVerdict.BEHIND


def fetched_incarnation_changed(held_partition_epoch: int, fetched_partition_epoch: int,
                                held_topic_id: uuid.UUID | None, cached_topic_id: uuid.UUID | None) -> bool:
    """True if a FetchResponse shows a later incarnation than the one the position is tied to.

    The response's partition epoch decides where both are known; otherwise the topic id in the cluster
    metadata (FetchResponse v12, kafka-python's newest, names topics, not ids).
    """
    if held_partition_epoch >= 0 and fetched_partition_epoch >= 0:
        return fetched_partition_epoch > held_partition_epoch
    return is_new_incarnation(cached_topic_id, held_topic_id)
