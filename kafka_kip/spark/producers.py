"""The sink's producers, kept across the write tasks one Python worker runs.

A new producer pays a bootstrap (connection, ApiVersions, metadata), its topic's metadata and a connection to
each leader before its first row: a sizeable part of a task that writes tens of thousands of rows. Spark reuses
its Python workers from task to task, so, as Spark's own sink keeps one producer per configuration in each
executor (``CachedKafkaProducer``), a worker keeps its producers here for the next task with the same configs.

A task checks a producer out (it is then the task's alone) and checks it back in once every row it sent was
answered; a task that fails closes it instead, so no task inherits a producer in an unknown state. A producer
checked out again forgets checked offset mode's log ends (other tasks' producers may have written the same
partitions meanwhile). Producers idle for :data:`IDLE_TIMEOUT_S` are closed when a task next looks.

A kept producer that lost a broker connection while it was idle (its cluster stopped, or another cluster now
answers at its address) is closed and replaced when a task next asks for one: checked out, it would fail the
task (a client never talks to another cluster than the one it knew). Spark's own sink cache gets there by
failing the task, closing its producer and retrying the task; here the task runs with a new producer at once.
A cluster that goes away during a task still fails that task (its producer is closed, a retry gets a new one).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple

from kafka_kip.producer.arrow_writer import writer_configs
from kafka_kip.producer.producer import KafkaProducer
from kafka_kip.protocol.features import manager_of

#: How long an idle producer is kept (Spark's ``spark.kafka.producer.cache.timeout`` default, 10 minutes).
IDLE_TIMEOUT_S = 600.0

_lock = threading.Lock()


class _Kept(NamedTuple):
    since: float  # when it was checked in (monotonic seconds)
    producer: KafkaProducer
    connections: frozenset[Any]  # its broker connections that were up then


#: configs key -> the idle producers of those configs
_idle: dict[str, list[_Kept]] = {}


@contextmanager
def task_producer(producer_configs: Mapping[str, Any]) -> Iterator[KafkaProducer]:
    """A producer of ``producer_configs`` (with the Arrow writer's defaults) for one task: a kept one if idle,
    else a new one. Kept again when the block ends normally, closed when it raises."""
    configs = writer_configs(producer_configs)
    key = repr(sorted(configs.items()))
    producer = _check_out(key)
    if producer is None:
        producer = KafkaProducer(**configs)
    else:
        producer.forget_log_ends()
    try:
        yield producer
    except BaseException:
        producer.close()
        raise
    kept = _Kept(time.monotonic(), producer, _connections_up(producer))
    with _lock:
        _idle.setdefault(key, []).append(kept)


def _check_out(key: str) -> KafkaProducer | None:
    """An idle producer kept under ``key`` (the most recently used) that still has the connections it had when
    it was checked in; every one idle too long, and every one of ``key`` that lost a connection, is closed."""
    now = time.monotonic()
    with _lock:
        discarded = [kept for kept_list in _idle.values() for kept in kept_list if now - kept.since > IDLE_TIMEOUT_S]
        for kept_list in _idle.values():
            kept_list[:] = [kept for kept in kept_list if now - kept.since <= IDLE_TIMEOUT_S]
        candidates = _idle.get(key, [])
        chosen = None
        while candidates and chosen is None:
            kept = candidates.pop()
            if kept.connections <= _connections_up(kept.producer):
                chosen = kept.producer
            else:
                discarded.append(kept)
    for kept in discarded:
        kept.producer.close()
    return chosen


def _connections_up(producer: KafkaProducer) -> frozenset[Any]:
    """The producer's broker connections that are up now (compared by identity: a reconnection is another)."""
    connections = list(manager_of(producer)._conns.values())
    return frozenset(connection for connection in connections if connection.connected)


def close_idle() -> int:
    """Close every idle producer kept in this process; how many were closed."""
    with _lock:
        producers = [kept.producer for kept_list in _idle.values() for kept in kept_list]
        _idle.clear()
    for producer in producers:
        producer.close()
    return len(producers)


__all__ = ['IDLE_TIMEOUT_S', 'close_idle', 'task_producer']
