"""How much a micro-batch reads: ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` and ``maxTriggerDelay``.

Spark's rules (``KafkaMicroBatchStream``):

- ``maxOffsetsPerTrigger`` caps a batch at about that many offsets, shared among the partitions in
  proportion to their lag; a partition whose share is below one offset still gets one.
- ``minOffsetsPerTrigger`` skips a trigger while fewer new offsets than that are available, unless
  ``maxTriggerDelay`` (default 15m) has passed since the last batch was admitted. The first trigger of a
  query is always admitted.
- A ``ReadAllAvailable`` limit (Spark's ``Trigger.Once``) overrides both.

One difference: with ``Trigger.AvailableNow`` the minimum is not applied, as a skipped trigger would end
the query with the remaining records unread.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

from kafka.structs import TopicPartition

from kafka_kip.spark.positions import Position, Positions


def rate_limit(limit: int, start: Mapping[TopicPartition, Position], latest: Positions) -> Positions:
    """``latest`` capped to about ``limit`` offsets after ``start`` in all (Spark's ``rateLimit``)."""
    lag = {tp: p.offset - start[tp].offset for tp, p in latest.items() if tp in start and p.offset > start[tp].offset}
    total = sum(lag.values())
    if total < 1:
        return dict(latest)
    capped = dict(latest)
    for tp, size in lag.items():
        share = limit * size / total
        end = min(latest[tp].offset, start[tp].offset + (math.ceil(share) if share < 1 else math.floor(share)))
        if end < latest[tp].offset:
            p = latest[tp]
            capped[tp] = Position(end, p.leader_epoch, p.partition_epoch, p.topic_id)
    return capped


class TriggerPacer:
    """``minOffsetsPerTrigger`` / ``maxTriggerDelay``: whether a trigger is admitted (one per query, stateful)."""

    def __init__(self, min_offsets: int, max_delay_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_offsets = min_offsets
        self.max_delay_ms = max_delay_ms
        self._clock = clock
        self._last_admitted_ms: float | None = None  # None: no batch admitted yet

    def admit(self, start: Mapping[TopicPartition, Position], latest: Mapping[TopicPartition, Position]) -> bool:
        """True to run a batch now; ``start`` lacks new partitions (Spark counts them from offset 0)."""
        now = self._clock() * 1000
        if self._last_admitted_ms is None or now - self._last_admitted_ms >= self.max_delay_ms:
            self._last_admitted_ms = now
            return True
        available = sum(p.offset - (start[tp].offset if tp in start else 0) for tp, p in latest.items())
        if available < self.min_offsets:
            return False
        self._last_admitted_ms = now
        return True
