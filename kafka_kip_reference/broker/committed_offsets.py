"""Committed offsets of one consumer group in the reference cluster, with Kafka's and KIP-232's checks.

A commit is checked, per partition, in this order (the first failing check is the partition's error):

1. the topic or partition does not exist -> UNKNOWN_TOPIC_OR_PARTITION (Kafka's API layer check);
2. the metadata is longer than ``offset.metadata.max.bytes`` (Kafka's default 4096) -> OFFSET_METADATA_TOO_LARGE;
3. KIP-232: a ``partition_epoch`` >= 0 that is not the partition's current partition epoch ->
   INVALID_PARTITION_EPOCH (10001): the commit belongs to an earlier incarnation of the partition;
4. KIP-232: a leader epoch >= 0 newer than the partition's current leader epoch -> UNKNOWN_LEADER_EPOCH
   (75), Kafka's error for "the epoch in the request is newer than the broker's";
5. KIP-232: a leader epoch >= 0 older than the leader epoch of the offset committed before ->
   INVALID_LEADER_EPOCH (10008), the proposal's non-retriable error. (Kafka's FENCED_LEADER_EPOCH would be
   retried by clients until their request timeout, which can never help a commit.)

Checks 3-5 apply only to KIP-232 commits, i.e. those that carry a ``partition_epoch`` >= 0. A stock client
sends -1 there and gets Apache Kafka's behaviour, which checks no epochs on commit: rewinding a group and
committing an earlier offset (with its earlier leader epoch) must keep working for it.

A transactional commit (TxnOffsetCommit) is checked the same way (without the KIP-232 checks) and held until its
producer's transaction ends: committed with it, dropped on abort.

When a topic is deleted its committed offsets are removed from every group
(:meth:`GroupOffsets.forget_topic`), as Kafka does, so a topic recreated under the same name starts
without committed offsets.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka.errors import (
    NoError,
    OffsetMetadataTooLargeError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)

from kafka_kip.errors import InvalidLeaderEpochError, InvalidPartitionEpochError

if TYPE_CHECKING:
    from kafka_kip_reference.broker.state import ClusterState

#: Kafka's ``offset.metadata.max.bytes`` default.
DEFAULT_OFFSET_METADATA_MAX_BYTES = 4096


def partition_error(cluster: ClusterState, topic: str, partition: int) -> int:
    """UNKNOWN_TOPIC_OR_PARTITION's code if ``topic``/``partition`` does not exist, else 0."""
    count = cluster.partitions(topic)
    if count is None or not 0 <= partition < count:
        return UnknownTopicOrPartitionError.errno
    return NoError.errno


@dataclass(frozen=True)
class CommittedOffset:
    """One committed offset as the coordinator stores it (the offsets topic value of KIP-232)."""

    offset: int
    leader_epoch: int
    metadata: str
    partition_epoch: int
    commit_timestamp: int


