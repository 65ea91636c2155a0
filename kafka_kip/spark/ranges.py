"""Spark tasks from offset ranges: ``maxRecordsPerPartition`` and ``minPartitions``, with Spark's arithmetic.

Spark's Kafka source (``KafkaOffsetRangeCalculator``, Spark 4.1) plans one task per partition range and:

- drops empty ranges;
- with ``maxRecordsPerPartition``, cuts a range of n offsets into ceil(n / max) pieces of near-equal size
  (integer division, the last piece takes the remainder);
- with ``minPartitions`` above the number of pieces, cuts them further in proportion to their size: a piece
  whose share of ``minPartitions`` rounds to 1 stays whole (so do the other pieces of its partition), the
  others share what is left of ``minPartitions``. The task count is about ``minPartitions``, as in Spark.

Batch queries plan as Spark's batch reads do (:func:`batch_tasks`): one task per partition, an empty range
included, unless ``minPartitions`` exceeds the partition count or a range exceeds ``maxRecordsPerPartition``;
micro-batches always go through :func:`divide` (which drops empty ranges), as in Spark.

Only the first piece of a range carries the range's leader epoch: the other pieces start at offsets inside
the span the first piece's validation covers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kafka.structs import TopicPartition

from kafka_kip.protocol.constants import UNKNOWN_EPOCH
from kafka_kip.spark.positions import Position


@dataclass(frozen=True)
class Range:
    """Offsets ``[start.offset, until)`` of ``tp``; ``start`` carries the epochs of the position."""

    tp: TopicPartition
    start: Position
    until: int

    @property
    def size(self) -> int:
        return self.until - self.start.offset


def _cut(piece: Range, parts: int) -> list[Range]:
    """``piece`` as ``parts`` near-equal pieces (Spark's integer division; the last takes the remainder)."""
    pieces, remaining, low = [], piece.size, piece.start.offset
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        high = min(low + size, piece.until)
        start = piece.start if low == piece.start.offset else Position(
            low, UNKNOWN_EPOCH, piece.start.partition_epoch, piece.start.topic_id)
        pieces.append(Range(piece.tp, start, high))
        low = high
    return [p for p in pieces if p.size > 0]


def _share(size: int, total: int, parts: int) -> int:
    """Spark's ``max(round(size / total * parts), 1)`` (Scala rounds halves up)."""
    return max(math.floor(size / total * parts + 0.5), 1)


def divide(ranges: list[Range], min_partitions: int | None, max_records: int | None) -> list[Range]:
    """The tasks for ``ranges`` (see the module doc)."""
    pieces = [r for r in ranges if r.size > 0]
    if max_records is not None:
        pieces = [p for r in pieces for p in _cut(r, math.ceil(r.size / max_records))]
    if min_partitions is None or len(pieces) >= min_partitions:
        return pieces
    total = sum(p.size for p in pieces)
    whole = {p.tp for p in pieces if _share(p.size, total, min_partitions) == 1}
    rest_total = sum(p.size for p in pieces if p.tp not in whole)
    rest_parts = max(min_partitions - sum(1 for p in pieces if p.tp in whole), 1)
    return [q for p in pieces
            for q in ([p] if p.tp in whole else _cut(p, _share(p.size, rest_total, rest_parts)))]


def batch_tasks(ranges: list[Range], min_partitions: int | None, max_records: int | None) -> list[Range]:
    """The tasks of a batch query (see the module doc)."""
    if (min_partitions is not None and min_partitions > len(ranges)) or (
            max_records is not None and any(r.size > max_records for r in ranges)):
        return divide(ranges, min_partitions, max_records)
    return list(ranges)
