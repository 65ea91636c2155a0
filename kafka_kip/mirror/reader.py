"""Reading the source: fetches per source node, and fetched batches queued for the target.

A fetch (v12, read-committed, sessionless) carries each partition's position, the highest leader epoch
seen (``current_leader_epoch``, KIP-320) and the epoch of the last batch read (``last_fetched_epoch``).
What the answer says about a partition goes one of two ways: its batches are queued in the partition's
outbox (the hot path decodes no record), or the :class:`FetchEvents` handler is told what needs a task
(a diverging epoch, an offset out of range) or stops the partition.

A fetch answer also gives the source's end (the high watermark), for the partition's lag. Partitions no
longer fetched (stopped) have their end read with ListOffsets instead (:meth:`SourceReader.refresh_ends`).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import kafka_kip.errors as Errors
from kafka_kip.mirror import answers
from kafka_kip.mirror.batches import AbortedTransactions, Piece, iter_batches, rebuild
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.coalesce import Coalescer, ListOffsetsKind
from kafka_kip.mirror.settings import CopySettings
from kafka_kip.mirror.state import CopyState, PartitionCopy
from kafka_kip.mirror.stats import CopyStats
from kafka_kip.protocol import constants, requests
from kafka_kip.protocol.record_batch import CONTROL_MASK, parse_header

log = logging.getLogger(__name__)

_FETCHES_PER_NODE = 2
_HIGH_WATERMARK = ListOffsetsKind(constants.LATEST_TIMESTAMP)


class FetchedPartition(NamedTuple):
    """What a fetch in flight asked for one partition."""

    partition: PartitionCopy
    generation: int
    offset: int


@dataclass(frozen=True)
class FetchInFlight:
    """A fetch sent to a source node: its partitions by ``(topic, partition)``."""

    node: Any
    partitions: dict[tuple[str, int], FetchedPartition]


class FetchEvents(Protocol):
    """What the reader cannot settle itself (the copier starts a task or stops the partition)."""

    def diverged(self, p: PartitionCopy, epoch: int, end_offset: int) -> None: ...

    def out_of_range(self, p: PartitionCopy) -> None: ...

    def unknown_topic(self, p: PartitionCopy) -> None: ...

    def fetch_failed(self, p: PartitionCopy, error_code: int) -> None: ...


class SourceReader:
    """Sends fetches for the partitions that want records and queues what comes back."""

    def __init__(self, source: ClusterClient, settings: CopySettings, events: FetchEvents,
                 guarded: Any, stats: CopyStats, coalescer: Coalescer) -> None:
        self.source = source
        self._coalescer = coalescer
        self._stats = stats
        self.settings = settings
        self._events = events
        self._guarded = guarded
        self._in_flight: dict[Any, int] = {}
        self._failures: dict[Any, int] = {}

    def can_fetch(self, node: Any) -> bool:
        return self._in_flight.get(node, 0) < _FETCHES_PER_NODE

    def send(self, node: Any, parts: list[PartitionCopy]) -> None:
        by_topic: dict[str, list[tuple[int, int, int, int]]] = {}
        sent = {}
        for p in parts:
            cursor = p.cursor
            cursor.fetching = True
            by_topic.setdefault(p.source.topic, []).append(
                (p.source.partition, cursor.leader_epoch, cursor.position, cursor.epochs.latest_epoch))
            sent[(p.source.topic, p.source.partition)] = FetchedPartition(p, p.generation, cursor.position)
        settings = self.settings
        request = requests.fetch(by_topic, max_wait_ms=settings.fetch_max_wait_ms, max_bytes=settings.fetch_max_bytes,
                             partition_max_bytes=settings.max_partition_fetch_bytes,
                             isolation_level=settings.isolation_level.wire)
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        self.source.send(request, node).add_both(self._guarded(self._answered), FetchInFlight(node, sent))

    def _answered(self, fetch: FetchInFlight, result: Any) -> None:
        node = fetch.node
        self._in_flight[node] -= 1
        for asked in fetch.partitions.values():
            asked.partition.cursor.fetching = False
        if isinstance(result, Errors.Cancelled):  # our client closed the connection: the mirror is stopping
            log.debug('fetch from source node %s cancelled', node)
            self.trouble(asked.partition for asked in fetch.partitions.values())
            return
        if isinstance(result, BaseException):
            self._stats.fetch_errors[type(result).__name__] += 1
            failures = self._failures[node] = self._failures.get(node, 0) + 1
            (log.warning if failures % 100 == 1 else log.debug)(
                'fetching from source node %s failed (%d in a row): %s', node, failures, result)
            self.trouble(asked.partition for asked in fetch.partitions.values())
            return
        self._failures.pop(node, None)
        if result.error_code:
            self._stats.fetch_errors[answers.error_name(result.error_code)] += 1
            self.trouble(asked.partition for asked in fetch.partitions.values())
            return
        for topic in result.responses:
            for data in topic.partitions:
                asked = fetch.partitions.get((topic.topic, data.partition_index))
                if asked is None:
                    continue
                p = asked.partition
                if p.generation != asked.generation or p.state is not CopyState.COPYING \
                        or p.cursor.position != asked.offset:
                    continue
                self._partition_answered(p, data)

    def _partition_answered(self, p: PartitionCopy, data: Any) -> None:
        code = data.error_code
        if code != constants.NONE:
            self._stats.fetch_errors[answers.error_name(code)] += 1
        if code == constants.NONE:
            diverging = data.diverging_epoch
            if diverging is not None and diverging.end_offset >= 0:
                self._events.diverged(p, diverging.epoch, diverging.end_offset)
                return
            if data.high_watermark >= 0:
                p.cursor.source_end = data.high_watermark
            if data.records:
                aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
                self.read(p, data.records, aborted)
        elif code == constants.OFFSET_OUT_OF_RANGE:
            self._events.out_of_range(p)
        elif code == constants.UNKNOWN_TOPIC_OR_PARTITION:
            self._events.unknown_topic(p)
        elif answers.is_retriable(code):
            self.trouble([p])
        else:
            self._events.fetch_failed(p, code)

    def refresh_ends(self, parts: Iterable[PartitionCopy]) -> None:
        """Read the source's end of partitions that are not fetched (stopped), for their lag: ListOffsets
        (latest), asked together, one request per source broker. Once, no retry: a failed answer leaves the
        end as it was until the next refresh. (Tansu 0.6 answers its last batch's base offset + 1.)"""
        for p in parts:
            node, epoch = self.source.leader(p.source)
            if node is not None and node >= 0:
                self._coalescer.ask(self.source, node, _HIGH_WATERMARK, (p.source, epoch)).add_both(
                    self._guarded(self._end_listed), p)

    @staticmethod
    def _end_listed(p: PartitionCopy, answer: Any) -> None:
        if not isinstance(answer, BaseException) and answer is not None and answer.error_code == constants.NONE \
                and answer.offset >= 0:
            p.cursor.source_end = answer.offset

    def trouble(self, parts: Iterable[PartitionCopy]) -> None:
        """A retriable source error: back off and refresh metadata."""
        retry_at = time.monotonic() + self.settings.backoff
        for p in parts:
            p.cursor.retry_at = retry_at
        self.source.cluster.request_update()

    # -- batches to the outbox -----------------------------------------------------------------

    def read(self, p: PartitionCopy, records: bytes, aborted: list[tuple[int, int]]) -> None:
        """Queue the batches of a fetched blob from the position on; the hot path decodes no record."""
        cursor, outbox = p.cursor, p.outbox
        position, end = cursor.position, cursor.end
        txn = AbortedTransactions(aborted) if aborted else None
        queue = outbox.queue
        queued = 0
        for header, view in iter_batches(records):
            base = header.base_offset
            last = base + header.last_offset_delta
            if last < position:
                continue
            if end is not None and base >= end:
                position = max(position, end)
                break
            cursor.epochs.note(header.partition_leader_epoch, base)
            if ((txn is not None and txn.is_aborted(header, view)) or header.attributes & CONTROL_MASK
                    or header.records_count == 0):
                position = last + 1
                continue
            if (base >= position and header.records_count == header.last_offset_delta + 1
                    and (end is None or last < end)):
                queue.append(Piece(base, last, header.records_count, view, header.partition_leader_epoch))
                queued += len(view)
            else:
                queued += self._read_slow(p, header, view, position)
            position = last + 1
        cursor.position = position
        outbox.queued_bytes += queued

    def _read_slow(self, p: PartitionCopy, header: Any, view: memoryview, low: int) -> int:
        """Cut a batch at ``low`` / the end / its gaps (decodes its records)."""
        queued = 0
        for data in rebuild(view, header, low, p.cursor.end):
            piece = parse_header(data)
            p.outbox.queue.append(Piece(piece.base_offset, piece.last_offset, piece.records_count, data,
                                        header.partition_leader_epoch))
            queued += len(data)
        return queued
