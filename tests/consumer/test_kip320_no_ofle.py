"""KIP-320 validation where the leader cannot answer OffsetForLeaderEpoch: the position is fetched unvalidated.

As in the Java consumer, a leader whose ApiVersions lack OffsetForLeaderEpoch (here a stock reference cluster
without it, like Tansu 0.6.0, which does not implement API 23) or offer only versions before
2 (a consumer configured with an old ``api_version`` here) gets no request: the validation of a position with a
leader epoch completes unasked, with one warning per partition. Positions with epochs come from seek(leader_epoch=),
seek(offset_epoch=) (also held until metadata caught up, KIP-232) and the consumer's own commit.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from kafka_kip import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka_kip.consumer.offset_epoch import OffsetEpoch
from kafka_kip.errors import TruncatedPartitionError
from kafka_kip_reference import ReferenceCluster
from tests.support.consuming import poll_records

pytestmark = pytest.mark.kip320

TOPIC = 'no-ofle'
TP = TopicPartition(TOPIC, 0)
FETCHER_LOG = 'kafka_kip.consumer.fetcher'


@pytest.fixture
def broker() -> Iterator[ReferenceCluster]:
    """A stock broker without OffsetForLeaderEpoch, and so without Fetch's diverging epochs (v12+, which check
    the last fetched epoch as OffsetForLeaderEpoch would); its leader epochs stay 0 (nothing is elected)."""
    with ReferenceCluster(1, features=(), api_versions={23: None, 1: (4, 11)}) as broker:
        assert 23 not in broker.api_versions   # the premise: no OffsetForLeaderEpoch at all
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        finally:
            admin.close()
        yield broker


def produce(bootstrap_servers: str, values: list[bytes]) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    try:
        return [producer.send(TOPIC, value=value, partition=0).get(10).offset for value in values]
    finally:
        producer.close()


def poll_until(consumer: KafkaConsumer, count: int, seconds: float = 5,
               tp: TopicPartition = TP) -> list[tuple[int, int, bytes]]:
    """``(offset, leader_epoch, value)`` of the records polled until ``count`` came or ``seconds`` passed."""
    return [(r.offset, r.leader_epoch, r.value) for r in poll_records(consumer, count, seconds, tp)]


def unvalidated_messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == FETCHER_LOG and r.levelno == level and 'OffsetForLeaderEpoch' in r.getMessage()]


def new_consumer(bootstrap_servers: str, **configs: object) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap_servers,
                         **{'auto_offset_reset': 'none', 'enable_auto_commit': False, **configs})


def test_seek_with_leader_epoch_is_fetched_unvalidated_with_one_warning(broker, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger=FETCHER_LOG)
    assert produce(broker.bootstrap_servers, [b'a', b'b', b'c']) == [0, 1, 2]
    consumer = new_consumer(broker.bootstrap_servers)
    try:
        consumer.assign([TP])
        consumer.seek(TP, 1, leader_epoch=0)
        assert poll_until(consumer, 2) == [(1, 0, b'b'), (2, 0, b'c')]
        consumer.seek(TP, 0, leader_epoch=0)
        assert poll_until(consumer, 3) == [(0, 0, b'a'), (1, 0, b'b'), (2, 0, b'c')]
        assert consumer.position(TP) == 3
    finally:
        consumer.close()
    (warning,) = unvalidated_messages(caplog, logging.WARNING)
    assert warning.startswith(f'Fetching {TP} at OffsetAndMetadata(offset=1, metadata=\'\', leader_epoch=0) '
                              'without validating the position')
    assert "does not support the 'OffsetForLeaderEpochRequest'" in warning
    (again,) = unvalidated_messages(caplog, logging.DEBUG)
    assert again.startswith(f'Fetching {TP} at OffsetAndMetadata(offset=0, metadata=\'\', leader_epoch=0) '
                            'unvalidated')


def test_offset_epoch_seek_is_held_for_metadata_then_fetched(broker) -> None:
    assert produce(broker.bootstrap_servers, [b'a', b'b', b'c', b'd', b'e']) == [0, 1, 2, 3, 4]
    reader = new_consumer(broker.bootstrap_servers, max_poll_records=2)
    try:
        reader.assign([TP])
        reader.seek(TP, 0)
        assert poll_until(reader, 2) == [(0, 0, b'a'), (1, 0, b'b')]
        stored = reader.position_and_offset_epoch(TP)
        topic_id = reader._cluster.topic_id(TOPIC)
    finally:
        reader.close()
    assert (stored.offset, OffsetEpoch.from_bytes(stored.offset_epoch)) == (2, OffsetEpoch(0, -1, topic_id))

    consumer = new_consumer(broker.bootstrap_servers)
    try:
        consumer.assign([TP])
        consumer.seek(TP, stored.offset, offset_epoch=stored.offset_epoch)
        assert poll_until(consumer, 3) == [(2, 0, b'c'), (3, 0, b'd'), (4, 0, b'e')]
        assert consumer.poll(timeout_ms=200) == {}
    finally:
        consumer.close()


def test_hold_for_a_leader_epoch_the_metadata_never_reaches_ends_after_offset_epoch_wait_ms(broker) -> None:
    # The leader epochs stay 0: a position claiming only leader epoch 3 waits offset_epoch_wait_ms for
    # metadata that never comes, then is fetched (unvalidated: the broker cannot validate) like any other.
    assert produce(broker.bootstrap_servers, [b'a', b'b', b'c']) == [0, 1, 2]
    consumer = new_consumer(broker.bootstrap_servers, offset_epoch_wait_ms=500)
    try:
        consumer.assign([TP])
        consumer.seek(TP, 1, offset_epoch=OffsetEpoch(leader_epoch=3).to_bytes())
        assert poll_until(consumer, 2) == [(1, 0, b'b'), (2, 0, b'c')]
    finally:
        consumer.close()


def test_consumer_resumes_from_its_own_commit_after_reassignment(broker) -> None:
    assert produce(broker.bootstrap_servers, [b'a', b'b', b'c']) == [0, 1, 2]
    consumer = new_consumer(broker.bootstrap_servers, group_id='g', auto_offset_reset='earliest')
    try:
        consumer.assign([TP])
        assert poll_until(consumer, 3) == [(0, 0, b'a'), (1, 0, b'b'), (2, 0, b'c')]
        consumer.commit()
        # The epoch the position is validated with is the one remembered from this consumer's commit.
        assert consumer.committed(TP, metadata=True).leader_epoch == 0
        consumer.assign([])
        consumer.assign([TP])
        assert produce(broker.bootstrap_servers, [b'd']) == [3]
        assert poll_until(consumer, 1) == [(3, 0, b'd')]
    finally:
        consumer.close()


# -- a leader with only OffsetForLeaderEpoch versions before 2 -----------------------------------------------

@pytest.mark.parametrize('api_version, outcome', [
    ((2, 1), 'truncation'),     # OffsetForLeaderEpoch v2: validated, the divergence at 3 is found
    ((2, 0), 'unvalidated'),    # only v0-1: fetched at offset 5 unasked
])
def test_versions_before_2_are_not_used(reference_cluster_factory, api_version: tuple[int, int], outcome: str) -> None:
    tp = TopicPartition('epochs', 0)
    cluster = reference_cluster_factory(brokers=2)
    cluster.create_topic(tp.topic, partitions=1, replication_factor=2)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all')
    try:
        assert [producer.send(tp.topic, b'v', partition=0).get(10).offset for _ in range(3)] == [0, 1, 2]
        follower = next(b for b in cluster.replicas(tp) if b != cluster.leader(tp))
        assert cluster.elect_leader(tp, follower) == 1
        assert [producer.send(tp.topic, b'v', partition=0).get(10).offset for _ in range(2)] == [3, 4]
        # Epoch 0 ended at offset 3: a position at 5 that claims epoch 0 diverged at 3.
        consumer = new_consumer(cluster.bootstrap_servers, api_version=api_version)
        try:
            consumer.assign([tp])
            consumer.seek(tp, OffsetAndMetadata(5, '', 0))
            if outcome == 'truncation':
                with pytest.raises(TruncatedPartitionError) as raised:
                    consumer.poll(timeout_ms=3000)
                assert raised.value.truncated_offsets == {tp: 3}
            else:
                assert consumer.poll(timeout_ms=1000) == {}
                assert producer.send(tp.topic, b'f', partition=0).get(10).offset == 5
                assert poll_until(consumer, 1, tp=tp) == [(5, 1, b'f')]
        finally:
            consumer.close()
    finally:
        producer.close()


@pytest.mark.parametrize('api_version, expected', [
    ((2, 1), []),                                         # validated: the divergence point 3 (the log end)
    ((2, 0), [(0, 0, b'a'), (1, 0, b'b'), (2, 0, b'c')]),  # unvalidatable: unknown truncation, 'earliest'
])
def test_out_of_range_position_on_an_unvalidatable_leader_is_reset_by_policy(reference_cluster_factory, api_version: tuple[int, int],
                                                                            expected: list) -> None:
    """A fetch past the log end with an epoch asks for validation; skipping it must not loop."""
    tp = TopicPartition('beyond', 0)
    cluster = reference_cluster_factory(brokers=1)
    cluster.create_topic(tp.topic, partitions=1, replication_factor=1)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        assert [producer.send(tp.topic, v, partition=0).get(10).offset for v in (b'a', b'b', b'c')] == [0, 1, 2]
    finally:
        producer.close()
    consumer = new_consumer(cluster.bootstrap_servers, api_version=api_version, auto_offset_reset='earliest')
    try:
        consumer.assign([tp])
        consumer.seek(tp, 10, leader_epoch=0)
        assert poll_until(consumer, 3, seconds=1.5, tp=tp) == expected
        assert consumer.position(tp) == 3
    finally:
        consumer.close()


def test_no_false_truncation_over_ten_thousand_records(broker):
    """Issue 4: on a broker whose epochs never change, 10k records consumed through a commit, a re-assignment
    and a seek with an epoch raise no truncation and come back exactly once, in order."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5)
    try:
        for i in range(10_000):
            producer.send(TOPIC, value=b'%05d' % i, partition=0)
        producer.flush()
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id='no-false-truncation',
                             auto_offset_reset='none', enable_auto_commit=False, session_timeout_ms=6000)
    try:
        consumer.assign([TP])
        consumer.seek(TP, OffsetAndMetadata(0, '', leader_epoch=0))
        first = poll_until(consumer, 4_000, seconds=20)[:4_000]
        consumer.seek(TP, 4_000)
        consumer.commit({TP: OffsetAndMetadata(4_000, '', leader_epoch=0)})
        consumer.assign([])
        consumer.assign([TP])                      # resumes from its own commit, epoch 0
        rest = poll_until(consumer, 6_000, seconds=20)
        assert consumer.position(TP) == 10_000
    finally:
        consumer.close()
    records = first + rest
    assert [offset for offset, _, _ in records] == list(range(10_000))
    assert {epoch for _, epoch, _ in records} == {0}
    assert [value for _, _, value in records] == [b'%05d' % i for i in range(10_000)]
