"""Keyed writes for the KIP-253 ordering tests: a kafka_kip producer cycling over a fixed set of keys."""
from __future__ import annotations

from kafka_kip import KafkaProducer
from kafka_kip_reference import ReferenceCluster

KEYS = [b'key-%d' % i for i in range(16)]


def produce(cluster: ReferenceCluster, values: range) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=2)
    try:
        for v in values:
            producer.send('t', key=KEYS[v % len(KEYS)], value=b'%d' % v)
        producer.flush()
    finally:
        producer.close()
