"""KIP-232 / KIP-320 consumer features on a broker without the extensions (a stock reference cluster).

The broker advertises no ``kip.232`` and sends no partition epochs, but has topic ids (KIP-516): the offset
epoch then ties a position to the topic id, and commit timestamps stay in the committing consumer's memory.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from kafka_kip import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka_kip.consumer.offset_epoch import OffsetEpoch
from kafka_kip.errors import InvalidPartitionEpochError
from kafka_kip_reference import ReferenceCluster
from tests.support.consuming import poll_records

pytestmark = pytest.mark.kip232

TOPIC = 'stock'
TP = TopicPartition(TOPIC, 0)
BASE_MS = 1_700_000_000_000


@pytest.fixture
def broker() -> Iterator[ReferenceCluster]:
    with ReferenceCluster(1, features=()) as running:
        yield running


def create_and_fill(bootstrap_servers: str, prefix: str, count: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        for i in range(count):
            producer.send(TOPIC, value=f'{prefix}-{i}'.encode(), partition=0, timestamp_ms=BASE_MS + i).get(10)
    finally:
        producer.close()
        admin.close()


def delete_topic(bootstrap_servers: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.delete_topics([TOPIC])
    finally:
        admin.close()


def poll_until(consumer: KafkaConsumer, count: int, seconds: float = 10) -> list:
    return poll_records(consumer, count, seconds, TP)


def test_offset_epoch_and_commits_on_a_stock_broker(broker) -> None:
    bootstrap = broker.bootstrap_servers
    create_and_fill(bootstrap, 'old', 10)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id='g', enable_auto_commit=False,
                             auto_offset_reset='earliest')
    try:
        consumer.assign([TP])
        assert [r.value for r in poll_until(consumer, 10)] == [b'old-%d' % i for i in range(10)]
        stored = consumer.position_and_offset_epoch(TP)
        topic_id = consumer._cluster.topic_id(TOPIC)
        assert topic_id is not None
        assert stored.offset == 10
        assert OffsetEpoch.from_bytes(stored.offset_epoch) == OffsetEpoch(0, -1, topic_id)
        consumer.commit()
        # Not sent (no kip.232 advertised), kept in memory for the offset this consumer committed. (The metadata
        # is Kafka's '' for an empty one; Tansu, where this test ran before, answers null.)
        assert consumer.committed(TP, metadata=True) == OffsetAndMetadata(10, '', 0, timestamp=BASE_MS + 9)
    finally:
        consumer.close()

    delete_topic(bootstrap)
    create_and_fill(bootstrap, 'new', 20)
    resumed = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset='earliest')
    try:
        resumed.assign([TP])
        resumed.seek(TP, stored.offset, offset_epoch=stored.offset_epoch)
        for _ in range(3):
            with pytest.raises(InvalidPartitionEpochError) as raised:
                poll_until(resumed, 1, seconds=3)
            assert raised.value.partition_epochs == {TP: -1}
    finally:
        resumed.close()
