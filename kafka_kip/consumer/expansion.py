"""KIP-253 in the consumer: records written after a partition expansion wait for the records written before it.

An expansion of a topic from N partitions bumps the leader epoch of partitions 0..N-1 (its *prior partitions*);
records a kip.253 leader accepts after that were partitioned for the new count (it refuses the others). For each
expansion the consumer learns the prior partitions' leader epochs at the expansion (LeaderEpochsForPartition)
and turns them into *thresholds* with OffsetForLeaderEpoch: the end offset of each prior partition's
pre-expansion epoch. The expansion's *barrier* on a partition is where its records written after the
expansion start: the threshold on a prior partition, offset 0 on a partition the expansion created.

A partition's records at or past a barrier are returned only once the expansion is **released**: the group has
returned every prior partition's records below its threshold (its position there reached the threshold). A
position counts as the group's when this consumer owns the partition (as of the start of the current poll,
so the records it returned are returned before anything released by them), or when its owner reported it in
a heartbeat of the current generation, or when it is committed. A consumer keeps asking for the positions of
every prior partition of an expansion holding it until the expansion is released, which it then stays for the
generation. Proposal as written holds only the partitions
an expansion creates; the barrier on the prior partitions themselves is needed when the partitioner moves keys
between existing partitions (Kafka's murmur2 % N from 4 to 6 partitions does), and costs nothing otherwise.

A record whose leader epoch is newer than the epochs the consumer learned its topic's expansions at may belong
to an expansion it does not know yet: it is held too, and the topic is learned again (after the metadata
caught up), so no post-expansion record is returned before its barrier is known.

This module is the state and the rules (no I/O): the coordinator learns expansions and exchanges positions in
heartbeats (:mod:`kafka_kip.consumer.coordinator`), the fetcher holds records (:mod:`kafka_kip.consumer.fetcher`).
State is read on the application thread and written on the client's I/O thread; every write replaces a whole
value, so readers see one state or the next.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafka.structs import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Expansion:
    """One expansion of a topic from ``old_count`` partitions: the thresholds of its prior partitions 0..N-1."""

    old_count: int
    prior_epochs: tuple[int, ...]
    thresholds: tuple[int, ...]

    def barrier(self, partition: int) -> int:
        """Where ``partition``'s records written after this expansion start (its threshold, or 0 if it is newer)."""
        return self.thresholds[partition] if partition < self.old_count else 0


@dataclass(frozen=True)
class TopicExpansions:
    """What the consumer learned about a topic's expansions, and at which leader epochs it learned it."""

    count: int
    expansions: tuple[Expansion, ...]
    known_epochs: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Hold:
    """Why a partition's records from ``offset`` on wait: ``expansion`` is not released (``waiting_for``: the
    prior partitions below their thresholds), or (no expansion) the topic's expansions are not known as of
    leader epoch ``epoch`` (-1: not learned at all)."""

    offset: int
    expansion: Expansion | None
    waiting_for: Mapping[TopicPartition, int] = field(default_factory=dict)
    epoch: int = -1

    def describe(self, topic: str) -> str:
        if self.expansion is None:
            if self.epoch < 0:
                return f'the partition expansions of {topic} are being learned'
            return f'a record has leader epoch {self.epoch}: the partition expansions of {topic} are learned again'
        waiting = ', '.join(f'{tp.topic}-{tp.partition} to {offset}' for tp, offset in sorted(self.waiting_for.items()))
        return (f'records written after {topic} grew from {self.expansion.old_count} partitions wait until the '
                f"group's positions reach their prior partitions' thresholds ({waiting})")


