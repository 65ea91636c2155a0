"""Every broker a client knew is down at once, then one or all come back: kafka_kip's consumer, producer and
admin client carry on, on a real Apache Kafka cluster (the session's shared one, see ``apache_kafka``).

The clients keep working through the whole outage, as an application does, so every reconnect attempt
fails and any backoff that grows with failures grows as far as it will. Once the brokers are back, each
client must finish its work within ``RECOVERY_TIMEOUT``.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kafka_kip as kafka

TP = kafka.TopicPartition
OUTAGE_SECONDS = 12.0  # kafka-python's own reconnect backoff doubles past 6 s within this
RECOVERY_TIMEOUT = 10.0


@pytest.fixture
def make(apache_kafka: Any) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def build(cls: type, **config: Any) -> Any:
        client = cls(bootstrap_servers=apache_kafka.bootstrap_servers, **config)
        made.append(client)
        return client

    yield build
    for client in reversed(made):
        client.close()


def _work_through_outage(consumer: Any, admin: Any) -> None:
    """The consumer polls and the admin client asks for the cluster for ``OUTAGE_SECONDS``: nothing answers."""
    end = time.monotonic() + OUTAGE_SECONDS
    while time.monotonic() < end:
        assert consumer.poll(timeout_ms=200) == {}
        with pytest.raises(kafka.errors.KafkaError):
            admin.describe_cluster()


def _consume(consumer: Any, count: int) -> list[tuple[int, bytes]]:
    records: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=100).values():
            records.extend((r.offset, r.value) for r in batch)
    return records


def _scenario(cluster: Any, make: Callable[..., Any], topic: str, back: list[int]) -> None:
    """Write and read ``topic`` (partition 0), kill -9 every broker, work through the outage, start the
    brokers ``back``, and check that each client finishes its work."""
    tp = TP(topic, 0)
    producer = make(kafka.KafkaProducer, acks='all', linger_ms=0)
    assert producer.send(topic, value=b'before', partition=0).get(timeout=10).offset == 0
    consumer = make(kafka.KafkaConsumer, auto_offset_reset='earliest', enable_auto_commit=False,
                    fetch_max_wait_ms=100)
    consumer.assign([tp])
    assert _consume(consumer, 1) == [(0, b'before')]
    admin = make(kafka.KafkaAdminClient, request_timeout_ms=1000)

    for broker_id in cluster.broker_ids:
        cluster.kill_broker(broker_id)
    pending = producer.send(topic, value=b'during', partition=0)
    _work_through_outage(consumer, admin)
    for broker_id in back:
        cluster.start_broker(broker_id, wait=False)
    cluster.wait_for_leader(tp, among=back)

    assert pending.get(timeout=RECOVERY_TIMEOUT).offset == 1
    assert _consume(consumer, 1) == [(1, b'during')]
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while True:
        try:
            described = admin.describe_cluster()
            break
        except kafka.errors.KafkaError:
            if time.monotonic() >= deadline:
                raise
    assert {b['broker_id'] for b in described['brokers']} == set(cluster.broker_ids)  # fenced ones included


def test_clients_carry_on_when_every_broker_comes_back(apache_kafka: Any, make: Callable[..., Any]) -> None:
    """Consumer, producer and admin client recover once all three brokers are back after a 12 s outage."""
    topic = f'recovery-all-{uuid.uuid4().hex[:8]}'
    apache_kafka.create_topic(topic)
    _scenario(apache_kafka, make, topic, back=apache_kafka.broker_ids)


def test_clients_carry_on_when_one_broker_comes_back(apache_kafka: Any, make: Callable[..., Any]) -> None:
    """The same when only broker 0, the single replica of the topic, comes back."""
    topic = f'recovery-one-{uuid.uuid4().hex[:8]}'
    apache_kafka.create_topic(topic, replica_assignment={0: [0]})
    _scenario(apache_kafka, make, topic, back=[0])
