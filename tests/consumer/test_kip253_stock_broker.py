"""KIP-253 on brokers that do not support it (the reference cluster with ``features=()``, and Apache Kafka): kafka_kip
keeps what kafka-python keeps and says that it orders nothing.

A keyed producer and a one-member group on a topic of 2 partitions; the topic grows to 4. No record is lost or
returned twice ('earliest'), records sent once the producer's metadata shows 4 partitions go to their key's
partition for 4, and the consumer logs one warning naming the topic, both counts and the missing ``kip.253``.
"""
from __future__ import annotations

import logging
import uuid
from collections import Counter

import pytest
from kafka.partitioner.default import murmur2

from kafka_kip import KafkaConsumer, KafkaProducer
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.support.stock_brokers import Brokers, brokers_fixture  # noqa: F401  (the brokers fixture)

pytestmark = pytest.mark.kip253

WARNING = 'does not advertise kip.253'


def send_keyed(producer: KafkaProducer, topic: str, values: range) -> dict[int, int]:
    """value -> partition of records keyed ``key-{value % 16}``, each acknowledged."""
    futures = {v: producer.send(topic, key=b'key-%d' % (v % 16), value=b'%d' % v) for v in values}
    return {v: future.get(timeout=30).partition for v, future in futures.items()}


def test_a_growing_topic_loses_nothing_and_the_consumer_warns_that_it_orders_nothing(brokers: Brokers, caplog):
    caplog.set_level(logging.WARNING, logger='kafka_kip.consumer')
    topic = f'grows-{uuid.uuid4().hex[:8]}'
    brokers.create_topic(topic, 2)
    producer = KafkaProducer(bootstrap_servers=brokers.bootstrap_servers, linger_ms=0, metadata_max_age_ms=200)
    consumer = KafkaConsumer(topic, bootstrap_servers=brokers.bootstrap_servers, group_id=f'g-{topic}',
                             auto_offset_reset='earliest', metadata_max_age_ms=200)
    returned: list[int] = []

    def poll() -> None:  # a timeout long enough for a rebalance: kafka-python drops a join that outlives poll()
        returned.extend(int(r.value) for records in consumer.poll(timeout_ms=1000).values() for r in records)

    try:
        send_keyed(producer, topic, range(40))
        wait_until(lambda: poll() or len(returned) >= 40, 'the first 40 records')
        brokers.grow(topic, 4)
        wait_until(lambda: poll() or len(consumer.assignment()) == 4, 'the 4 partitions assigned', timeout=120)
        wait_until(lambda: len(producer.partitions_for(topic)) == 4, 'the producer partitioning by 4')
        later = send_keyed(producer, topic, range(100, 140))
        wait_until(lambda: poll() or len(returned) >= 80, 'all 80 records')
    finally:
        consumer.close()
        producer.close()
    assert Counter(returned) == Counter(list(range(40)) + list(range(100, 140)))  # each exactly once
    assert later == {v: (murmur2(b'key-%d' % (v % 16)) & 0x7FFFFFFF) % 4 for v in range(100, 140)}
    [warning] = [r.getMessage() for r in caplog.records if WARNING in r.getMessage()]
    assert warning.startswith(f'Topic {topic} grew from 2 to 4 partitions, and group coordinator ')