class ExpansionOrder:
    """A consumer's KIP-253 state: learned expansions, the group's positions and the partitions it owns.

    ``active`` is set while the group coordinator advertises ``kip.253`` and ordering is enabled; an inactive
    order holds nothing (stock brokers: kafka-python's behaviour).
    """

    def __init__(self) -> None:
        self.active = False
        self.learned: dict[str, TopicExpansions] = {}
        #: topic -> the leader epoch a fetched record showed that the learned expansions do not cover
        self.unknown_epochs: dict[str, int] = {}
        self._owned: dict[TopicPartition, int] = {}        # own positions as of the start of the poll
        self._reported: dict[TopicPartition, int] = {}     # positions from heartbeats (this generation)
        self._committed: dict[TopicPartition, int] = {}    # committed offsets of needed partitions
        #: partitions whose positions some member of the group needs (the coordinator's list)
        self.requested: frozenset[TopicPartition] = frozenset()
        #: (topic, expansion) the group's positions passed in this generation: released for good (positions only
        #: grow within a generation, and the reports that showed it are no longer asked for once released)
        self._passed: frozenset[tuple[str, Expansion]] = frozenset()

    # -- positions ---------------------------------------------------------------------------------------

    def snapshot(self, positions: Mapping[TopicPartition, int]) -> None:
        """The start of a poll: the positions of the partitions this consumer owns (what it has returned)."""
        self._owned = dict(positions)

    def heard(self, positions: Mapping[TopicPartition, int], requested: Iterable[TopicPartition]) -> None:
        """A heartbeat response: the group's positions this consumer asked for, and what the group needs."""
        self._reported = dict(positions)
        self.requested = frozenset(requested)

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Committed offsets of needed partitions (a position of the group too, for members that do not report)."""
        self._committed = {**self._committed, **offsets}

    def new_generation(self) -> None:
        """A rebalance: reports belong to the previous generation (the coordinator forgets them too)."""
        self._reported = {}
        self._committed = {}
        self.requested = frozenset()
        self._passed = frozenset()

    def group_position(self, tp: TopicPartition) -> int | None:
        """The group's position on ``tp``: this consumer's own, else reported, else committed (None if unknown)."""
        if tp in self._owned:
            return self._owned[tp]
        reported, committed = self._reported.get(tp), self._committed.get(tp)
        if reported is None or committed is None:
            return committed if reported is None else reported
        return max(reported, committed)

    def reports(self) -> dict[TopicPartition, int]:
        """This consumer's positions on the partitions the group needs."""
        return {tp: offset for tp, offset in self._owned.items() if tp in self.requested}

    # -- holds -------------------------------------------------------------------------------------------

    def released(self, topic: str, expansion: Expansion) -> dict[TopicPartition, int]:
        """The prior partitions of ``expansion`` whose group position is below its threshold (empty: released)."""
        waiting = {}
        for partition, threshold in enumerate(expansion.thresholds):
            tp = TopicPartition(topic, partition)
            position = self.group_position(tp)
            if position is None or position < threshold:
                waiting[tp] = threshold
        return waiting

    def hold(self, tp: TopicPartition, position: int) -> Hold | None:
        """The first hold on ``tp``'s records from ``position`` on, or None."""
        if not self.active:
            return None
        learned = self.learned.get(tp.topic)
        if learned is None:
            return Hold(position, None)  # not learned yet: nothing can be returned safely
        first = None
        for expansion in learned.expansions:
            barrier = expansion.barrier(tp.partition)
            if (barrier >= position and (first is None or barrier < first.offset)
                    and (tp.topic, expansion) not in self._passed):
                waiting = self.released(tp.topic, expansion)
                if waiting:
                    first = Hold(barrier, expansion, waiting)
                else:
                    self._passed = self._passed | {(tp.topic, expansion)}
        return first

    def still_holds(self, tp: TopicPartition, position: int, held: Hold) -> Hold | None:
        """The hold on ``tp`` at ``position`` now, for a partition that was held by ``held`` (None: released)."""
        known = self.known_epoch(tp)
        if held.expansion is None and held.epoch >= 0 and known is not None and known < held.epoch:
            return held
        hold = self.hold(tp, position)
        return hold if hold is not None and hold.offset <= position else None

    def known_epoch(self, tp: TopicPartition) -> int | None:
        """The newest leader epoch of ``tp`` whose expansions are known (None: any, ordering inactive)."""
        if not self.active:
            return None
        learned = self.learned.get(tp.topic)
        return None if learned is None else learned.known_epochs.get(tp.partition, -1)

    def needs(self, owned: Iterable[TopicPartition], positions: Mapping[TopicPartition, int]) -> set[TopicPartition]:
        """The partitions whose group position this consumer waits for: every prior partition of the expansions
        holding it that it does not own (``positions``: its current positions), those already past their
        thresholds too. A heartbeat answers only the positions asked for, and the coordinator keeps reports only
        of partitions some member asks for: a hold waiting for several owners would forget one owner's position
        while it learns another's if it stopped asking for what it learned."""
        owned = set(owned)
        wanted = set()
        for tp in owned:
            position = positions.get(tp)
            hold = None if position is None else self.hold(tp, position)
            if hold is not None and hold.expansion is not None:
                wanted.update(prior for prior in (TopicPartition(tp.topic, p) for p in range(hold.expansion.old_count))
                              if prior not in owned)
        return wanted

    def saw_epoch(self, topic: str, leader_epoch: int) -> None:
        """A fetched record of ``topic`` has a leader epoch the learned expansions do not cover: learn again."""
        if leader_epoch > self.unknown_epochs.get(topic, -1):
            self.unknown_epochs = {**self.unknown_epochs, topic: leader_epoch}

    def learn(self, topic: str, expansions: TopicExpansions) -> None:
        """Expansions of ``topic`` learned (replacing what was known)."""
        self.learned = {**self.learned, topic: expansions}
        unknown = dict(self.unknown_epochs)
        if unknown.get(topic, -1) <= max(expansions.known_epochs.values(), default=-1):
            unknown.pop(topic, None)
        self.unknown_epochs = unknown


def expansions_from_prior_epochs(prior: Mapping[int, Mapping[int, int]]) -> dict[int, tuple[int, ...]]:
    """``{old_count: prior epochs by partition}`` from LeaderEpochsForPartition's answer (partition -> its prior
    partitions -> epoch): the partitions an expansion created all share its prior partitions 0..N-1."""
    found: dict[int, tuple[int, ...]] = {}
    for epochs in prior.values():
        if epochs:
            count = len(epochs)
            if sorted(epochs) != list(range(count)):
                raise ValueError(f'prior partitions must be 0..N-1, got {sorted(epochs)}')
            found[count] = tuple(epochs[p] for p in range(count))
    return dict(sorted(found.items()))


__all__ = ['Expansion', 'ExpansionOrder', 'Hold', 'TopicExpansions', 'expansions_from_prior_epochs']
