"""The one retry policy of kafka_kip's blocking paths: a deadline (or a number of attempts), a bounded backoff
with jitter, and which errors are worth another attempt, all as data.

A blocking path takes a :class:`RetryPolicy` and runs its attempts under :meth:`RetryPolicy.begin`::

    attempts = policy.begin(f'reading {tp}')
    while True:
        try:
            return read()
        except Errors.KafkaError as exc:
            attempts.failed(exc)   # re-raises, raises RetryTimeout, or waits the backoff

or simply ``policy.run(read, f'reading {tp}')``. The clock is a parameter, so the policy is tested without a
network or real time (:class:`Clock`).
"""
from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kafka.errors import KafkaError, KafkaTimeoutError

T = TypeVar('T')

__all__ = ['Attempts', 'Clock', 'RetryPolicy', 'RetryTimeout', 'SYSTEM_CLOCK']


class Clock(Protocol):
    """Where the retries read the time and wait: :data:`SYSTEM_CLOCK`, or a fake one in tests."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class _SystemClock:
    monotonic = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)


SYSTEM_CLOCK: Clock = _SystemClock()


class RetryTimeout(KafkaTimeoutError):
    """A blocking path gave up: its deadline passed (or its attempts ran out) on retriable errors.

    ``what`` names the operation (and its partition), ``attempts`` counts the failed attempts, ``last_error`` is
    the error of the last one.
    """

    def __init__(self, what: str, attempts: int, elapsed_s: float, last_error: BaseException) -> None:
        described = str(last_error) if isinstance(last_error, KafkaError) else \
            f'{type(last_error).__name__}: {last_error}'  # a KafkaError names its type itself
        super().__init__(f'{what}: gave up after {attempts} attempt(s) in {elapsed_s:.1f} s; last error: {described}')
        self.what = what
        self.attempts = attempts
        self.last_error = last_error


@dataclass(frozen=True)
class RetryPolicy:
    """How a blocking path retries.

    ``timeout_s``: the deadline, from the first attempt (``math.inf``: none; then set ``max_attempts``).
    ``max_attempts``: attempts in all (None: until the deadline). The n-th wait is ``backoff_s * 2**(n-1)``
    capped at ``max_backoff_s``, times a factor drawn from ``[1 - jitter, 1 + jitter]``, never beyond
    ``max_backoff_s`` nor the deadline. Retriable: every :class:`KafkaError` whose ``retriable`` is true, and any
    error of the ``also_retry`` types.
    """

    timeout_s: float
    backoff_s: float = 0.1
    max_backoff_s: float = 1.0
    jitter: float = 0.2
    max_attempts: int | None = None
    also_retry: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        if not self.timeout_s >= 0:
            raise ValueError(f'retry timeout_s={self.timeout_s!r}: expected a number of seconds >= 0 (math.inf: none)')
        if not 0 <= self.backoff_s <= self.max_backoff_s:
            raise ValueError(f'retry backoff_s={self.backoff_s!r}, max_backoff_s={self.max_backoff_s!r}: expected '
                             '0 <= backoff_s <= max_backoff_s')
        if not 0 <= self.jitter < 1:
            raise ValueError(f'retry jitter={self.jitter!r}: expected 0 <= jitter < 1')
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f'retry max_attempts={self.max_attempts!r}: expected at least 1 (None: no limit)')
        if self.max_attempts is None and math.isinf(self.timeout_s):
            raise ValueError('a retry policy needs a deadline (timeout_s) or max_attempts')

    def retriable(self, error: BaseException) -> bool:
        """True if another attempt may succeed where ``error`` failed this one."""
        return isinstance(error, self.also_retry) or (isinstance(error, KafkaError) and error.retriable is True)

    def backoff(self, attempt: int, draw: float) -> float:
        """The wait after failed attempt ``attempt`` (1, 2, ...) for a uniform ``draw`` in [0, 1)."""
        base = min(self.max_backoff_s, self.backoff_s * 2 ** min(attempt - 1, 64))
        return min(self.max_backoff_s, base * (1 - self.jitter + 2 * self.jitter * draw))

    def begin(self, what: str, *, deadline: float | None = None, clock: Clock = SYSTEM_CLOCK,
              draw: Callable[[], float] = random.random) -> Attempts:
        """The attempts of one operation named ``what``; ``deadline`` (``clock.monotonic()`` time) replaces
        ``timeout_s`` when given, for several operations sharing one."""
        return Attempts(self, what, clock, draw, deadline)

    def run(self, call: Callable[[], T], what: str, *, between: Callable[[], object] | None = None,
            clock: Clock = SYSTEM_CLOCK, draw: Callable[[], float] = random.random) -> T:
        """``call()`` until it returns, retrying retriable errors (``between()`` after each failed attempt's wait)."""
        attempts = self.begin(what, clock=clock, draw=draw)
        while True:
            try:
                return call()
            except Exception as exc:  # noqa: BLE001 -- not retriable: failed() raises it again
                attempts.failed(exc)
            if between is not None:
                between()


class Attempts:
    """The attempts of one operation under a :class:`RetryPolicy` (see :meth:`RetryPolicy.begin`)."""

    def __init__(self, policy: RetryPolicy, what: str, clock: Clock, draw: Callable[[], float],
                 deadline: float | None) -> None:
        self.policy = policy
        self.what = what
        self._clock = clock
        self._draw = draw
        self.started = clock.monotonic()
        self.deadline = self.started + policy.timeout_s if deadline is None else deadline
        self.count = 0

    def remaining_s(self) -> float:
        """Seconds left before the deadline (0 once it passed)."""
        return max(0.0, self.deadline - self._clock.monotonic())

    def remaining_ms(self) -> int:
        return int(self.remaining_s() * 1000)

    def may_retry(self, error: BaseException) -> bool:
        """Count a failed attempt: True if ``error`` is retriable and time and attempts are left."""
        self.count += 1
        limit = self.policy.max_attempts
        return self.policy.retriable(error) and self.remaining_s() > 0 and (limit is None or self.count < limit)

    def backoff_s(self) -> float:
        """The backoff of the last failed attempt, never beyond the deadline (an event loop's paths sleep it
        themselves)."""
        return min(self.remaining_s(), self.policy.backoff(max(1, self.count), self._draw()))

    def wait(self) -> None:
        """Wait the backoff of the last failed attempt."""
        self._clock.sleep(self.backoff_s())

    def failed(self, error: BaseException) -> None:
        """A failed attempt: raise ``error`` if it is not retriable, :class:`RetryTimeout` if no time or attempt is
        left, else wait the backoff (the caller then tries again)."""
        if self.may_retry(error):
            self.wait()
            return
        if not self.policy.retriable(error):
            raise error
        raise RetryTimeout(self.what, self.count, self._clock.monotonic() - self.started, error) from error
