"""One replica's log of one partition: record batches as bytes plus the indexes Kafka keeps.

A log holds stored batches (already stamped with base offset and leader epoch), an offset index
(bisect over base/last offsets), a byte-position index (fetch size limits without touching the
batches), a time index (running maximum of batch max timestamps), the leader epoch cache
(:class:`~kafka_kip.protocol.epoch_cache.EpochCache`, shared with the mirror), idempotent producer state and the
transaction index (:mod:`kafka_kip_reference.broker.txn_index`: open and aborted transactions, last stable offset).
Offsets may have gaps (KIP-391 produce-with-offsets); every lookup tolerates them.

Segments are Kafka's: runs of whole batches. An append starts a new segment when the active one would exceed
``segment.bytes`` or when the batch's max timestamp is more than ``segment.ms`` past the max timestamp of the
segment's first batch (Kafka's ``LogSegment.shouldRoll``, without jitter); retention
(:mod:`kafka_kip_reference.broker.retention`) deletes whole segments from the start of the log only.
"""
from __future__ import annotations

import asyncio
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from kafka_kip.protocol import constants
from kafka_kip.protocol.epoch_cache import EpochCache, EpochEntry
from kafka_kip.protocol.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK
from kafka_kip_reference.broker.batches import (
    BatchHeader,
    InvalidBatch,
    iter_records,
    marker_commits,
    marker_coordinator_epoch,
    parse_header,
)
from kafka_kip_reference.broker.txn_index import AbortedTransaction, TransactionIndex

_PRODUCER_BATCHES_KEPT = 5  # Kafka keeps the last five batches per producer for duplicate detection
_INT32_MAX = 2**31 - 1
#: Kafka's ``segment.bytes`` and ``segment.ms`` defaults, for a log without a topic's configs.
_DEFAULT_SEGMENT_LIMITS = (1024**3, 7 * 24 * 3_600_000)
#: What an empty log's batch lists and segments are until its first append: one shared, immutable empty sequence,
#: so that an empty log (most logs of a cluster with many partitions) holds no lists of its own.
_EMPTY: tuple = ()
#: An empty log's producers (a dict of its own is made at the first producer id).
_NO_PRODUCERS: Mapping[int, _ProducerEntry] = MappingProxyType({})


@dataclass
class Segment:
    """One segment of a log: where it starts (offset and absolute byte position), the max timestamp of its first
    batch (what ``segment.ms`` is measured from) and its largest timestamp (what ``retention.ms`` is measured
    from; the wall clock at append for a batch without timestamps)."""

    base_offset: int
    start_byte: int
    first_timestamp: int
    max_timestamp: int


class LogRecord(NamedTuple):
    """A record as ``ReferenceCluster.records()`` reports it."""

    offset: int
    leader_epoch: int
    key: bytes | None
    value: bytes | None


