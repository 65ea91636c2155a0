"""Produce and fetch byte-rate quotas enforced as Kafka's ``ClientQuotaManager`` enforces them.

Each broker measures the bytes of every (user, client id) a quota applies to with Kafka's ``Rate`` over
``quota.window.num`` (11) windows of ``quota.window.size.seconds`` (1 s). A request that takes the rate above
the quota is answered at once with ``throttle_time_ms`` (the time until the rate is back at the quota, Kafka's
``QuotaUtils.throttleTime``), and its connection is muted for that time: the broker reads no further request from
it, as Kafka mutes a throttled channel (KIP-219). A produce is counted by its request size (and appended); a fetch
by its response size, capped beforehand at what one quota window holds, and a throttled fetch is answered empty
(its bytes uncounted), as Kafka does.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import NONE
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.registry import Handler

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

    def record(self, ctx: RequestContext, key: str, size: int) -> int:
        """Count ``size`` bytes of the request's (user, client id) against its ``key`` quota: the throttle time
        in milliseconds (0: within the quota, or no quota applies)."""
        found = _limit(ctx, key)
        if found is None:
            return 0
        bound, tags = found
        now_ms = ctx.cluster.now_ms()
        rate = self._rate(ctx.broker_id, key, tags, now_ms)
        rate.record(size, now_ms)
        value = rate.measure(now_ms)
        if value <= bound:
            return 0
        return math.floor((value - bound) / bound * rate.window_ms(now_ms) + 0.5)

    def unrecord(self, ctx: RequestContext, key: str, size: int) -> None:
        """Take back what :meth:`record` counted (a throttled fetch is answered empty)."""
        found = _limit(ctx, key)
        if found is not None:
            now_ms = ctx.cluster.now_ms()
            self._rate(ctx.broker_id, key, found[1], now_ms).record(-size, now_ms)

    def _rate(self, broker_id: int, key: str, tags: tuple[str, str], now_ms: int) -> ByteRate:
        sensor = (broker_id, key, *tags)
        rate = self._rates.get(sensor)
        if rate is None:
            if len(self._rates) >= self._sweep_at:  # many client ids: drop the idle ones (amortized)
                self._rates = {k: r for k, r in self._rates.items() if now_ms - r.last_record_ms < _SENSOR_EXPIRY_MS}
                self._sweep_at = max(1024, 2 * len(self._rates))
            rate = self._rates[sensor] = ByteRate()
        return rate


def _limit(ctx: RequestContext, key: str) -> tuple[float, tuple[str, str]] | None:
    user = ctx.principal if ctx.principal is not None else 'ANONYMOUS'
    return ctx.cluster.client_quotas.byte_rate_limit(key, user, ctx.client_id or '')


def max_bytes_in_window(ctx: RequestContext, key: str) -> int | None:
    """The most one request may move without being throttled for sure (Kafka's ``maxValueInQuotaWindow``)."""
    found = _limit(ctx, key)
    if found is None:
        return None
    return int(min(found[0] * (QUOTA_WINDOW_NUM - 1) * QUOTA_WINDOW_MS / 1000, 2 ** 31 - 1))


def produce_quota(handle: Handler) -> Handler:
    """Count a produce request's bytes against the producer's ``producer_byte_rate`` after it is handled."""
    @functools.wraps(handle)
    async def handle_with_quota(request: Any, ctx: RequestContext) -> Any:
        response = await handle(request, ctx)
        throttle_ms = ctx.cluster.quota_sensors.record(ctx, PRODUCER_BYTE_RATE, ctx.request_bytes)
        if throttle_ms:
            ctx.session.throttle_ms = throttle_ms
            if response is not None:
                response.throttle_time_ms = throttle_ms
        return response
    return handle_with_quota


def fetch_quota(handle: Handler) -> Handler:
    """Bound a consumer's fetch by its ``consumer_byte_rate`` window, count the answer's bytes, and answer a
    throttled fetch empty."""
    @functools.wraps(handle)
    async def handle_with_quota(request: Any, ctx: RequestContext) -> Any:
        window_bytes = max_bytes_in_window(ctx, CONSUMER_BYTE_RATE)
        if window_bytes is None:
            return await handle(request, ctx)
        request.max_bytes = min(request.max_bytes, window_bytes)
        request.min_bytes = min(request.min_bytes, request.max_bytes)
        response = await handle(request, ctx)
        size = 4 + len(response.encode(version=ctx.api_version))  # Kafka's FetchResponse.sizeOf
        sensors = ctx.cluster.quota_sensors
        throttle_ms = sensors.record(ctx, CONSUMER_BYTE_RATE, size)
        if not throttle_ms:
            return response
        sensors.unrecord(ctx, CONSUMER_BYTE_RATE, size)
        ctx.session.throttle_ms = throttle_ms
        return RESPONSES[ApiKey.Fetch](version=ctx.api_version, throttle_time_ms=throttle_ms, error_code=NONE,
                                       session_id=0, responses=[])
    return handle_with_quota
