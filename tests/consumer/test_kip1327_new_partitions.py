"""KIP-1327's rule in classic groups, on brokers without ``kip.253`` (Apache Kafka 4.4, the reference cluster with
``features=()``): a ``latest`` group reads a partition its topic gained after the group knew it from its start,
while a partition the group knew keeps ``latest``'s meaning (:mod:`kafka_kip.consumer.new_partitions`).

The scenario of issue #32: one member assigned all 9 partitions of a topic that grows to 12 while 1,200 records
are written over all 12 (100 each). Before the rule, the 300 records of the 3 new partitions were never seen.
"""
from __future__ import annotations

import uuid
from collections import Counter

import pytest
from kafka.errors import KafkaConfigurationError, NoOffsetForPartitionError
from kafka.protocol.consumer import OffsetResetStrategy
from kafka.structs import TopicPartition

from kafka_kip import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka_kip.consumer.new_partitions import counted, new_partitions
from kafka_kip.consumer.subscription import SubscriptionState
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.support.stock_brokers import Brokers, brokers_fixture  # noqa: F401  (the brokers fixture)

pytestmark = pytest.mark.kip1327

OLD, NEW, PER_PARTITION = 9, 12, 100


def write(brokers: Brokers, topic: str, per_partition: int, first: int = 0) -> list[tuple[int, int]]:
    """``per_partition`` records to each of the topic's 12 partitions, acknowledged: [(partition, value)]."""
    producer = KafkaProducer(bootstrap_servers=brokers.bootstrap_servers, linger_ms=5, metadata_max_age_ms=200)
    try:
        wait_until(lambda: len(producer.partitions_for(topic)) == NEW, 'the producer seeing 12 partitions')
        values = range(first, first + per_partition * NEW)
        futures = [(v % NEW, v, producer.send(topic, partition=v % NEW, value=b'%d' % v)) for v in values]
        return [(partition, v) for partition, v, future in futures if future.get(timeout=30).partition == partition]
    finally:
        producer.close()


def member(brokers: Brokers, topic: str, **configs) -> KafkaConsumer:
    return KafkaConsumer(topic, bootstrap_servers=brokers.bootstrap_servers, group_id=f'g-{topic}',
                         auto_offset_reset='latest', metadata_max_age_ms=500, **configs)


