"""Per-partition consumer state: kafka-python's, plus what KIP-320 and KIP-232 tie to a position.

kafka-python's ``TopicPartitionState`` keeps the position (offset + leader epoch of the last consumed record)
and drives KIP-320 validation. :class:`PartitionState` adds:

- the records most recently returned from the position, so the timestamp of the last consumed record is
  known without per-record bookkeeping (commits, 'closest' reset);
- the partition incarnation the position belongs to (partition epoch, topic id) -- KIP-232;
- three holds that keep the partition out of fetches: ``held_for_leader_epoch`` (the leader epoch
  the cluster metadata must reach first), ``truncation_pending`` (truncation detected, not yet raised to the application) and
  ``expansion_hold`` (KIP-253: the position reached records written after a partition expansion that is
  not released yet, :mod:`kafka_kip.consumer.expansion`);
- whether the partition was created after the group knew its topic (KIP-1327,
  :mod:`kafka_kip.consumer.new_partitions`): then ``auto_offset_reset_new_partitions`` initializes it.
"""
from __future__ import annotations

import time
import uuid
from bisect import bisect_left
from collections.abc import Sequence
from operator import attrgetter
from typing import Any, Generic, TypeVar

import kafka.consumer.subscription_state as _stock
import kafka.errors as Errors
import kafka.structs
from kafka.structs import TopicPartition
from kafka.util import synchronized

from kafka_kip.consumer.reset import (
    DEFAULT_NEW_PARTITIONS_POLICY,
    ResetCause,
    new_partition_policy,
    parse_new_partitions_policy,
    parse_policy,
    reset_strategy,
)
from kafka_kip.metadata.cluster import Interest
from kafka_kip.structs import OffsetAndMetadata

_OFFSET = attrgetter('offset')
T = TypeVar('T')


def _not_fetchable() -> bool:
    return False


