"""Keyed writes for the KIP-253 ordering tests: a kafka_kip producer cycling over a fixed set of keys, and the
per-key order of what consumers returned."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from kafka_kip import KafkaProducer
from kafka_kip_reference import ReferenceCluster

KEYS = [b'key-%d' % i for i in range(16)]


def produce(cluster: ReferenceCluster, values: range) -> None:
    produce_growing(cluster, [values], [])


def produce_growing(cluster: ReferenceCluster, phases: Sequence[range], counts: Sequence[int]) -> None:
    """One producer writes each phase's values (key of value v: ``KEYS[v % 16]``) and flushes; between phase i and
    i + 1, topic 't' grows to ``counts[i]`` partitions, the producer still partitioning by the count it knew (a
    kip.253 leader refuses those records, the producer re-partitions them for the new count)."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=2)
    try:
        for phase, values in enumerate(phases):
            if phase:
                cluster.create_partitions('t', counts[phase - 1])
            for v in values:
                producer.send('t', key=KEYS[v % len(KEYS)], value=b'%d' % v)
            producer.flush()
    finally:
        producer.close()


def inversions(returned: Iterable[tuple]) -> int:
    """Records returned after a later record of their key (each ``(..., key, value)``; values grow in send order)."""
    last: dict[bytes, int] = {}
    count = 0
    for *_, key, value in returned:
        count += value < last.get(key, -1)
        last[key] = max(value, last.get(key, -1))
    return count
