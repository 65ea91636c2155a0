"""Helpers shared by the conformance tests: polling, producing a batch, group settings."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import kafka as stock_kafka

import kafka_kip as kafka

TP = kafka.TopicPartition
#: The client libraries a behaviour can be run with, where kafka_kip's extensions could change the outcome.
CLIENT_MODULES = {'kafka-python': stock_kafka, 'kafka_kip': kafka}
# Tansu 0.6.0 holds a JoinGroup for about session_timeout_ms / 2, so groups use a short session.
GROUP_CONFIG = {'session_timeout_ms': 3000, 'heartbeat_interval_ms': 1000}
CONSUMER_CONFIG = {'auto_offset_reset': 'earliest', 'enable_auto_commit': False, 'fetch_max_wait_ms': 100}
BASE_MS = 1_700_000_000_000  # record timestamps: BASE_MS + offset * 1000


def consume(consumer: Any, count: int, timeout: float = 10.0) -> list[Any]:
    """Poll until ``count`` records arrived (or ``timeout``); returns them in arrival order.

    Exceptions from ``poll()`` propagate.
    """
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=100).values():
            records.extend(batch)
    return records


def produce_one_batch(make: Callable[..., Any], tp: Any, values: list[bytes],
                      timestamps: list[int] | None = None) -> list[int]:
    """Produce ``values`` to ``tp`` as a single record batch; returns the offsets.

    The producer never auto-creates ``tp``'s topic: on a target whose metadata lags a creation (tansu under load),
    its first Metadata request would otherwise create the topic a second time."""
    producer = make(kafka.KafkaProducer, linger_ms=60_000, allow_auto_create_topics=False)
    futures = [producer.send(tp.topic, key=b'k%d' % i, value=value, partition=tp.partition,
                             timestamp_ms=None if timestamps is None else timestamps[i])
               for i, value in enumerate(values)]
    producer.flush()
    offsets = [f.get(timeout=10).offset for f in futures]
    producer.close()
    return offsets


def timestamps(count: int) -> list[int]:
    """Timestamps for records at offsets 0 .. count-1: ``BASE_MS + offset * 1000``."""
    return [BASE_MS + offset * 1000 for offset in range(count)]


def poll_outcome(consumer: Any, timeout: float = 5.0) -> list[tuple[int, bytes]] | Exception:
    """What polling gives first: ``[(offset, value), ...]`` of the first records returned, or the
    exception ``poll()`` raised (``[]`` if neither happened within ``timeout``)."""
    try:
        return [(r.offset, r.value) for r in consume(consumer, 1, timeout=timeout)]
    except Exception as exc:  # the outcome under test is whichever error poll() raises
        return exc


# Known issues shared by several modules (see integration/markers.py for how they apply).
MOCK_BY_TIME = ('ListOffsets by timestamp is not implemented: it answers offset -1, so offsets_for_times gives None '
                'and a reset by timestamp falls back to the log end offset')