class GroupOffsets:
    """The committed offsets of one group, keyed by (topic, partition)."""

    def __init__(self, cluster: ClusterState, metadata_max_bytes: int = DEFAULT_OFFSET_METADATA_MAX_BYTES) -> None:
        self._cluster = cluster
        self._metadata_max_bytes = metadata_max_bytes
        self._offsets: dict[tuple[str, int], CommittedOffset] = {}
        #: offsets of open transactions (TxnOffsetCommit), by producer id
        self._pending: dict[int, dict[tuple[str, int], CommittedOffset]] = {}

    def commit(self, topic: str, partition: int, offset: int, leader_epoch: int, metadata: str | None,
               partition_epoch: int = -1, commit_timestamp: int = -1) -> int:
        """Check and store one commit; return its error code (0 when stored). See the module docstring."""
        error = self._commit_error(topic, partition, metadata)
        if error:
            return error
        if partition_epoch >= 0:
            error = self._kip232_error(topic, partition, leader_epoch, partition_epoch)
            if error:
                return error
        self._offsets[(topic, partition)] = CommittedOffset(
            offset, leader_epoch, metadata or '', partition_epoch, commit_timestamp)
        return NoError.errno

    def _commit_error(self, topic: str, partition: int, metadata: str | None) -> int:
        """The checks every commit gets first, transactional or not: the partition, then the metadata's size."""
        error = partition_error(self._cluster, topic, partition)
        if error:
            return error
        if len((metadata or '').encode()) > self._metadata_max_bytes:
            return OffsetMetadataTooLargeError.errno
        return NoError.errno

    def _kip232_error(self, topic: str, partition: int, leader_epoch: int, partition_epoch: int) -> int:
        if partition_epoch != self._cluster.partition_epoch(topic, partition):
            return InvalidPartitionEpochError.errno
        if leader_epoch >= 0:
            if leader_epoch > self._cluster.leader_epoch(topic, partition):
                return UnknownLeaderEpochError.errno
            previous = self.get(topic, partition)
            if previous is not None and leader_epoch < previous.leader_epoch:
                return InvalidLeaderEpochError.errno
        return NoError.errno

    def commit_transactional(self, producer_id: int, topic: str, partition: int, offset: int, leader_epoch: int,
                             metadata: str | None, commit_timestamp: int) -> int:
        """TxnOffsetCommit: check one offset and hold it until the producer's transaction ends."""
        error = self._commit_error(topic, partition, metadata)
        if error:
            return error
        self._pending.setdefault(producer_id, {})[(topic, partition)] = CommittedOffset(
            offset, leader_epoch, metadata or '', -1, commit_timestamp)
        return NoError.errno

    def complete_transaction(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended: its offsets become committed, or are dropped on abort."""
        pending = self._pending.pop(producer_id, {})
        if commit:
            self._offsets.update(pending)

    def is_pending(self, topic: str, partition: int) -> bool:
        """True while a transaction holds an uncommitted offset for the partition (UNSTABLE_OFFSET_COMMIT)."""
        return any((topic, partition) in offsets for offsets in self._pending.values())

    def get(self, topic: str, partition: int) -> CommittedOffset | None:
        """The offset committed for the partition, or None."""
        return self._offsets.get((topic, partition))

    def all(self) -> dict[str, dict[int, CommittedOffset]]:
        """Every committed offset: topic -> partition -> offset, topics and partitions sorted."""
        result: dict[str, dict[int, CommittedOffset]] = {}
        for (topic, partition), committed in sorted(self._offsets.items()):
            result.setdefault(topic, {})[partition] = committed
        return result

    def __bool__(self) -> bool:
        return bool(self._offsets) or any(self._pending.values())

    def pending(self) -> dict[int, dict[tuple[str, int], CommittedOffset]]:
        """The offsets open transactions hold, by producer id (a copy)."""
        return {producer_id: dict(offsets) for producer_id, offsets in self._pending.items()}

    def restore(self, offsets: dict[tuple[str, int], CommittedOffset],
                pending: dict[int, dict[tuple[str, int], CommittedOffset]]) -> None:
        """Hold exactly ``offsets`` and ``pending`` (a data directory read back)."""
        self._offsets, self._pending = dict(offsets), {producer_id: dict(p) for producer_id, p in pending.items()}

    def delete(self, topic: str, partition: int) -> None:
        """Remove the offset committed for the partition, if any (OffsetDelete)."""
        self._offsets.pop((topic, partition), None)

    def forget_topic(self, topic: str) -> None:
        """Remove the offsets committed (or held by a transaction) for ``topic`` (it was deleted)."""
        for offsets in (self._offsets, *self._pending.values()):
            for key in [key for key in offsets if key[0] == topic]:
                del offsets[key]

    def clear(self) -> None:
        """Forget every committed offset (the group is deleted)."""
        self._offsets.clear()
        self._pending.clear()
