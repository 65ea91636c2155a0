"""KIP-232 on stock brokers: a consumer reading through a topic's deletion and recreation raises
InvalidPartitionEpochError before it returns any record of the new incarnation.

The brokers have no partition epochs: Apache Kafka 4.x (the session's real cluster) and the reference cluster
with ``features=()``. The consumer fetches by the topic id of the incarnation its position belongs to (Fetch
v13+, KIP-516), which the broker answers for that incarnation only. Unmodified kafka-python, which fetches by
name, returns the new incarnation's records as if they followed the old ones.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.protocol.api_key import ApiKey

from kafka_kip import KafkaConsumer, TopicPartition
from kafka_kip.errors import InvalidPartitionEpochError
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.fresh import FreshProcess
from tests.support.consuming import poll_records

pytestmark = pytest.mark.kip232

CONSUMER = Path(__file__).resolve().parents[1] / 'support' / 'scenarios' / 'consumer.py'
ROUNDS = 5
CONFIG = {'enable_auto_commit': False, 'auto_offset_reset': 'earliest', 'allow_auto_create_topics': False,
          'fetch_max_wait_ms': 100}
OLD = [b'old-0', b'old-1', b'old-2']
NEW = [b'new-%d' % i for i in range(5)]


@dataclass(frozen=True)
class Broker:
    """What the test needs of a cluster: its address and Kafka's topic operations."""

    name: str
    bootstrap_servers: str
    create: Callable[[str], None]
    recreate: Callable[[str], None]
    topic_id: Callable[[str], uuid.UUID | None]


def _reference(cluster: ReferenceCluster) -> Broker:
    def create(topic: str) -> None:
        cluster.create_topic(topic, partitions=1, replication_factor=3)

    def recreate(topic: str) -> None:
        cluster.delete_topic(topic)
        create(topic)

    return Broker('reference', cluster.bootstrap_servers, create, recreate, cluster.topic_id)


@pytest.fixture(params=['reference', 'apache-kafka'])
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    if request.param == 'reference':
        with ReferenceCluster(3, features=()) as cluster:
            yield _reference(cluster)
    else:
        cluster = request.getfixturevalue('apache_kafka')
        yield Broker('apache-kafka', cluster.bootstrap_servers, cluster.create_topic, cluster.recreate_topic,
                     cluster.topic_id)


def produce(broker: Broker, tp: TopicPartition, values: list[bytes]) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks='all')
    try:
        return [producer.send(tp.topic, value=v, partition=tp.partition).get(timeout=30).offset for v in values]
    finally:
        producer.close()


def poll_until(consumer: KafkaConsumer, count: int, seconds: float = 20) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in poll_records(consumer, count, seconds)]


def record_fetches(consumer: KafkaConsumer) -> list[Any]:
    """The FetchRequests ``consumer`` sends from now on (their API_VERSION is set when they go out)."""
    sent: list[Any] = []
    manager, send = consumer._manager, consumer._manager.send

    def recording_send(request: Any, node_id: Any = None, **kwargs: Any) -> Any:
        if request.API_KEY == ApiKey.Fetch:
            sent.append(request)
        return send(request, node_id=node_id, **kwargs)

    manager.send = recording_send
    return sent


def addressed(requests: list[Any]) -> set[tuple[int, uuid.UUID | None]]:
    """(version, topic id) of every topic the requests fetch or tell a fetch session to forget."""
    return {(request.API_VERSION, entry.topic_id) for request in requests
            for entry in list(request.topics) + list(request.forgotten_topics_data)}


def test_reading_through_a_recreation_raises_before_any_record_of_the_new_incarnation(broker: Broker) -> None:
    """Five times over: a consumer at offset 3 of a topic (records 0-2 read) sees it deleted and recreated with
    5 records. Every poll raises InvalidPartitionEpochError naming the old topic id, none returns a record; its
    fetches all named the old topic id (v13). A seek without epochs then reads the new incarnation from 3."""
    for round_ in range(ROUNDS):
        topic = f'recreated-{round_}-{uuid.uuid4().hex[:8]}'
        tp = TopicPartition(topic, 0)
        broker.create(topic)
        assert produce(broker, tp, OLD) == [0, 1, 2]
        old_id = broker.topic_id(topic)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, **CONFIG)
        try:
            fetches = record_fetches(consumer)
            consumer.assign([tp])
            assert poll_until(consumer, 3) == [(0, b'old-0'), (1, b'old-1'), (2, b'old-2')]

            broker.recreate(topic)
            new_id = broker.topic_id(topic)
            assert None is not new_id != old_id
            assert produce(broker, tp, NEW) == [0, 1, 2, 3, 4]
            for _ in range(3):
                with pytest.raises(InvalidPartitionEpochError) as raised:
                    assert poll_until(consumer, 1) == []
                assert (raised.value.partition_epochs, raised.value.topic_ids) == ({tp: -1}, {tp: old_id})
                assert f'topic id {old_id}' in str(raised.value) and f'topic id {new_id}' in str(raised.value)
            assert addressed(fetches) == {(13, old_id)}

            consumer.seek(tp, 3)
            assert poll_until(consumer, 2) == [(3, b'new-3'), (4, b'new-4')]
            assert (13, new_id) in addressed(fetches)
        finally:
            consumer.close()


def test_stock_kafka_python_returns_the_new_incarnations_records_as_if_they_followed(broker: Broker) -> None:
    """For contrast, unmodified kafka-python (in a process that never imported kafka_kip) in the same situation:
    its fetches name the topic, so after offsets 0-2 of the old incarnation it returns offsets 3-4 of the new."""
    topic = f'stock-{uuid.uuid4().hex[:8]}'
    tp = TopicPartition(topic, 0)
    broker.create(topic)
    produce(broker, tp, OLD)
    with FreshProcess(CONSUMER) as stock:
        stock.call('start', False, {'bootstrap_servers': broker.bootstrap_servers, **CONFIG})
        stock.call('assign', [[topic, 0]])
        stock.call('poll_until_records', 3)
        broker.recreate(topic)
        produce(broker, tp, NEW)
        seen = stock.call('poll_until_records', 5)
        stock.call('close')
    assert [(offset, value) for offset, _epoch, value in seen['records']] == [
        (0, 'old-0'), (1, 'old-1'), (2, 'old-2'), (3, 'new-3'), (4, 'new-4')]