class ProducerState(NamedTuple):
    """An idempotent or transactional producer as a log knows it (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int


@dataclass
class _ProducerEntry:
    epoch: int
    # (first_sequence, last_sequence, first_offset, last_offset) of the latest batches
    batches: deque = field(default_factory=lambda: deque(maxlen=_PRODUCER_BATCHES_KEPT))
    last_timestamp: int = -1
    coordinator_epoch: int = -1  # of its latest transaction marker


def _add_sequence(sequence: int, delta: int) -> int:
    total = sequence + delta
    return total - _INT32_MAX - 1 if total > _INT32_MAX else total


class PartitionLog:
    """The log of one partition on one broker.

    A cluster may hold 100,000 logs, most of them empty: a log's lists, producer table, transaction index and
    waiter set are made at their first use (an empty log shares immutable empty ones), so an empty log costs a few
    objects, not twenty, and the garbage collector has that much less to walk.
    """

    __slots__ = ('_segment_limits', 'segments', '_batches', '_bases', '_lasts', '_ends', '_running_max_timestamps',
                 '_bytes_total', 'epoch_cache', '_producers', '_transactions', '_waiters', 'log_start_offset',
                 'log_end_offset', 'high_watermark')

    def __init__(self, log_start_offset: int = 0,
                 segment_limits: Callable[[], tuple[int, int]] = lambda: _DEFAULT_SEGMENT_LIMITS) -> None:
        """``segment_limits()`` gives the topic's current ``(segment.bytes, segment.ms)``."""
        self._segment_limits = segment_limits
        self._empty()
        self.epoch_cache = EpochCache()  # the leader epochs of this replica's log
        self._waiters: set[asyncio.Future] | None = None  # made at the first waiting fetch
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_start_offset
        self.high_watermark = log_start_offset

    def _empty(self) -> None:
        """No batches, segments, producers or transactions (shared immutable empties until the next append)."""
        self.segments: list[Segment] = _EMPTY  # type: ignore[assignment]
        self._batches: list[bytes] = _EMPTY  # type: ignore[assignment]
        self._bases: list[int] = _EMPTY  # type: ignore[assignment]
        self._lasts: list[int] = _EMPTY  # type: ignore[assignment]
        self._ends: list[int] = _EMPTY  # type: ignore[assignment]  # absolute byte position just past each batch
        self._running_max_timestamps: list[int] = _EMPTY  # type: ignore[assignment]  # the time index: non-decreasing
        self._bytes_total = 0
        self._producers: Mapping[int, _ProducerEntry] = _NO_PRODUCERS
        self._transactions = _NO_TRANSACTIONS

    def _writable(self) -> None:
        """Give the log lists of its own before it changes them."""
        if self._batches is _EMPTY:
            self._batches, self._bases, self._lasts, self._ends, self._running_max_timestamps = [], [], [], [], []
        if self.segments is _EMPTY:
            self.segments = []

    # -- appends -------------------------------------------------------------------------------

    def check_sequence(self, header: BatchHeader) -> int | None:
        """Idempotence rules; returns the original base offset of a duplicate batch, else None.

        Raises InvalidBatch with OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_PRODUCER_EPOCH.
        """
        if header.producer_id < 0:
            return None
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return None  # first batch of this producer on this partition: any sequence starts it
        if header.producer_epoch < entry.epoch:
            raise InvalidBatch(constants.INVALID_PRODUCER_EPOCH,
                               'producer epoch is older than the current one')
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise InvalidBatch(constants.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                   'a new producer epoch must start at sequence 0')
            return None
        last_sequence = _add_sequence(header.base_sequence, header.last_offset_delta)
        for first_seq, last_seq, first_offset, _ in entry.batches:
            if first_seq == header.base_sequence and last_seq == last_sequence:
                return first_offset
        expected = _add_sequence(entry.batches[-1][1], 1) if entry.batches else 0
        if header.base_sequence != expected:
            raise InvalidBatch(constants.OUT_OF_ORDER_SEQUENCE_NUMBER,
                               f'expected sequence {expected}, got {header.base_sequence}')
        return None

    def append(self, batch: bytes, header: BatchHeader) -> None:
        """Append a stored batch whose parsed header is ``header`` (offsets already assigned)."""
        self._writable()
        self._roll_or_extend(header, len(batch))
        self._batches.append(batch)
        self._bases.append(header.base_offset)
        last = header.last_offset
        self._lasts.append(last)
        self._bytes_total += len(batch)
        self._ends.append(self._bytes_total)
        previous = self._running_max_timestamps[-1] if self._running_max_timestamps else -1
        self._running_max_timestamps.append(max(previous, header.max_timestamp))
        self.log_end_offset = last + 1
        epoch = header.partition_leader_epoch
        if epoch >= 0 and epoch > self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(epoch, header.base_offset)
        self._track_producer(batch, header)
        if header.attributes & TRANSACTIONAL_MASK:
            if self._transactions is _NO_TRANSACTIONS:
                self._transactions = TransactionIndex()
            self._transactions.append(header, marker_commits(batch, header))

    def _roll_or_extend(self, header: BatchHeader, size: int) -> None:
        timestamp = header.max_timestamp if header.max_timestamp >= 0 else int(time.time() * 1000)
        if self.segments:
            active = self.segments[-1]
            segment_bytes, segment_ms = self._segment_limits()
            if (self._bytes_total - active.start_byte + size <= segment_bytes
                    and timestamp - active.first_timestamp <= segment_ms):
                active.max_timestamp = max(active.max_timestamp, timestamp)
                return
        self.segments.append(Segment(header.base_offset, self._bytes_total, timestamp, timestamp))

    def _segment_bytes(self, index: int) -> int:
        end = self.segments[index + 1].start_byte if index + 1 < len(self.segments) else self._bytes_total
        return end - self.segments[index].start_byte

    def _track_producer(self, batch: bytes, header: BatchHeader) -> None:
        if header.producer_id < 0:
            return
        entry = self._producers.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            if self._producers is _NO_PRODUCERS:
                self._producers = {}
            entry = self._producers[header.producer_id] = _ProducerEntry(header.producer_epoch)  # type: ignore[index]
        entry.last_timestamp = header.max_timestamp
        if header.attributes & CONTROL_MASK:
            entry.coordinator_epoch = marker_coordinator_epoch(batch)
            return  # a transaction marker: it may carry a new epoch, but no sequence numbers
        entry.batches.append((header.base_sequence, _add_sequence(header.base_sequence, header.last_offset_delta),
                              header.base_offset, header.last_offset))

    def producers(self) -> list[ProducerState]:
        """The producers that wrote to this log, as Kafka's ``UnifiedLog.activeProducers``."""
        return [ProducerState(producer_id, entry.epoch, entry.batches[-1][1] if entry.batches else -1,
                              entry.last_timestamp, entry.coordinator_epoch,
                              self._transactions.open_transaction_offset(producer_id))
                for producer_id, entry in self._producers.items()]

    def producer_epoch(self, producer_id: int) -> int:
        """The latest epoch of ``producer_id`` in this log, -1 if it has written nothing here."""
        entry = self._producers.get(producer_id)
        return entry.epoch if entry is not None else constants.NO_PRODUCER_EPOCH

    # -- transactions --------------------------------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided: the first offset of the oldest open one, at most the HW."""
        first_unstable = self._transactions.first_unstable_offset()
        if first_unstable is None:
            return self.high_watermark
        return max(min(first_unstable, self.high_watermark), self.log_start_offset)

    def in_transaction(self, producer_id: int) -> bool:
        """True while ``producer_id`` has an open transaction in this log."""
        return self._transactions.is_open(producer_id)

    def aborted_between(self, start: int, end: int) -> list[AbortedTransaction]:
        """Aborted transactions with records in ``[start, end)``, for a read_committed fetch."""
        return self._transactions.aborted_between(start, end)

    # -- reads ---------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, upper: int, min_one: bool) -> bytes:
        """Batches holding offsets >= ``offset`` with base offset < ``upper``, within ``max_bytes``.

        With ``min_one`` the first batch is returned even if it alone exceeds ``max_bytes`` (KIP-74).
        """
        i = bisect_left(self._lasts, offset)
        j = bisect_left(self._bases, upper)
        if i >= j:
            return b''
        start = self._ends[i] - len(self._batches[i])
        k = bisect_right(self._ends, start + max_bytes, i, j)
        if k == i:
            if not min_one:
                return b''
            k = i + 1
        return self._batches[i] if k == i + 1 else b''.join(self._batches[i:k])

    def batches_from(self, offset: int) -> list[tuple[bytes, BatchHeader]]:
        """Stored batches holding offsets >= ``offset`` (for replication catch-up)."""
        i = bisect_left(self._lasts, offset)
        return [(batch, parse_header(batch)) for batch in self._batches[i:]]

    def records(self) -> list[LogRecord]:
        """Decode every record in the log (tests and tools; not a hot path); transaction markers are not
        records a consumer sees and are left out."""
        out = []
        for batch in self._batches:
            header = parse_header(batch)
            if header.attributes & CONTROL_MASK:
                continue
            epoch = header.partition_leader_epoch
            out.extend(LogRecord(r.offset, epoch, r.key, r.value) for r in iter_records(batch)
                       if r.offset >= self.log_start_offset)
        return out

    def batch_count(self) -> int:
        return len(self._batches)

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the batches the log holds (DescribeLogDirs' partition size)."""
        return sum(len(batch) for batch in self._batches)

    # -- truncation and retention --------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= ``offset`` (follower truncation)."""
        if offset >= self.log_end_offset:
            return
        self._writable()
        i = bisect_left(self._lasts, offset)
        if i < len(self._batches):
            self.log_end_offset = min(offset, self._bases[i])
            del self._batches[i:], self._bases[i:], self._lasts[i:], self._ends[i:]
            del self._running_max_timestamps[i:]
            if self._ends:
                self._bytes_total = self._ends[-1]
        else:
            self.log_end_offset = offset
        self.log_end_offset = max(self.log_end_offset, self.log_start_offset)
        self._rebuild_segments_from(bisect_right([s.base_offset for s in self.segments], self.log_end_offset) - 1)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self._rebuild_producers()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and restart it at ``offset`` (follower behind the leader's log start)."""
        self._empty()
        self.epoch_cache.clear()
        self.log_start_offset = self.log_end_offset = self.high_watermark = offset

    def advance_log_start(self, offset: int) -> None:
        """DeleteRecords: move the log start offset forward, dropping batches wholly below it."""
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self._writable()
        i = bisect_left(self._lasts, offset)
        del self._batches[:i], self._bases[:i], self._lasts[:i], self._ends[:i]
        del self._running_max_timestamps[:i]
        running = -1
        for n, batch in enumerate(self._batches):
            running = max(running, parse_header(batch).max_timestamp)
            self._running_max_timestamps[n] = running
        if self._batches:
            first = bisect_right([s.base_offset for s in self.segments], self._bases[0]) - 1
            del self.segments[:max(first, 0)]
            self.segments[0].start_byte = self._ends[0] - len(self._batches[0])
        else:
            self.segments.clear()
        self.epoch_cache.truncate_from_start(offset)
        self._rebuild_transactions()

    def retention_start_offset(self, now_ms: int, retention_ms: int, retention_bytes: int) -> int | None:
        """The log start offset once Kafka's retention has deleted what it would now, None if nothing: first the
        oldest segments while the log exceeds ``retention_bytes`` by at least their size, then those whose largest
        timestamp is more than ``retention_ms`` before ``now_ms`` (-1: no limit); only whole segments below the
        high watermark, the active one included (the log then starts at its end)."""
        deleted = 0
        segments = self.segments

        def below_high_watermark(index: int) -> bool:
            upper = segments[index + 1].base_offset if index + 1 < len(segments) else self.log_end_offset
            return self.high_watermark >= upper

        if retention_bytes >= 0 and segments:
            excess = self._bytes_total - segments[0].start_byte - retention_bytes
            while (deleted < len(segments) and below_high_watermark(deleted)
                   and excess - self._segment_bytes(deleted) >= 0):
                excess -= self._segment_bytes(deleted)
                deleted += 1
        if retention_ms >= 0:
            while (deleted < len(segments) and below_high_watermark(deleted)
                   and now_ms - segments[deleted].max_timestamp > retention_ms):
                deleted += 1
        if deleted == 0:
            return None
        return segments[deleted].base_offset if deleted < len(segments) else self.log_end_offset

    def _rebuild_segments_from(self, index: int) -> None:
        """After a truncation: drop the segments past ``index`` and recompute segment ``index``'s largest
        timestamp from the batches it still holds (none left: it goes too)."""
        del self.segments[max(index + 1, 0):]
        if not self.segments:
            return
        active = self.segments[-1]
        held = self._batches[bisect_left(self._bases, active.base_offset):]
        if not held:
            self.segments.pop()
            return
        active.max_timestamp = max(parse_header(batch).max_timestamp for batch in held)

    def _rebuild_producers(self) -> None:
        self._producers = _NO_PRODUCERS
        for batch in self._batches:
            self._track_producer(batch, parse_header(batch))
        self._rebuild_transactions()

    def _rebuild_transactions(self) -> None:
        transactions = TransactionIndex()
        headers = ((batch, parse_header(batch)) for batch in self._batches)
        transactions.rebuild(((header, marker_commits(batch, header)) for batch, header in headers),
                             self.log_start_offset)
        self._transactions = transactions

    # -- leader epoch cache (the replica's EpochCache) -------------------------------------------

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's LeaderEpochFileCache.assign)."""
        self.epoch_cache.assign(epoch, start_offset)

    @property
    def epochs(self) -> list[EpochEntry]:
        """The leader epoch cache, ascending."""
        return self.epoch_cache.entries

    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch answer ``(leader_epoch, end_offset)``; ``(-1, -1)`` when undefined."""
        return self.epoch_cache.end_offset_for_epoch(epoch, self.log_end_offset)

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset`` (-1 if none)."""
        return self.epoch_cache.epoch_for_offset(offset)

    # -- time index ----------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The first record with timestamp >= ``timestamp`` (decodes one batch), None if none."""
        i = bisect_left(self._running_max_timestamps, timestamp)
        if i == len(self._batches):
            return None
        batch = self._batches[i]
        epoch = parse_header(batch).partition_leader_epoch
        for record in iter_records(batch):
            if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                return TimestampAndOffset(record.timestamp, record.offset, epoch)
        return None

    def max_timestamp_offset(self) -> TimestampAndOffset | None:
        """The record with the largest timestamp (first such), None if the log is empty."""
        if not self._batches:
            return None
        best = self._running_max_timestamps[-1]
        i = bisect_left(self._running_max_timestamps, best)
        batch = self._batches[i]
        epoch = parse_header(batch).partition_leader_epoch
        for record in iter_records(batch):
            if record.timestamp == best:
                return TimestampAndOffset(best, record.offset, epoch)
        return None

    # -- waiting fetches -------------------------------------------------------------------------

    def add_waiter(self, waiter: asyncio.Future) -> None:
        """Resolve ``waiter`` at the next change of this log (new data, truncation, new leader)."""
        if self._waiters is None:
            self._waiters = set()
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: asyncio.Future) -> None:
        if self._waiters is not None:
            self._waiters.discard(waiter)

    def notify(self) -> None:
        if self._waiters:
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._waiters.clear()


#: The transaction index every log without transactional batches shares (never changed: a log makes its own at its
#: first transactional batch).
_NO_TRANSACTIONS = TransactionIndex()
