"""The sink's producers, kept across the write tasks one Python worker runs.

A new producer pays a bootstrap (connection, ApiVersions, metadata), its topic's metadata and a connection to
each leader before its first row: a sizeable part of a task that writes tens of thousands of rows. Spark reuses
its Python workers from task to task, so, as Spark's own sink keeps one producer per configuration in each
executor (``CachedKafkaProducer``), a worker keeps its producers here for the next task with the same configs.

A task checks a producer out (it is then the task's alone) and checks it back in once every row it sent was
answered; a task that fails closes it instead, so no task inherits a producer in an unknown state. A producer
checked out again forgets checked offset mode's log ends (other tasks' producers may have written the same
partitions meanwhile). Producers idle for :data:`IDLE_TIMEOUT_S` are closed when a task next looks.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from kafka_kip.producer.arrow_writer import writer_configs
from kafka_kip.producer.producer import KafkaProducer

#: How long an idle producer is kept (Spark's ``spark.kafka.producer.cache.timeout`` default, 10 minutes).
IDLE_TIMEOUT_S = 600.0

_lock = threading.Lock()
#: configs key -> the idle producers of those configs, with the time each was checked in (monotonic seconds)
_idle: dict[str, list[tuple[float, KafkaProducer]]] = {}


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
    with _lock:
        _idle.setdefault(key, []).append((time.monotonic(), producer))


def _check_out(key: str) -> KafkaProducer | None:
    """An idle producer kept under ``key`` (the most recently used), closing every one idle too long."""
    expired = []
    now = time.monotonic()
    with _lock:
        for kept in _idle.values():
            expired += [producer for since, producer in kept if now - since > IDLE_TIMEOUT_S]
            kept[:] = [(since, producer) for since, producer in kept if now - since <= IDLE_TIMEOUT_S]
        kept = _idle.get(key)
        producer = kept.pop()[1] if kept else None
    for old in expired:
        old.close()
    return producer


def close_idle() -> int:
    """Close every idle producer kept in this process; how many were closed."""
    with _lock:
        producers = [producer for kept in _idle.values() for _, producer in kept]
        _idle.clear()
    for producer in producers:
        producer.close()
    return len(producers)


__all__ = ['IDLE_TIMEOUT_S', 'close_idle', 'task_producer']
