"""``KafkaConsumer``: kafka-python's consumer plus the consumer side of KIP-320 and KIP-232."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import kafka
import kafka.errors
import kafka.structs
from kafka.structs import TopicPartition

from kafka_kip._patch import consumer_init
from kafka_kip.bounds import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    require_int,
    require_leader_epoch,
    require_offset,
    require_partition,
)
from kafka_kip.client_defaults import CLIENT_DEFAULTS
from kafka_kip.consumer.consumer_protocol import ConsumerProtocolCoordinator
from kafka_kip.consumer.coordinator import ConsumerCoordinator
from kafka_kip.consumer.fetcher import DEFAULT_OFFSET_EPOCH_WAIT_MS, Fetcher
from kafka_kip.consumer.group_protocol import CLASSIC, CONSUMER, parse_group_protocol
from kafka_kip.consumer.offset_epoch import OffsetEpoch
from kafka_kip.consumer.reset import DEFAULT_NEW_PARTITIONS_POLICY, parse_new_partitions_policy, parse_policy
from kafka_kip.consumer.subscription import SubscriptionState
from kafka_kip.metadata.client import KipNetClient
from kafka_kip.metadata.cluster import KipClusterMetadata
from kafka_kip.metadata.store import require_store
from kafka_kip.structs import OffsetAndOffsetEpoch

_init_with_kip_collaborators = consumer_init.install(
    subscription_state=SubscriptionState, fetcher=Fetcher, coordinator=ConsumerCoordinator)
_init_with_consumer_protocol = consumer_init.install(
    subscription_state=SubscriptionState, fetcher=Fetcher, coordinator=ConsumerProtocolCoordinator)


@dataclass(frozen=True)
class _SeekTarget:
    offset: int
    metadata: str = ''
    leader_epoch: int = -1
    timestamp: int = -1
    partition_epoch: int = -1
    topic_id: uuid.UUID | None = None

    @property
    def has_details(self) -> bool:
        return (self.leader_epoch >= 0 or self.partition_epoch >= 0 or self.topic_id is not None
                or self.timestamp >= 0 or bool(self.metadata))


def _checked_offsets(offsets: Any) -> Any:
    """``offsets`` to commit, each offset and leader epoch checked against what the wire carries."""
    if isinstance(offsets, dict):
        for tp, committed in offsets.items():
            if isinstance(committed, kafka.structs.OffsetAndMetadata):
                require_offset(committed.offset, f'committed offset of {tp}')
                if committed.leader_epoch is not None:
                    require_leader_epoch(committed.leader_epoch, f'committed leader_epoch of {tp}')
                require_int(getattr(committed, 'timestamp', -1), f'committed timestamp of {tp}', INT64_MIN,
                            INT64_MAX)
                require_int(getattr(committed, 'partition_epoch', -1), f'committed partition_epoch of {tp}', -1, INT32_MAX)
    return offsets


def _seek_target(offset: Any, leader_epoch: int | None, offset_epoch: bytes | None) -> _SeekTarget:
    if isinstance(offset, kafka.structs.OffsetAndMetadata):
        if leader_epoch is not None or offset_epoch is not None:
            raise ValueError('seek() takes the epochs either inside the OffsetAndMetadata or as keywords, '
                             'not both')
        require_offset(offset.offset, 'seek offset')
        if offset.leader_epoch is not None:
            require_leader_epoch(offset.leader_epoch, 'seek leader_epoch')
        return _SeekTarget(offset.offset, offset.metadata or '',
                           -1 if offset.leader_epoch is None else offset.leader_epoch,
                           getattr(offset, 'timestamp', -1), getattr(offset, 'partition_epoch', -1))
    require_offset(offset, 'seek offset')
    if offset_epoch is not None:
        if leader_epoch is not None:
            raise ValueError('seek() got both leader_epoch and offset_epoch; offset_epoch already holds '
                             'the leader epoch')
        decoded = OffsetEpoch.from_bytes(offset_epoch)
        return _SeekTarget(offset, leader_epoch=decoded.leader_epoch, partition_epoch=decoded.partition_epoch,
                           topic_id=decoded.topic_id)
    if leader_epoch is None:
        return _SeekTarget(offset)
    return _SeekTarget(offset, leader_epoch=require_leader_epoch(leader_epoch, 'seek leader_epoch'))


class KafkaConsumer(kafka.KafkaConsumer):
    """kafka-python's ``KafkaConsumer``; accepts every argument it accepts, plus what KIP-320/232 add.

    Differences (see the README's API tour):

    - ``auto_offset_reset`` also accepts ``'closest'`` (KIP-320's table, :mod:`kafka_kip.consumer.reset`);
      an unknown value is refused at construction with ``KafkaConfigurationError``.
    - ``poll()`` and iteration raise :class:`kafka_kip.errors.TruncatedPartitionError` (an
      ``OffsetOutOfRangeError`` and a ``LogTruncationError``) when truncation is detected without a reset
      policy; polling on without seeking continues from the current position. They raise
      :class:`kafka_kip.errors.InvalidPartitionEpochError` when a position's epochs (``seek(...,
      offset_epoch=...)`` or a commit's) belong to another incarnation of the partition: a deleted and
      recreated topic, or epochs taken on another cluster (another topic id). Epochs ahead of this cluster's
      metadata hold the partition (a warning names it and what it waits for) for at most
      ``offset_epoch_wait_ms`` (default 30000), then raise it too; seek without ``offset_epoch`` to resume
      at the same offset on a cluster that kept the offsets (a mirror).
    - ``offsets_for_times()`` returns :class:`kafka_kip.structs.OffsetAndTimestamp` values whose
      ``offset_epoch`` ``seek(tp, found.offset, offset_epoch=found.offset_epoch)`` takes.
    - ``seek()`` takes an ``OffsetAndMetadata`` with a leader epoch, ``leader_epoch=`` or ``offset_epoch=``;
      ``position_and_offset_epoch()`` returns the offset with its opaque ``offset_epoch`` bytes.
    - Commits carry leader epoch, timestamp and partition epoch; ``committed(tp, metadata=True)`` returns a
      :class:`kafka_kip.OffsetAndMetadata` with them.
    - ``kafka_client`` defaults to :class:`kafka_kip.metadata.KipNetClient` (KIP-232 metadata freshness); a
      metadata response counts as outdated only by the partitions this consumer subscribed to or was
      assigned.
    - ``consistency_context_store`` (KIP-1243): the :class:`kafka_kip.ConsistencyContextStore` this consumer
      shares with other clients (default: one of its own). ``poll()`` raises ``InconsistentClusterIdError``
      once a broker turned out to belong to another cluster than the store's context.
    - ``auto_offset_reset_new_partitions`` (KIP-1327, Java's ``auto.offset.reset.new.partitions``; 'earliest'
      (default), 'latest', 'none', or None: as ``auto_offset_reset``, Java's default): in a group
      (``subscribe()``), on every broker and in classic groups too, a partition created after the group knew its
      topic that has no committed offset starts where it says; every other partition where ``auto_offset_reset``
      says. The default loses no record written to a new partition before the group noticed it, whatever
      ``auto_offset_reset`` says (:mod:`kafka_kip.consumer.reset`, :mod:`kafka_kip.consumer.new_partitions`).
    - ``group_protocol`` (Java's ``group.protocol``): 'classic' (default) or 'consumer', KIP-848's protocol
      (:mod:`kafka_kip.consumer.consumer_protocol`): the group coordinator assigns partitions
      (``group_remote_assignor``: 'uniform', 'range' or None for the broker's default), dictates the heartbeat
      interval and moves partitions incrementally; ``subscribe(pattern=)`` sends the regex for the broker to
      evaluate. ``partition_assignment_strategy``, ``session_timeout_ms`` and ``heartbeat_interval_ms`` are refused
      with 'consumer', ``group_remote_assignor`` with 'classic' (:mod:`kafka_kip.consumer.group_protocol`).
    - ``expansion_ordering`` (default True; KIP-253, :mod:`kafka_kip.consumer.expansion`): in a group
      (``subscribe()``) whose coordinator advertises ``kip.253``, records written after an
      expansion are returned only once the group returned the prior partitions' records written before it
      (positions of other members come in heartbeats; committed offsets count too). A partition waiting logs
      "Holding <partition> at offset N: ..." and "Releasing ...". ``False`` opts out: kafka-python's behaviour.
      With ``assign()`` and with stock brokers nothing changes and no order across an expansion is promised.
    """

    DEFAULT_CONFIG = dict(kafka.KafkaConsumer.DEFAULT_CONFIG, **CLIENT_DEFAULTS, kafka_client=KipNetClient,
                          offset_epoch_wait_ms=DEFAULT_OFFSET_EPOCH_WAIT_MS, consistency_context_store=None,
                          expansion_ordering=True, auto_offset_reset_new_partitions=DEFAULT_NEW_PARTITIONS_POLICY,
                          group_protocol=CLASSIC, group_remote_assignor=None)

    def __init__(self, *topics: str, **configs: Any) -> None:
        require_store(configs.get('consistency_context_store'))
        parse_policy(configs.get('auto_offset_reset', self.DEFAULT_CONFIG['auto_offset_reset']))
        new_partitions_policy = parse_new_partitions_policy(
            configs.get('auto_offset_reset_new_partitions', DEFAULT_NEW_PARTITIONS_POLICY))
        wait_ms = configs.get('offset_epoch_wait_ms', DEFAULT_OFFSET_EPOCH_WAIT_MS)
        if isinstance(wait_ms, bool) or not isinstance(wait_ms, int) or wait_ms < 0:
            raise kafka.errors.KafkaConfigurationError(
                f'offset_epoch_wait_ms must be an int >= 0 (milliseconds), got {wait_ms!r}')
        ordering = configs.get('expansion_ordering', True)
        if not isinstance(ordering, bool):
            raise kafka.errors.KafkaConfigurationError(f'expansion_ordering must be True or False, got {ordering!r}')
        protocol = parse_group_protocol(configs)
        configs['group_protocol'] = protocol
        init = _init_with_consumer_protocol if protocol == CONSUMER else _init_with_kip_collaborators
        init(self, *topics, **configs)
        self._subscription.new_partitions_policy = new_partitions_policy
        if isinstance(self._client.cluster, KipClusterMetadata):
            self._client.cluster.set_interest(self._subscription.interest)
        self._expansion_order = self._coordinator.expansion_order
        self._fetcher.expansion_order = self._expansion_order

    def poll(self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True) -> dict:
        """kafka-python's ``poll`` (iteration uses it too); raises ``InconsistentClusterIdError`` (KIP-1243) once a
        broker turned out to belong to another cluster than the consistency context store's context. Records
        fetched before are returned first: the error comes with the next poll that has none.

        KIP-253: the positions this consumer reached by the records it returned before this call are the ones
        the group's expansion holds count (see ``expansion_ordering``).
        """
        self._raise_if_fatal()
        if self._expansion_order.active:
            self._expansion_order.snapshot(self._subscription.positions())
        records = super().poll(timeout_ms, max_records, update_offsets)
        if not records:
            self._raise_if_fatal()
        return records

    def _raise_if_fatal(self) -> None:
        fatal = getattr(self._manager, 'consistency', None)
        if fatal is not None and fatal.fatal_error is not None:
            raise fatal.fatal_error

    def seek(self, partition: TopicPartition, offset: int | kafka.structs.OffsetAndMetadata, *,
             leader_epoch: int | None = None, offset_epoch: bytes | None = None) -> None:
        """Set the fetch position of ``partition``.

        ``offset`` is an int or an ``OffsetAndMetadata``. With a leader epoch (in the ``OffsetAndMetadata``
        or ``leader_epoch=``) the position is validated against the current leader (OffsetForLeaderEpoch)
        before anything is fetched, so truncation below it is detected (KIP-320). With ``offset_epoch=``
        (bytes from :meth:`position_and_offset_epoch`) the partition is also not fetched until metadata is
        at least as new as the encoded epochs, and a later incarnation of the partition raises
        ``InvalidPartitionEpochError`` from ``poll()`` (KIP-232). A plain offset behaves as in kafka-python.

        Raises:
            ValueError: undecodable ``offset_epoch`` (naming the problem), conflicting epoch arguments, an
                offset outside 0..2**63-1 or a leader epoch outside -1..2**31-1 (naming it), or an unassigned
                partition. Nothing changes in that case.
        """
        target = _seek_target(offset, leader_epoch, offset_epoch)
        super().seek(partition, target.offset)
        state = self._subscription.assignment[partition]
        state.forget_incarnation()
        if target.has_details:
            state.seek_with_epochs(
                kafka.structs.OffsetAndMetadata(target.offset, target.metadata, target.leader_epoch),
                timestamp=target.timestamp, partition_epoch=target.partition_epoch, topic_id=target.topic_id)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """kafka-python's ``seek_to_beginning``; the positions also stop being tied to an incarnation."""
        super().seek_to_beginning(*partitions)
        self._forget_incarnations(partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """kafka-python's ``seek_to_end``; the positions also stop being tied to an incarnation."""
        super().seek_to_end(*partitions)
        self._forget_incarnations(partitions)

    def _forget_incarnations(self, partitions: tuple[TopicPartition, ...]) -> None:
        for tp in partitions or self._subscription.assigned_partitions():
            self._subscription.assignment[tp].forget_incarnation()

    def assign(self, partitions: list[TopicPartition]) -> None:
        """kafka-python's ``assign``; a partition number the wire cannot carry is refused (ValueError)."""
        for tp in partitions:
            if isinstance(tp, TopicPartition):
                require_partition(tp.partition, f'partition of {tp.topic!r}')
        super().assign(partitions)

    def commit(self, offsets: Any = None, timeout_ms: int | None = None) -> None:
        """kafka-python's ``commit``; offsets and leader epochs the wire cannot carry are refused (ValueError)."""
        super().commit(_checked_offsets(offsets), timeout_ms)

    def commit_async(self, offsets: Any = None, callback: Any = None) -> Any:
        """kafka-python's ``commit_async``; offsets and leader epochs are checked as in :meth:`commit`."""
        return super().commit_async(_checked_offsets(offsets), callback)

    def offsets_for_times(self, timestamps: dict[TopicPartition, int],
                          timeout_ms: int | None = None) -> dict[TopicPartition, Any]:
        """kafka-python's ``offsets_for_times``; each offset found is a :class:`kafka_kip.structs.OffsetAndTimestamp`
        with its ``offset_epoch`` for ``seek(tp, found.offset, offset_epoch=found.offset_epoch)``.

        A timestamp must be a number of milliseconds in 0..2**63-1 (kafka-python takes ``int(timestamp)``);
        ValueError naming it otherwise.
        """
        for tp, timestamp in timestamps.items():
            try:
                milliseconds = int(timestamp)
            except (TypeError, ValueError, OverflowError):
                raise ValueError(f'timestamp for {tp} must be a number of milliseconds in 0..{INT64_MAX}, '
                                 f'got {timestamp!r}') from None
            require_int(milliseconds, f'timestamp for {tp}', 0, INT64_MAX)
        return super().offsets_for_times(timestamps, timeout_ms)

    def position_and_offset_epoch(self, partition: TopicPartition,
                                  timeout_ms: int | None = None) -> OffsetAndOffsetEpoch | None:
        """The position of ``partition`` (as :meth:`position`) with its opaque ``offset_epoch`` (KIP-232).

        The bytes encode the leader epoch of the last consumed record below the position, the partition
        epoch from the last fetch and the topic id; store both and pass them to
        ``seek(tp, offset, offset_epoch=...)``. ``None`` if no position could be determined in time.
        """
        offset = self.position(partition, timeout_ms=timeout_ms)
        if offset is None:
            return None
        state = self._subscription.assignment[partition]
        topic_id = state.topic_id if state.topic_id is not None else self._cluster.topic_id(partition.topic)
        epoch = OffsetEpoch(state.position.leader_epoch, state.partition_epoch, topic_id)
        return OffsetAndOffsetEpoch(offset, epoch.to_bytes())
