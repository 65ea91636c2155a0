"""Every broker a client knew is down at once, then one or all come back: kafka_kip's consumer, producer and
admin client carry on, on a real Apache Kafka cluster (the session's shared one, see ``apache_kafka``): when one
broker comes back, for a topic it alone holds, and when every broker is back. One outage serves both.

The clients keep working through the whole outage, as an application does, so every reconnect attempt
fails and any backoff that grows with failures grows as far as it will. Once the brokers are back, each
client must finish its work within ``RECOVERY_TIMEOUT``.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import kafka_kip as kafka
from tests.support.consuming import poll_records

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


@dataclass
class _Clients:
    """A producer, a consumer and an admin client at work on partition 0 of one topic."""

    tp: Any
    producer: Any
    consumer: Any
    admin: Any
    pending: Any = None  # the record sent while every broker is down


def _start_clients(make: Callable[..., Any], topic: str) -> _Clients:
    """Write and read ``topic`` (partition 0) with new clients."""
    tp = TP(topic, 0)
    producer = make(kafka.KafkaProducer, acks='all', linger_ms=0)
    assert producer.send(topic, value=b'before', partition=0).get(timeout=10).offset == 0
    consumer = make(kafka.KafkaConsumer, auto_offset_reset='earliest', enable_auto_commit=False,
                    fetch_max_wait_ms=100)
    consumer.assign([tp])
    assert _consume(consumer, 1) == [(0, b'before')]
    return _Clients(tp, producer, consumer, make(kafka.KafkaAdminClient, request_timeout_ms=1000))


def _work_through_outage(working: list[_Clients]) -> None:
    """The consumers poll and the admin clients ask for the cluster for ``OUTAGE_SECONDS``: nothing answers."""
    end = time.monotonic() + OUTAGE_SECONDS
    while time.monotonic() < end:
        for clients in working:
            assert clients.consumer.poll(timeout_ms=200) == {}
            with pytest.raises(kafka.errors.KafkaError):
                clients.admin.describe_cluster()


def _consume(consumer: Any, count: int) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in poll_records(consumer, count, RECOVERY_TIMEOUT)]


def _assert_carried_on(cluster: Any, clients: _Clients) -> None:
    """Each client finishes its work within ``RECOVERY_TIMEOUT``: the record sent during the outage is
    written and read, and the admin client describes the cluster."""
    assert clients.pending.get(timeout=RECOVERY_TIMEOUT).offset == 1
    assert _consume(clients.consumer, 1) == [(1, b'during')]
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while True:
        try:
            described = clients.admin.describe_cluster()
            break
        except kafka.errors.KafkaError:
            if time.monotonic() >= deadline:
                raise
    assert {b['broker_id'] for b in described['brokers']} == set(cluster.broker_ids)  # fenced ones included


def test_clients_carry_on_when_one_broker_comes_back_then_every_broker(apache_kafka: Any,
                                                                       make: Callable[..., Any]) -> None:
    """Two sets of clients work through one 12 s outage of every broker: one on a topic whose single replica is
    broker 0, one on a topic with three replicas. Broker 0 comes back alone: the first set carries on (the
    others are still down). Then brokers 1 and 2 come back: the second set carries on."""
    suffix = uuid.uuid4().hex[:8]
    on_broker_0, on_every_broker = f'recovery-one-{suffix}', f'recovery-all-{suffix}'
    apache_kafka.create_topic(on_broker_0, replica_assignment={0: [0]})
    apache_kafka.create_topic(on_every_broker)
    first, second = _start_clients(make, on_broker_0), _start_clients(make, on_every_broker)

    for broker_id in apache_kafka.broker_ids:
        apache_kafka.kill_broker(broker_id)
    for clients in (first, second):
        clients.pending = clients.producer.send(clients.tp.topic, value=b'during', partition=0)
    _work_through_outage([first, second])

    apache_kafka.start_broker(0, wait=False)
    apache_kafka.wait_for_leader(first.tp, among=[0])
    _assert_carried_on(apache_kafka, first)

    for broker_id in (1, 2):
        apache_kafka.start_broker(broker_id, wait=False)
    apache_kafka.wait_for_leader(second.tp)
    _assert_carried_on(apache_kafka, second)
