"""The one retry policy (kafka_kip.protocol.retry), on a fake clock: no network, no real time."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

import kafka_kip.errors as Errors
from kafka_kip.mirror.offset_map import MAP_TOPIC, OffsetMapStore
from kafka_kip.protocol.retry import RetryPolicy, RetryTimeout


class FakeClock:
    """Time moves only when a retry sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


def failing(errors: list[BaseException], result: str = 'done'):
    """A call raising ``errors`` one per attempt, then returning ``result``; ``calls`` counts the attempts."""
    def call() -> str:
        call.calls += 1
        if errors:
            raise errors.pop(0)
        return result
    call.calls = 0
    return call


def test_retriable_errors_are_retried_with_doubling_backoff() -> None:
    clock = FakeClock()
    call = failing([Errors.LeaderNotAvailableError('a'), Errors.NotLeaderForPartitionError('b'),
                    Errors.RequestTimedOutError('c')])
    policy = RetryPolicy(timeout_s=10, backoff_s=0.1, max_backoff_s=1.0, jitter=0.2)
    assert policy.run(call, 'reading t-0', clock=clock, draw=lambda: 0.5) == 'done'
    assert call.calls == 4
    assert clock.sleeps == [0.1, 0.2, 0.4]


def test_backoff_stays_within_its_jitter_and_its_cap() -> None:
    policy = RetryPolicy(timeout_s=10, backoff_s=0.1, max_backoff_s=1.0, jitter=0.2)
    assert [round(policy.backoff(n, 0.0), 6) for n in range(1, 7)] == [0.08, 0.16, 0.32, 0.64, 0.8, 0.8]
    assert [round(policy.backoff(n, 0.999999), 6) for n in range(1, 7)] == [0.12, 0.24, 0.48, 0.96, 1.0, 1.0]
    assert policy.backoff(10_000, 0.5) == 1.0  # no overflow however many attempts


def test_gives_up_at_the_deadline_never_waiting_past_it() -> None:
    clock = FakeClock()
    error = Errors.LeaderNotAvailableError('no leader for t-3')
    call = failing([error] * 100)
    policy = RetryPolicy(timeout_s=1.0, backoff_s=0.3, max_backoff_s=0.3, jitter=0.0)
    with pytest.raises(RetryTimeout) as raised:
        policy.run(call, 'reading t-3', clock=clock)
    assert clock.sleeps == [0.3, 0.3, 0.3, 0.1]  # the last wait ends at the deadline
    assert clock.now == pytest.approx(101.0)
    assert call.calls == 5
    assert (raised.value.what, raised.value.attempts, raised.value.last_error) == ('reading t-3', 5, error)
    assert str(raised.value) == ('RetryTimeout: reading t-3: gave up after 5 attempt(s) in 1.0 s; last error: '
                                 '[Error 5] LeaderNotAvailableError: no leader for t-3')
    assert isinstance(raised.value, Errors.KafkaTimeoutError)


def test_a_non_retriable_error_is_raised_at_once() -> None:
    clock = FakeClock()
    error = Errors.TopicAuthorizationFailedError('t')
    call = failing([error])
    with pytest.raises(Errors.TopicAuthorizationFailedError) as raised:
        RetryPolicy(timeout_s=10).run(call, 'reading t-0', clock=clock)
    assert raised.value is error
    assert (call.calls, clock.sleeps) == (1, [])


def test_attempts_limit_and_extra_retriable_types() -> None:
    clock = FakeClock()
    call = failing([OSError('refused')] * 5)
    policy = RetryPolicy(timeout_s=math.inf, max_attempts=3, backoff_s=0.5, max_backoff_s=0.5, jitter=0.0,
                         also_retry=(OSError,))
    with pytest.raises(RetryTimeout) as raised:
        policy.run(call, 'connecting', clock=clock)
    assert (call.calls, clock.sleeps, raised.value.attempts) == (3, [0.5, 0.5], 3)
    assert not RetryPolicy(timeout_s=1).retriable(OSError('refused'))


def test_a_shared_deadline_replaces_the_timeout() -> None:
    clock = FakeClock()
    policy = RetryPolicy(timeout_s=0.0, backoff_s=0.1, max_backoff_s=0.1, jitter=0.0)
    attempts = policy.begin('syncing g', deadline=clock.now + 5, clock=clock)
    assert attempts.remaining_ms() == 5000
    assert attempts.may_retry(Errors.NotCoordinatorError('g'))
    clock.now += 5
    assert not attempts.may_retry(Errors.NotCoordinatorError('g'))
    assert attempts.count == 2
    assert not policy.begin('syncing h', clock=clock).may_retry(Errors.NotCoordinatorError('h'))  # timeout 0


def test_the_hook_between_attempts_runs_after_each_wait() -> None:
    clock = FakeClock()
    hooked: list[float] = []
    call = failing([Errors.NotCoordinatorError('g')] * 2)
    policy = RetryPolicy(timeout_s=10, backoff_s=0.1, max_backoff_s=0.1, jitter=0.0)
    assert policy.run(call, 'syncing g', between=lambda: hooked.append(clock.now), clock=clock) == 'done'
    assert hooked == [pytest.approx(100.1), pytest.approx(100.2)]


@pytest.mark.parametrize(('fields', 'message'), [
    ({'timeout_s': -1}, 'retry timeout_s=-1: expected a number of seconds >= 0'),
    ({'timeout_s': 1, 'backoff_s': 2, 'max_backoff_s': 1}, 'retry backoff_s=2, max_backoff_s=1: expected'),
    ({'timeout_s': 1, 'jitter': 1.0}, 'retry jitter=1.0: expected 0 <= jitter < 1'),
    ({'timeout_s': 1, 'max_attempts': 0}, 'retry max_attempts=0: expected at least 1'),
    ({'timeout_s': math.inf}, 'a retry policy needs a deadline (timeout_s) or max_attempts'),
])
def test_bad_policies_are_refused_naming_the_value(fields: dict, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        RetryPolicy(**fields)
    assert str(raised.value).startswith(message)


class LeaderlessTarget:
    """A target cluster whose offset map topic exists but has no leader, whatever the metadata says."""

    name = 'target'
    request_timeout_ms = 2000

    def __init__(self) -> None:
        self.refreshes = 0

    def request(self, request, node_id=None):  # only the Metadata of describe_topics
        partition = SimpleNamespace(replica_nodes=[0])
        return SimpleNamespace(topics=[SimpleNamespace(name=MAP_TOPIC, error_code=0, is_internal=False,
                                                       partitions=[partition], topic_id=None)])

    def track_topics(self, topics, timeout_ms=None) -> None:
        pass

    def leader(self, tp):
        return -1, -1

    def refresh(self, timeout_ms=None) -> None:
        self.refreshes += 1


def test_offset_map_without_a_leader_gives_up_at_its_deadline_naming_the_partition() -> None:
    clock = FakeClock()
    target = LeaderlessTarget()
    store = OffsetMapStore(target, retry_backoff_ms=100, clock=clock)
    with pytest.raises(RetryTimeout) as raised:
        store.load()
    assert str(raised.value).startswith(f'RetryTimeout: reading the offset map {MAP_TOPIC}-0 on the target: gave up '
                                        'after ')
    assert str(raised.value).endswith(f'[Error 5] LeaderNotAvailableError: no leader known for {MAP_TOPIC}-0')
    assert isinstance(raised.value.last_error, Errors.LeaderNotAvailableError)
    assert clock.now == pytest.approx(102.0)  # the target's request timeout, no later
    assert max(clock.sleeps) <= 1.0
    assert target.refreshes == raised.value.attempts - 1
