"""What a copier counts besides its partitions' progress: errors by code and produce latency.

The counts are plain numbers updated on the copier's event loop; :meth:`CopyStats.snapshot` copies them for
readers on other threads (the metrics endpoint reads snapshots, never the live objects).
"""
from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: Upper bounds (seconds) of the produce latency histogram's buckets (the last bucket is +Inf).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class LatencyHistogram:
    """Cumulative-ready counts of observations per bucket of :data:`LATENCY_BUCKETS`, plus +Inf."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """``[(upper bound, observations at or below it), ...]`` ending with ``('+Inf', count)``."""
        out, running = [], 0
        for bound, n in zip((*map(str, LATENCY_BUCKETS), '+Inf'), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out

    def copy(self) -> LatencyHistogram:
        return LatencyHistogram(list(self.counts), self.total)

    def to_dict(self) -> dict[str, Any]:
        return {'count': self.count, 'sum_seconds': round(self.total, 6), 'buckets': dict(self.cumulative())}


@dataclass
class CopyStats:
    """Errors by name (the Kafka error, or the exception of a request that failed whole) and produce latency."""

    fetch_errors: Counter[str] = field(default_factory=Counter)
    produce_errors: Counter[str] = field(default_factory=Counter)
    produce_latency: LatencyHistogram = field(default_factory=LatencyHistogram)

    def snapshot(self) -> CopyStats:
        return CopyStats(Counter(self.fetch_errors), Counter(self.produce_errors), self.produce_latency.copy())

    def to_dict(self) -> dict[str, Any]:
        return {'fetch_errors': dict(self.fetch_errors), 'produce_errors': dict(self.produce_errors),
                'produce_latency': self.produce_latency.to_dict()}
