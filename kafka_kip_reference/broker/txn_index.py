"""One replica log's transaction state: open transactions, aborted ones, and the last stable offset.

As Kafka's ``ProducerStateManager`` and ``TransactionIndex``: a transactional batch opens its producer's
transaction at its base offset (if none is open); the producer's commit or abort marker (a control batch)
closes it, and an abort is remembered as ``(producer_id, first_offset, last_offset)`` with the marker's offset
as the last. The first offset of the oldest open transaction bounds what ``read_committed`` consumers see
(the last stable offset, never above the high watermark); a fetch at ``read_committed`` gets the aborted
transactions that overlap what it reads, so the consumer can drop their records.
"""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import NamedTuple

from kafka_kip.protocol.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    """The offset of the abort marker."""


class TransactionIndex:
    """Open and aborted transactions of one log (rebuilt from its batches after truncation)."""

    def __init__(self) -> None:
        self._open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._aborted: list[AbortedTransaction] = []  # by last offset
        self._aborted_lasts: list[int] = []

    def append(self, header: BatchHeader, marker_commits: bool | None) -> None:
        """Account for an appended batch; ``marker_commits`` is the marker's type for a control batch."""
        if not header.attributes & TRANSACTIONAL_MASK:
            return
        if header.attributes & CONTROL_MASK:
            first = self._open.pop(header.producer_id, None)
            if first is not None and marker_commits is False:
                self._aborted.append(AbortedTransaction(header.producer_id, first, header.base_offset))
                self._aborted_lasts.append(header.base_offset)
            return
        self._open.setdefault(header.producer_id, header.base_offset)

    def rebuild(self, batches: Iterable[tuple[BatchHeader, bool | None]], log_start_offset: int) -> None:
        """Start over from the log's batches (after truncation or a new log start)."""
        self._open.clear()
        self._aborted.clear()
        self._aborted_lasts.clear()
        for header, marker_commits in batches:
            self.append(header, marker_commits)
        kept = bisect_left(self._aborted_lasts, log_start_offset)
        del self._aborted[:kept], self._aborted_lasts[:kept]

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None if none is open."""
        return min(self._open.values(), default=None)

    def open_transaction_offset(self, producer_id: int) -> int:
        """The first offset of the producer's open transaction, -1 if none is open."""
        return self._open.get(producer_id, -1)

    def is_open(self, producer_id: int) -> bool:
        return producer_id in self._open

    def aborted_between(self, start: int, end: int) -> list[AbortedTransaction]:
        """Aborted transactions with records in ``[start, end)`` (their marker at or after ``start``)."""
        i = bisect_left(self._aborted_lasts, start)
        return [a for a in self._aborted[i:] if a.first_offset < end]
