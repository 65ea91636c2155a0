"""Produce and fetch byte-rate quotas enforced as Kafka's ``ClientQuotaManager`` enforces them.

Each broker measures the bytes of every (user, client id) a quota applies to
(:mod:`kafka_kip_reference.broker.byte_rates`). A request that takes the rate above
the quota is answered at once with ``throttle_time_ms`` (the time until the rate is back at the quota, Kafka's
``QuotaUtils.throttleTime``), and its connection is muted for that time: the broker reads no further request from
it, as Kafka mutes a throttled channel (KIP-219). A produce is counted by its request size (and appended); a fetch
by its response size, capped beforehand at what one quota window holds, and a throttled fetch is answered empty
(its bytes uncounted), as Kafka does.
"""
from __future__ import annotations

import functools
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.byte_rates import QUOTA_WINDOW_MS, QUOTA_WINDOW_NUM
from kafka_kip_reference.broker.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.registry import Handler


def _limit(ctx: RequestContext, key: str) -> tuple[float, tuple[str, str]] | None:
    user = ctx.principal if ctx.principal is not None else 'ANONYMOUS'
    return ctx.cluster.client_quotas.byte_rate_limit(key, user, ctx.client_id or '')


def _record(ctx: RequestContext, key: str, size: int) -> int:
    """The throttle time of counting ``size`` bytes of the request's (user, client id) against its ``key``
    quota (0: within the quota, or none applies)."""
    found = _limit(ctx, key)
    if found is None:
        return 0
    bound, tags = found
    return ctx.cluster.quota_sensors.record(ctx.broker_id, key, tags, bound, size, ctx.cluster.now_ms())


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
        throttle_ms = _record(ctx, PRODUCER_BYTE_RATE, ctx.request_bytes)
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
        throttle_ms = _record(ctx, CONSUMER_BYTE_RATE, size)
        if not throttle_ms:
            return response
        _, tags = _limit(ctx, CONSUMER_BYTE_RATE)
        ctx.cluster.quota_sensors.unrecord(ctx.broker_id, CONSUMER_BYTE_RATE, tags, size, ctx.cluster.now_ms())
        ctx.session.throttle_ms = throttle_ms
        return RESPONSES[ApiKey.Fetch](version=ctx.api_version, throttle_time_ms=throttle_ms,
                                       error_code=constants.NONE, session_id=0, responses=[])
    return handle_with_quota
