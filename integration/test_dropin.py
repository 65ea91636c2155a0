"""Drop-in round trip: admin, produce, consume, group, commit and ListOffsets, as kafka-python code.

Clients are used exactly as an existing kafka-python program uses them, through the drop-in
``import kafka_kip as kafka``; where kafka_kip's extensions could change the outcome, the same behaviour
also runs with stock kafka-python. A target that answers wrongly is a strict xfail naming the bug
(``known_bug``), and each such test is kept small enough to be the minimal reproduction of that bug.
"""
from __future__ import annotations

import time
from typing import Any

import pytest

import kafka_kip as kafka
from integration.support import (
    CLIENT_MODULES,
    CONSUMER_CONFIG,
    GROUP_CONFIG,
    MOCK_BY_TIME,
    TP,
    consume,
    produce_one_batch,
)
from integration.targets import BrokerTarget
from kafka_kip_reference.fixtures.conditions import wait_until

TANSU_LATEST = ('ListOffsets LATEST answers the base offset of the last batch + 1, not the log end '
                'offset (1 instead of 3 after one batch of 3 records)')
TANSU_BY_TIME = ('ListOffsets by timestamp answers offset 0 with the broker clock as timestamp, '
                 'whatever the requested time and the record timestamps')


def test_round_trip_keyed_records_with_group_commit(target: BrokerTarget, topic: str, clients: Any) -> None:
    """Keyed records produced to 2 partitions are consumed by a group member, committed, and resumed."""
    target.create_topic(topic, partitions=2)
    producer = clients(kafka.KafkaProducer)
    sent = [producer.send(topic, key=b'key-%d' % i, value=b'value-%d' % i, partition=i % 2) for i in range(6)]
    producer.flush()
    assert [(m.partition, m.offset) for m in (f.get(timeout=10) for f in sent)] == \
        [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]

    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **GROUP_CONFIG, **CONSUMER_CONFIG)
    consumer.subscribe([topic])
    records = consume(consumer, 6)
    assert sorted((r.partition, r.offset, r.key, r.value) for r in records) == \
        [(0, 0, b'key-0', b'value-0'), (0, 1, b'key-2', b'value-2'), (0, 2, b'key-4', b'value-4'),
         (1, 0, b'key-1', b'value-1'), (1, 1, b'key-3', b'value-3'), (1, 2, b'key-5', b'value-5')]
    assert consumer.poll(timeout_ms=300) == {}
    consumer.commit()
    assert {p: consumer.committed(TP(topic, p)) for p in (0, 1)} == {0: 3, 1: 3}
    consumer.close()

    # A new member of the group resumes from the committed offsets (assign: no second rebalance).
    resumed = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    resumed.assign([TP(topic, 0), TP(topic, 1)])
    assert [resumed.position(TP(topic, p)) for p in (0, 1)] == [3, 3]
    producer.send(topic, key=b'key-6', value=b'value-6', partition=0).get(timeout=10)
    assert [(r.partition, r.offset, r.key) for r in consume(resumed, 1)] == [(0, 3, b'key-6')]


@pytest.mark.parametrize('client', ['kafka-python', 'kafka_kip'])
def test_consumer_resumes_from_its_own_commit_after_reassignment(target: BrokerTarget, topic: str,
                                                                  clients: Any, client: str) -> None:
    """A consumer that committed, gave up its partition and got it back resumes at its commit."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    produce_one_batch(clients, tp, [b'a', b'b', b'c'])
    consumer = clients(CLIENT_MODULES[client].KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    assert len(consume(consumer, 3)) == 3
    consumer.commit()
    consumer.assign([])
    consumer.assign([tp])
    produce_one_batch(clients, tp, [b'd'])
    assert [(r.offset, r.value) for r in consume(consumer, 1, timeout=2)] == [(3, b'd')]


@pytest.mark.known_bug('tansu', 'tansu', 'OffsetFetch returns the committed metadata string as null')
def test_commit_metadata_round_trips(target: BrokerTarget, topic: str, clients: Any) -> None:
    """The metadata string of a commit is read back unchanged."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    consumer.commit({tp: kafka.OffsetAndMetadata(0, 'checkpoint-7', 0)})
    committed = consumer.committed(tp, metadata=True)
    assert (committed.offset, committed.metadata) == (0, 'checkpoint-7')


@pytest.mark.requires('create_topics')
def test_admin_creates_and_describes_topic(target: BrokerTarget, topic: str, clients: Any) -> None:
    """The admin client creates a 3-partition topic, lists it and describes it (leader epochs 0)."""
    admin = clients(kafka.KafkaAdminClient)
    admin.create_topics({topic: {'num_partitions': 3, 'replication_factor': 1}}, wait_for_metadata=True)
    # wait_for_metadata asks one broker; on a multi-broker Apache Kafka the next request may go to a broker whose
    # metadata cache has not caught up yet (propagation is asynchronous there)
    wait_until(lambda: topic in admin.list_topics(), f'{topic} listed')
    (described,) = wait_until(
        lambda: [d for d in admin.describe_topics([topic]) if d['error_code'] == 0], f'{topic} described')
    assert (described['name'], described['error_code']) == (topic, 0)
    partitions = sorted((p['partition_index'], p['error_code'], p['leader_epoch'])
                        for p in described['partitions'])
    assert partitions == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]


# -- ListOffsets ----------------------------------------------------------------------------------

@pytest.mark.known_bug('tansu', 'tansu', TANSU_LATEST)
def test_list_offsets_earliest_and_latest(target: BrokerTarget, topic: str, clients: Any) -> None:
    """beginning_offsets / end_offsets after one batch of 3 records are 0 / 3."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    assert produce_one_batch(clients, tp, [b'a', b'b', b'c']) == [0, 1, 2]
    consumer = clients(kafka.KafkaConsumer, **CONSUMER_CONFIG)
    assert (consumer.beginning_offsets([tp]), consumer.end_offsets([tp])) == ({tp: 0}, {tp: 3})


@pytest.mark.known_bug('tansu', 'tansu', TANSU_BY_TIME)
@pytest.mark.known_bug('librdkafka-mock', 'librdkafka-mock', MOCK_BY_TIME)
def test_offsets_for_times_finds_first_record_at_or_after(target: BrokerTarget, topic: str, clients: Any) -> None:
    """offsets_for_times finds the first record with a timestamp at or after the one asked for, and None
    after the last record's timestamp."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    base = int(time.time() * 1000) - 60_000
    produce_one_batch(clients, tp, [b'a', b'b', b'c'], timestamps=[base, base + 10, base + 20])
    consumer = clients(kafka.KafkaConsumer, **CONSUMER_CONFIG)
    found = consumer.offsets_for_times({tp: base + 5})[tp]
    assert found is not None and (found.offset, found.timestamp) == (1, base + 10)
    found = consumer.offsets_for_times({tp: base - 1000})[tp]
    assert found is not None and (found.offset, found.timestamp) == (0, base)
    assert consumer.offsets_for_times({tp: base + 21}) == {tp: None}