class _Hold(Generic[T]):
    """One of a partition's holds (:meth:`PartitionState._apply_holds`): setting it applies the holds again."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute = '_' + name

    def __get__(self, state: PartitionState | None, owner: type | None = None) -> T:
        return self if state is None else getattr(state, self._attribute)

    def __set__(self, state: PartitionState, value: T) -> None:
        setattr(state, self._attribute, value)
        state._apply_holds()


class PartitionState(_stock.TopicPartitionState):
    """kafka-python's ``TopicPartitionState`` plus the KIP-320 / KIP-232 state of the position."""

    def __init__(self) -> None:
        super().__init__()
        #: Partition epoch (KIP-232) of the incarnation the position belongs to; -1 = not tied.
        self.partition_epoch = -1
        #: Topic id (KIP-516) of that incarnation, the stock-broker stand-in for the partition epoch.
        self.topic_id: uuid.UUID | None = None
        self._held_for_leader_epoch: int | None = None
        #: When the metadata hold began (``time.monotonic()``); the fetcher bounds how long it lasts.
        self.held_since = 0.0
        #: The fetcher warned that the metadata is behind this hold's epochs.
        self.hold_reported = False
        #: The metadata update (a kafka-python Future) the hold compares with, if not the cached metadata.
        self.metadata_refresh: Any = None
        self._truncation_pending = False
        self._expansion_hold: object | None = None
        self._shadowed = False
        #: Why the next policy reset happens, set by the fetcher just before kafka-python requests it.
        self.reset_cause: ResetCause | None = None
        #: Fetch offset of the last out-of-range response answered by validation instead of a reset.
        self.out_of_range_validated_at: int | None = None
        self._consumed: Sequence | None = None
        self._position_timestamp = -1
        #: KIP-1327: created after the group knew its topic, and no committed offset (set until positioned).
        self.created_after_group = False

    # -- kafka-python state transitions, extended ---------------------------------------------------------

    def seek(self, offset) -> None:
        super().seek(offset)
        self._forget_position_details()

    def reset(self, strategy) -> None:
        super().reset(strategy)
        self._forget_position_details()

    def is_validation_allowed(self) -> bool:
        return self.held_for_leader_epoch is None and super().is_validation_allowed()

    # -- the two holds ------------------------------------------------------------------------------------

    held_for_leader_epoch: _Hold[int | None] = _Hold(
        'Leader epoch the cluster metadata must reach before this partition is validated or fetched.')
    truncation_pending: _Hold[bool] = _Hold(
        "Truncation was detected and not yet raised as TruncatedPartitionError (policy 'none').")
    expansion_hold: _Hold[object | None] = _Hold(
        'KIP-253: the :class:`~kafka_kip.consumer.expansion.Hold` the position waits at, or None.')

    def _apply_holds(self) -> None:
        # kafka-python asks is_fetchable() for every record its iterator hands out, so it is not
        # overridden: while nothing holds the partition kafka-python's own method answers; a hold shadows
        # it on the instance with one that says no.
        held = self._held_for_leader_epoch is not None or self._truncation_pending or self._expansion_hold is not None
        if held and not self._shadowed:
            self.is_fetchable = _not_fetchable
        elif self._shadowed and not held:
            del self.is_fetchable
        self._shadowed = held

    def _forget_position_details(self) -> None:
        self.created_after_group = False
        self._consumed = None
        self._position_timestamp = -1
        self.held_for_leader_epoch = None
        self.truncation_pending = False
        self.expansion_hold = None
        self.out_of_range_validated_at = None

    # -- KIP-320 ------------------------------------------------------------------------------------------

    def remember_consumed(self, records: Sequence) -> None:
        """Keep the records just returned from this partition (offset order) for :meth:`consumed_timestamp`."""
        self._consumed = records

    def consumed_timestamp(self) -> int:
        """Timestamp of the last consumed record below the position, else of the seek/commit, else -1."""
        records, position = self._consumed, self.position
        if records and position is not None:
            below = bisect_left(records, position.offset, key=_OFFSET)
            if below:
                return records[below - 1].timestamp
        return self._position_timestamp

    def seek_with_epochs(self, position: kafka.structs.OffsetAndMetadata, *, timestamp: int = -1,
                         partition_epoch: int = -1, topic_id: uuid.UUID | None = None) -> None:
        """Seek to ``position`` whose leader epoch / incarnation is known (seek with epochs, committed offset).

        The partition is held until the cluster metadata is at least as new as these epochs; then the
        position is validated against the current leader before anything is fetched (:meth:`release`).
        """
        leader_epoch = -1 if position.leader_epoch is None else position.leader_epoch
        self.seek(kafka.structs.OffsetAndMetadata(position.offset, position.metadata or '', leader_epoch))
        self._position_timestamp = timestamp
        self.partition_epoch = partition_epoch
        self.topic_id = topic_id
        if leader_epoch >= 0 or partition_epoch >= 0 or topic_id is not None:
            self._hold(leader_epoch)

    def release(self, current_leader_epoch: int) -> None:
        """Metadata caught up: lift the hold; a position with a leader epoch is validated first (like Java)."""
        self.held_for_leader_epoch = None
        if not self.maybe_validate_position(current_leader_epoch):
            self.request_position_validation()

    def continue_after_truncation(self) -> None:
        """The application was told about the truncation: fetch on from the position, without its epoch.

        Dropping the last-fetched epoch keeps the broker (and validation) from reporting the same
        divergence again; the next fetched batch supplies a fresh epoch. A validation requested meanwhile (a
        leader change seen while the truncation was pending) is complete too: a position without an epoch
        cannot be validated, and kafka-python would otherwise hold the partition for it forever.
        """
        self.truncation_pending = False
        position = self.position
        if position is not None:
            self.position = kafka.structs.OffsetAndMetadata(position.offset, position.metadata, -1)
        self.complete_validation()

    # -- KIP-232 ------------------------------------------------------------------------------------------

    def forget_incarnation(self) -> None:
        """Untie the position from a partition incarnation (the application positioned it without epochs)."""
        self.partition_epoch = -1
        self.topic_id = None

    def hold_for_metadata(self, refresh: Any = None) -> None:
        """Keep the partition out of fetches until the metadata has been compared again (see fetcher): the
        metadata of the update ``refresh`` (a Future of ``cluster.request_update()``) once it is done, if given."""
        position = self.position
        self._hold(-1 if position is None else position.leader_epoch, refresh)

    def _hold(self, leader_epoch: int, refresh: Any = None) -> None:
        self.held_for_leader_epoch = leader_epoch
        self.held_since = time.monotonic()
        self.hold_reported = False
        self.metadata_refresh = refresh