class Reader:
    """Polls a consumer and keeps (partition, offset, value) of every record returned."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer
        self.records: list[tuple[int, int, int]] = []

    def poll(self) -> None:  # long enough for a rebalance: kafka-python drops a join that outlives poll()
        for records in self.consumer.poll(timeout_ms=1000).values():
            self.records.extend((r.partition, r.offset, int(r.value)) for r in records)

    def positioned(self, count: int) -> bool:
        self.poll()
        state = self.consumer._subscription.assignment
        return len(state) == count and all(s.has_valid_position for s in state.values())

    def read(self, count: int, what: str) -> None:
        wait_until(lambda: self.poll() or len(self.records) >= count, what, timeout=120)

    def first_offsets(self) -> dict[int, int]:
        first: dict[int, int] = {}
        for partition, offset, _ in self.records:
            first[partition] = min(first.get(partition, offset), offset)
        return first


def positioned_member(brokers: Brokers, topic: str) -> Reader:
    """A member (auto-commit off) of a group on ``topic``, all 9 partitions positioned at their ends."""
    reader = Reader(member(brokers, topic, enable_auto_commit=False))
    try:
        wait_until(lambda: reader.positioned(OLD), 'the 9 partitions positioned at their ends', timeout=120)
    except BaseException:
        reader.consumer.close()
        raise
    return reader


def test_a_latest_group_reads_every_record_the_grown_topic_gets(brokers: Brokers):
    topic = f'grows-{uuid.uuid4().hex[:8]}'
    brokers.create_topic(topic, OLD)
    reader = positioned_member(brokers, topic)  # no commits: the group knew 9 partitions by this member's assignment
    try:
        brokers.grow(topic, NEW)
        written = write(brokers, topic, PER_PARTITION)  # the consumer has not noticed the 3 new partitions yet
        reader.read(len(written), 'the 1,200 records')
        assert len(reader.consumer.assignment()) == NEW
    finally:
        reader.consumer.close()
    assert len(written) == 1200
    assert Counter(v for _, _, v in reader.records) == Counter(v for _, v in written)  # each exactly once
    assert sum(1 for partition, _, _ in reader.records if partition >= OLD) == 300
    assert {p: o for p, o in reader.first_offsets().items() if p >= OLD} == {9: 0, 10: 0, 11: 0}


def test_a_restarted_member_reads_the_new_partitions_and_a_known_uncommitted_one_stays_latest(brokers: Brokers):
    topic = f'restarts-{uuid.uuid4().hex[:8]}'
    brokers.create_topic(topic, OLD)
    first = positioned_member(brokers, topic)
    try:
        # the group commits its positions on every partition but 3, which it knew and never committed
        first.consumer.commit({tp: OffsetAndMetadata(first.consumer.position(tp), '', -1)
                               for tp in first.consumer.assignment() if tp.partition != 3})
    finally:
        first.consumer.close()
    brokers.grow(topic, NEW)
    before = write(brokers, topic, PER_PARTITION)  # while no member runs
    restarted = Reader(member(brokers, topic, enable_auto_commit=False))
    try:
        wait_until(lambda: restarted.positioned(NEW), 'the 12 partitions positioned', timeout=120)
        after = write(brokers, topic, 1, first=10_000)  # one more record to each partition, 3 included
        expected = [(p, v) for p, v in before if p != 3] + after
        restarted.read(len(expected), 'every record but the 100 written to partition 3 before the member started')
    finally:
        restarted.consumer.close()
    assert Counter(v for _, _, v in restarted.records) == Counter(v for _, v in expected)  # each exactly once
    [latest] = [v for p, v in after if p == 3]
    assert [(p, o, v) for p, o, v in restarted.records if p == 3] == [(3, 100, latest)]  # 'latest': from its end
    assert {p: o for p, o in restarted.first_offsets().items() if p >= OLD} == {9: 0, 10: 0, 11: 0}
    assert sum(1 for partition, _, _ in restarted.records if partition >= OLD) == 303


def test_the_rules_on_the_objects():
    t = [TopicPartition('t', p) for p in range(12)]
    # the group committed 0..8 but 3; this member held 0..4 before; topic u is new to the group
    known = counted({'t': 5}, [tp for tp in t[:9] if tp.partition != 3])
    assert known == {'t': 9}
    uncommitted = {t[3], *t[9:], TopicPartition('u', 0)}
    assert new_partitions(uncommitted, known) == set(t[9:])
    assert new_partitions(uncommitted, {}) == set()  # a topic the group never knew: nothing is new

    def reset(policy: str | None) -> SubscriptionState:
        """A 'latest' consumer assigned t-3 and t-9, t-9 marked as created after the group knew t, reset."""
        subscription = SubscriptionState('latest', new_partitions_policy=policy)
        subscription.assign_from_user([t[3], t[9]])
        subscription.mark_created_after_group({t[9]})
        subscription.reset_missing_positions()
        return subscription

    with pytest.raises(NoOffsetForPartitionError) as refused:
        reset('none')
    assert refused.value.args[0] == {t[9]}
    for policy, strategy in (('earliest', OffsetResetStrategy.EARLIEST), ('latest', OffsetResetStrategy.LATEST),
                             (None, OffsetResetStrategy.LATEST)):
        states = reset(policy).assignment
        assert (states[t[3]].reset_strategy, states[t[9]].reset_strategy) == (OffsetResetStrategy.LATEST, strategy)
        assert not states[t[9]].created_after_group  # the reset forgets the mark


@pytest.mark.parametrize('value', ['sometimes', 'closest', 1])
def test_an_unknown_policy_is_refused_naming_it(value):
    with pytest.raises(KafkaConfigurationError) as refused:
        KafkaConsumer(bootstrap_servers='127.0.0.1:1', auto_offset_reset_new_partitions=value)
    assert refused.value.args[0] == (f"auto_offset_reset_new_partitions={value!r} is not a reset policy for new "
                                  "partitions; accepted values: 'earliest', 'latest', 'none', None")
