"""The leader epochs of a log and the offsets they start at: where an epoch ends, where two logs part.

One class for both sides of KIP-101/KIP-279/KIP-320: the reference cluster's partition logs keep theirs by
Kafka's ``LeaderEpochFileCache`` rules (:meth:`EpochCache.assign`) and answer OffsetForLeaderEpoch from it;
the mirror keeps the source epochs it read (:meth:`EpochCache.note`, bounded) to find the exact point where
its copy and a new source leader's log diverge. Both ask :meth:`EpochCache.end_offset_for_epoch` and
:meth:`EpochCache.divergence_point`.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import NamedTuple

from kafka_kip.protocol.constants import UNKNOWN_EPOCH, UNKNOWN_OFFSET


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class EpochCache:
    """Epochs with their start offsets, ascending in both; ``max_entries`` keeps only the newest ones."""

    def __init__(self, max_entries: int | None = None) -> None:
        self._entries: list[EpochEntry] = []
        self._max_entries = max_entries

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __iter__(self) -> Iterator[EpochEntry]:
        return iter(self._entries)

    @property
    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, oldest first."""
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNKNOWN_EPOCH

    # -- changes ---------------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's ``LeaderEpochFileCache.assign``): entries
        of this or a newer epoch, or starting at or after ``start_offset``, give way."""
        if self._entries:
            latest = self._entries[-1]
            if latest.epoch == epoch and start_offset >= latest.start_offset:
                return
        while self._entries and (self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset):
            self._entries.pop()
        self._append(EpochEntry(epoch, start_offset))

    def note(self, epoch: int, offset: int) -> None:
        """A reader saw a batch of ``epoch`` at ``offset``: only a newer epoch than the latest is recorded."""
        if epoch >= 0 and epoch > self.latest_epoch:
            self._append(EpochEntry(epoch, offset))

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget the epochs that start at or above ``end_offset`` (the log now ends there)."""
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch covering it starts there (Kafka's truncateFromStart)."""
        kept = [e for e in self._entries if e.start_offset > start_offset]
        covering = [e for e in self._entries if e.start_offset <= start_offset]
        if covering:
            kept.insert(0, EpochEntry(covering[-1].epoch, start_offset))
        self._entries = kept

    def clear(self) -> None:
        self._entries.clear()

    def _append(self, entry: EpochEntry) -> None:
        self._entries.append(entry)
        if self._max_entries is not None and len(self._entries) > self._max_entries:
            del self._entries[:-self._max_entries]

    # -- questions -------------------------------------------------------------------------------------

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer ``(largest epoch <= epoch, where it ends)`` for a log ending at
        ``log_end_offset``; ``(UNKNOWN_EPOCH, UNKNOWN_OFFSET)`` when undefined (Kafka's ``endOffsetFor``)."""
        if epoch == UNKNOWN_EPOCH or not self._entries:
            return UNKNOWN_EPOCH, UNKNOWN_OFFSET
        if self._entries[-1].epoch == epoch:
            return epoch, log_end_offset
        higher = bisect_right(self._entries, (epoch, float('inf')))
        if higher == len(self._entries):
            return UNKNOWN_EPOCH, UNKNOWN_OFFSET
        start = self._entries[higher].start_offset
        if higher == 0:
            return epoch, start
        return self._entries[higher - 1].epoch, start

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset`` (UNKNOWN_EPOCH if none)."""
        i = bisect_right([e.start_offset for e in self._entries], offset)
        return self._entries[i - 1].epoch if i else UNKNOWN_EPOCH

    def divergence_point(self, log_end_offset: int, leader_epoch: int, leader_end_offset: int) -> int:
        """Where a log ending at ``log_end_offset`` and a leader's log part, given the leader's end offset
        ``leader_end_offset`` for ``leader_epoch`` (Kafka's follower truncation rule): this log's records of
        epochs above ``leader_epoch``, and the leader's end, bound what the two logs share."""
        ours_end = log_end_offset
        for entry in self._entries:
            if entry.epoch > leader_epoch:
                ours_end = entry.start_offset
                break
        return min(leader_end_offset, ours_end, log_end_offset)
