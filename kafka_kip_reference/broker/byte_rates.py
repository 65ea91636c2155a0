"""Byte rates as Kafka's quota sensors measure them: a ``Rate`` over ``quota.window.num`` (11) windows of
``quota.window.size.seconds`` (1 s), one per broker, quota key and (user, client id) tags. What is counted and when:
:mod:`kafka_kip_reference.broker.quota_throttling`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

QUOTA_WINDOW_NUM = 11
QUOTA_WINDOW_MS = 1000
#: sensors idle this long are dropped (Kafka expires them after an hour)
_SENSOR_EXPIRY_MS = 3600 * 1000


@dataclass
class _Sample:
    start_ms: int
    value: float = 0.0


@dataclass
class ByteRate:
    """Kafka's ``Rate`` of a ``SampledTotal``: bytes over the retained windows, divided by their span."""

    samples: list[_Sample] = field(default_factory=list)
    current: int = 0
    last_record_ms: int = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current(now_ms)
        if now_ms - sample.start_ms >= QUOTA_WINDOW_MS:
            self.current = (self.current + 1) % QUOTA_WINDOW_NUM
            if self.current >= len(self.samples):
                self.samples.append(_Sample(now_ms))
            else:
                self.samples[self.current] = _Sample(now_ms)
            sample = self.samples[self.current]
        sample.value += value
        self.last_record_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Bytes per second at ``now_ms``."""
        return self._total(now_ms) / (self.window_ms(now_ms) / 1000)

    def window_ms(self, now_ms: int) -> int:
        """The span the rate is taken over: at least ``quota.window.num - 1`` full windows."""
        self._purge(now_ms)
        elapsed = now_ms - min(sample.start_ms for sample in self.samples) if self.samples else 0
        full_windows = elapsed // QUOTA_WINDOW_MS
        if full_windows < QUOTA_WINDOW_NUM - 1:
            elapsed += (QUOTA_WINDOW_NUM - 1 - full_windows) * QUOTA_WINDOW_MS
        return max(elapsed, 1)

    def _current(self, now_ms: int) -> _Sample:
        if not self.samples:
            self.samples.append(_Sample(now_ms))
        return self.samples[self.current]

    def _total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(sample.value for sample in self.samples)

    def _purge(self, now_ms: int) -> None:
        for i, sample in enumerate(self.samples):
            if now_ms - sample.start_ms >= QUOTA_WINDOW_NUM * QUOTA_WINDOW_MS:
                self.samples[i] = _Sample(now_ms)


class QuotaSensors:
    """The byte rates one broker measures, by (quota key, user tag, client id tag)."""

    def __init__(self) -> None:
        self._rates: dict[tuple[int, str, str, str], ByteRate] = {}
        self._sweep_at = 1024

    def record(self, broker_id: int, key: str, tags: tuple[str, str], bound: float, size: float,
               now_ms: int) -> int:
        """Count ``size`` bytes of the sensor ``tags`` against its ``key`` quota of ``bound`` bytes per second on
        broker ``broker_id``: the throttle time in milliseconds (0: within the quota), Kafka's
        ``QuotaUtils.throttleTime``."""
        rate = self._rate(broker_id, key, tags, now_ms)
        rate.record(size, now_ms)
        value = rate.measure(now_ms)
        if value <= bound:
            return 0
        return math.floor((value - bound) / bound * rate.window_ms(now_ms) + 0.5)

    def unrecord(self, broker_id: int, key: str, tags: tuple[str, str], size: float, now_ms: int) -> None:
        """Take back what :meth:`record` counted (a throttled fetch is answered empty)."""
        self._rate(broker_id, key, tags, now_ms).record(-size, now_ms)

    def _rate(self, broker_id: int, key: str, tags: tuple[str, str], now_ms: int) -> ByteRate:
        sensor = (broker_id, key, *tags)
        rate = self._rates.get(sensor)
        if rate is None:
            if len(self._rates) >= self._sweep_at:  # many client ids: drop the idle ones (amortized)
                self._rates = {k: r for k, r in self._rates.items() if now_ms - r.last_record_ms < _SENSOR_EXPIRY_MS}
                self._sweep_at = max(1024, 2 * len(self._rates))
            rate = self._rates[sensor] = ByteRate()
        return rate
