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
    BEHIND = 'behind'                # older or missing: refresh metadata and ask again (for a bounded time)
    RECREATED = 'recreated'          # another incarnation of the partition: the position is invalid here


def position_verdict(cached: Epochs | None, cached_topic_id: uuid.UUID | None, wanted: Epochs,
                     topic_id: uuid.UUID | None) -> MetadataVerdict:
    """Compare a partition's metadata (``cached``; ``None``: there is none) with a position's epochs.

    Partition epochs are unique in a cluster and only grow: a higher one is a later incarnation, a lower one
    stale metadata (or epochs from another cluster, which only a bounded wait tells apart). With equal or
    unknown partition epochs, another topic id (KIP-516) is another incarnation: a recreated topic on a
    stock broker, or the same topic on another cluster (a mirror).
    """
    if cached is None:
        return MetadataVerdict.BEHIND
    if wanted.partition_epoch >= 0 and cached.partition_epoch >= 0 and wanted.partition_epoch != cached.partition_epoch:
        return MetadataVerdict.RECREATED if cached.partition_epoch > wanted.partition_epoch else MetadataVerdict.BEHIND
    if is_new_incarnation(cached_topic_id, topic_id):
        return MetadataVerdict.RECREATED
    return MetadataVerdict.CAUGHT_UP if is_at_least(cached, wanted) else MetadataVerdict.BEHIND


def describe_epochs(epochs: Epochs | None, topic_id: uuid.UUID | None) -> str:
    """``epochs`` and ``topic_id`` in words, for messages (``None``: no metadata)."""
    if epochs is None:
        return 'no metadata for the partition'
    known = [f'{name} {value}' for name, value in (('partition epoch', epochs.partition_epoch),
                                                   ('leader epoch', epochs.leader_epoch)) if value >= 0]
    if topic_id is not None and topic_id.int:
        known.append(f'topic id {topic_id}')
    return ', '.join(known) or 'no epochs'


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
    return position_verdict(cached_epochs(cluster, tp), cluster.topic_id(tp.topic), Epochs(leader_epoch, partition_epoch),
                            topic_id)


def fetched_verdict(held_partition_epoch: int, fetched_partition_epoch: int, held_topic_id: uuid.UUID | None,
                    answered_topic_id: uuid.UUID | None) -> MetadataVerdict:
    """How a FetchResponse's partition compares with the incarnation the position is tied to.

    RECREATED: a later or other incarnation; BEHIND: a stale broker (an earlier partition epoch), whose answer
    is dropped. ``answered_topic_id`` is the topic id the broker answered for (FetchResponse v13+), or for a
    fetch by name the cluster metadata's.
    """
    return position_verdict(Epochs(UNKNOWN_EPOCH, fetched_partition_epoch), answered_topic_id,
                            Epochs(UNKNOWN_EPOCH, held_partition_epoch), held_topic_id)