class SubscriptionState(_stock.SubscriptionState):
    """kafka-python's ``SubscriptionState`` with :class:`PartitionState` and the 'closest' policy.

    ``reset_policy`` is the configured ``auto_offset_reset``. kafka-python's default strategy (used on
    initialization) is the table's initialization column, so 'closest' starts at the log start offset.
    ``new_partitions_policy`` is ``auto_offset_reset_new_partitions`` (KIP-1327): it initializes the partitions
    the coordinator marked as created after the group knew their topic.
    """

    def __init__(self, offset_reset_strategy: str = 'earliest',
                 new_partitions_policy: str | None = DEFAULT_NEW_PARTITIONS_POLICY) -> None:
        self.reset_policy = parse_policy(offset_reset_strategy)
        self.new_partitions_policy = parse_new_partitions_policy(new_partitions_policy)
        initialization = 'earliest' if self.reset_policy == 'closest' else self.reset_policy
        super().__init__(initialization)

    def _apply_assignment(self, partitions, randomize=False) -> None:
        # kafka-python creates TopicPartitionState() for new partitions in this one place; replace those
        # fresh (position-less) objects so every assigned partition carries a PartitionState.
        super()._apply_assignment(partitions, randomize)
        for tp, state in self.assignment.items():
            if not isinstance(state, PartitionState):
                self.assignment[tp] = PartitionState()

    @synchronized
    def request_offset_reset(self, partition: TopicPartition, offset_reset_strategy=None) -> None:
        """kafka-python's reset request; without a strategy the policy table picks one by the cause."""
        if offset_reset_strategy is None and self.reset_policy != 'none':
            state = self.assignment[partition]
            cause = state.reset_cause
            if cause is None:
                # kafka-python asks for a policy reset from two places: an out-of-range fetch (the fetcher
                # names that cause first) and a validation whose leader had no entry for our epoch.
                cause = ResetCause.UNKNOWN_TRUNCATION if state.awaiting_validation else ResetCause.INITIALIZATION
            state.reset_cause = None
            offset_reset_strategy = reset_strategy(self.reset_policy, cause, state.consumed_timestamp())
        super().request_offset_reset(partition, offset_reset_strategy)

    @synchronized
    def mark_created_after_group(self, partitions: set[TopicPartition]) -> None:
        """KIP-1327: ``partitions`` (assigned, no position, no committed offset) were created after the group
        knew their topics: :meth:`reset_missing_positions` initializes them by ``new_partitions_policy``."""
        for tp in partitions:
            state = self.assignment.get(tp)
            if state is not None and state.is_missing_position():
                state.created_after_group = True

    @synchronized
    def reset_missing_positions(self) -> None:
        """kafka-python's initialization of partitions without a position; the ones created after the group
        knew their topics by ``auto_offset_reset_new_partitions`` ('none': NoOffsetForPartitionError)."""
        policy = new_partition_policy(self.reset_policy, self.new_partitions_policy)
        refused = set()
        for tp, state in self.assignment.items():
            if state.is_missing_position() and state.created_after_group:
                if policy == 'none':
                    refused.add(tp)
                else:
                    state.reset(reset_strategy(policy, ResetCause.INITIALIZATION))
        if refused:
            raise Errors.NoOffsetForPartitionError(refused)
        super().reset_missing_positions()

    @synchronized
    def all_consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions to commit, with the last consumed record's leader epoch and timestamp and the
        partition epoch of the position."""
        return {tp: OffsetAndMetadata(state.position.offset, state.position.metadata, state.position.leader_epoch,
                                      timestamp=state.consumed_timestamp(), partition_epoch=state.partition_epoch)
                for tp, state in self.assignment.items() if state.has_valid_position}

    @synchronized
    def seek_committed(self, partition: TopicPartition, committed: kafka.structs.OffsetAndMetadata) -> None:
        """Position ``partition`` at its committed offset, keeping the commit's epochs and timestamp."""
        self.assignment[partition].seek_with_epochs(
            committed, timestamp=getattr(committed, 'timestamp', -1),
            partition_epoch=getattr(committed, 'partition_epoch', -1))

    @synchronized
    def interest(self) -> Interest:
        """The partitions whose metadata freshness this consumer checks (KIP-232): every partition of the
        subscribed topics (the group's too, which its leader assigns) and the partitions the application
        assigned."""
        return Interest(frozenset(self.subscription or ()) | frozenset(self._group_subscription or ()),
                        frozenset(self._user_assignment))

    @synchronized
    def partitions_held_for_metadata(self) -> list[tuple[TopicPartition, PartitionState]]:
        """Assigned partitions held until the cluster metadata catches up with their epochs."""
        return [(tp, state) for tp, state in self.assignment.items() if state.held_for_leader_epoch is not None]

    @synchronized
    def positions(self) -> dict[TopicPartition, int]:
        """The offset of every assigned partition that has a position."""
        return {tp: state.position.offset for tp, state in self.assignment.items() if state.has_valid_position}

    @synchronized
    def partitions_held_at_expansions(self) -> list[tuple[TopicPartition, PartitionState]]:
        """Assigned partitions held at a partition expansion's barrier (KIP-253)."""
        return [(tp, state) for tp, state in self.assignment.items() if state.expansion_hold is not None]
