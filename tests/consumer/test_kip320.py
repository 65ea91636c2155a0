"""KIP-320 on the consumer, on the reference cluster: the reset table, truncation, epochs on records/commits.

``test_reset_table`` is the proposal's table, cell by cell: every cell builds the real situation of its
column on a fresh 3-broker cluster, polls one consumer with the row's ``auto_offset_reset`` and asserts
where it continues (or what it raises). Record ``k`` of every log has timestamp ``ts(k)``, so a
'closest' reset by timestamp lands on an offset of its own.

    column           situation                                             log after it
    initialization   no position yet                                       0..9 (epoch 0)
    too low          position 3, DeleteRecords below 6                     6..9, log start 6
    precise          consumed 0..9 (epoch 0) from broker 0; broker 1,      0..4 (epoch 0),
                     which stopped copying after 4, is elected uncleanly   5..12 (epoch 1)
                     and takes 8 new records
    unknown          as 'precise', but the position (offset 10, last       same
                     record timestamp ts(9)) carries leader epoch 7, an
                     epoch the leader has no entry for (a position carried
                     over from elsewhere): OffsetForLeaderEpoch is undefined

(A leader always holds an entry at or above every epoch its partition handed out -- in Kafka as in the
reference cluster -- so an undefined answer takes a position whose epoch came from elsewhere.)
"""
from __future__ import annotations

import time
from pathlib import Path

import kafka
import kafka.structs
import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaError, LogTruncationError, NoOffsetForPartitionError, OffsetOutOfRangeError

from kafka_kip import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka_kip.errors import TruncatedPartitionError
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.fresh import FreshProcess
from tests.support.consuming import poll_records

pytestmark = pytest.mark.kip320

TOPIC = 'table'
CONSUMER = Path(__file__).resolve().parents[1] / 'support' / 'scenarios' / 'consumer.py'
TP = TopicPartition(TOPIC, 0)
BASE_MS = 1_700_000_000_000


def ts(offset: int) -> int:
    return BASE_MS + offset * 1000


class Raises:
    """An expected exception: its exact type and identifying field."""

    def __init__(self, error: type[KafkaError], **fields: object) -> None:
        self.error, self.fields = error, fields

    def __eq__(self, outcome: object) -> bool:
        return type(outcome) is self.error and all(getattr(outcome, k) == v for k, v in self.fields.items())

    def __repr__(self) -> str:
        return f'{self.error.__name__}({self.fields})'


# The proposal's table (rows: policies, columns: situations), plus the row for 'none'.
# An int is the offset the consumer continues from.
LOG_END_AFTER_TRUNCATION = 13
TABLE = {
    'latest': {'initialization': 10, 'too low': 10, 'precise': 5, 'unknown': LOG_END_AFTER_TRUNCATION},
    'earliest': {'initialization': 0, 'too low': 6, 'precise': 5, 'unknown': 0},
    'closest': {'initialization': 0, 'too low': 6, 'precise': 5, 'unknown': 9},
    'none': {
        'initialization': Raises(NoOffsetForPartitionError, args=({TP},)),
        'too low': Raises(OffsetOutOfRangeError, args=({TP: 3},)),
        'precise': Raises(TruncatedPartitionError, truncated_offsets={TP: 5}),
        'unknown': Raises(TruncatedPartitionError, truncated_offsets={TP: None}),
    },
}
CELLS = [(policy, column) for policy, row in TABLE.items() for column in row]


@pytest.fixture
def cluster():
    with ReferenceCluster(brokers=3) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        yield cluster


def produce(cluster: ReferenceCluster, offsets: range) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all')
    try:
        for offset in offsets:
            producer.send(TOPIC, value=b'%d' % offset, partition=0, timestamp_ms=ts(offset)).get(10)
    finally:
        producer.close()


def consume_all(consumer: KafkaConsumer, until: int) -> list:
    records = []
    deadline = time.monotonic() + 10
    while consumer.position(TP) < until and time.monotonic() < deadline:
        records += consumer.poll(timeout_ms=200).get(TP, [])
    return records


def truncate_by_unclean_election(cluster: ReferenceCluster, consumer: KafkaConsumer) -> None:
    produce(cluster, range(0, 5))
    cluster.pause_replication(TP, 1)
    produce(cluster, range(5, 10))
    consumer.seek(TP, 0)
    assert [(r.offset, r.leader_epoch) for r in consume_all(consumer, 10)] == [(o, 0) for o in range(10)]
    assert cluster.elect_leader(TP, 1, unclean=True) == 1
    produce(cluster, range(5, 13))
    assert [(r.offset, r.leader_epoch) for r in cluster.records(TP)] == \
        [(o, 0) for o in range(5)] + [(o, 1) for o in range(5, 13)]


def situation(column: str, cluster: ReferenceCluster, consumer: KafkaConsumer) -> None:
    if column == 'initialization':
        produce(cluster, range(10))
    elif column == 'too low':
        produce(cluster, range(10))
        consumer.seek(TP, 3)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            admin.delete_records({TP: 6})
        finally:
            admin.close()
        assert cluster.log_start_offset(TP) == 6
    elif column == 'precise':
        truncate_by_unclean_election(cluster, consumer)
    else:
        produce(cluster, range(0, 5))
        cluster.pause_replication(TP, 1)
        produce(cluster, range(5, 10))
        assert cluster.elect_leader(TP, 1, unclean=True) == 1
        produce(cluster, range(5, 13))
        assert cluster.epochs(TP) == [(0, 0), (1, 5)]
        consumer.seek(TP, OffsetAndMetadata(10, '', 7, timestamp=ts(9)))


def outcome(consumer: KafkaConsumer, log_end: int) -> int | KafkaError:
    """Poll until records come (their first offset), poll raises (the error), or the position reached the
    log end with nothing to return (the log end)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            records = consumer.poll(timeout_ms=100).get(TP)
            if records:
                return records[0].offset
            if consumer.position(TP) == log_end:
                return log_end
        except KafkaError as exc:
            return exc
    raise AssertionError(f'no outcome within 10 s; position {consumer.position(TP)}')


@pytest.mark.parametrize(('policy', 'column'), CELLS, ids=[f'{p}-{c}' for p, c in CELLS])
def test_reset_table(cluster: ReferenceCluster, policy: str, column: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset=policy,
                             enable_auto_commit=False, offset_epoch_wait_ms=1000)
    try:
        consumer.assign([TP])
        situation(column, cluster, consumer)
        log_end = cluster.log_end_offset(TP)
        assert TABLE[policy][column] == outcome(consumer, log_end)
        if policy == 'none' and column != 'initialization':
            # Raising moves nothing: the position is where the application left it.
            assert consumer.position(TP) == {'too low': 3, 'precise': 10, 'unknown': 10}[column]
    finally:
        consumer.close()


# -- truncation without a reset policy ---------------------------------------------------------------


def new_consumer(cluster: ReferenceCluster, **configs: object) -> KafkaConsumer:
    configs = {'auto_offset_reset': 'none', 'enable_auto_commit': False, **configs}
    return KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, **configs)


def poll_until(consumer: KafkaConsumer, count: int) -> list:
    """Poll until ``count`` records came (or 10 s passed); any exception propagates."""
    return poll_records(consumer, count, 10, TP)


def test_polling_on_after_truncation_continues_from_the_position(cluster: ReferenceCluster) -> None:
    consumer = new_consumer(cluster)
    try:
        consumer.assign([TP])
        truncate_by_unclean_election(cluster, consumer)
        with pytest.raises(TruncatedPartitionError) as raised:
            poll_until(consumer, 1)
        assert raised.value.truncated_offsets == {TP: 5}
        assert isinstance(raised.value, OffsetOutOfRangeError) and isinstance(raised.value, LogTruncationError)
        # Ignored: the next polls go on from offset 10 with the new leader's records, and nothing is
        # raised again (the fetch no longer carries the epoch that diverged).
        assert [(r.offset, r.leader_epoch) for r in poll_until(consumer, 3)] == [(10, 1), (11, 1), (12, 1)]
        for _ in range(5):
            assert consumer.poll(timeout_ms=100) == {}
        assert consumer.position(TP) == 13
    finally:
        consumer.close()


def test_iterator_raises_truncation_and_then_continues(cluster: ReferenceCluster) -> None:
    consumer = new_consumer(cluster, consumer_timeout_ms=5000)
    try:
        consumer.assign([TP])
        truncate_by_unclean_election(cluster, consumer)
        with pytest.raises(TruncatedPartitionError) as raised:
            next(consumer)
        assert raised.value.truncated_offsets == {TP: 5}
        assert [(r.offset, r.leader_epoch) for r in (next(consumer), next(consumer), next(consumer))] == \
            [(10, 1), (11, 1), (12, 1)]
    finally:
        consumer.close()


SEEKS_WITH_EPOCH = {
    'kafka_kip OffsetAndMetadata': lambda consumer: consumer.seek(TP, OffsetAndMetadata(10, '', 0)),
    'kafka-python OffsetAndMetadata': lambda consumer: consumer.seek(TP, kafka.structs.OffsetAndMetadata(10, '', 0)),
    'leader_epoch keyword': lambda consumer: consumer.seek(TP, 10, leader_epoch=0),
}


@pytest.mark.parametrize('seek', SEEKS_WITH_EPOCH.values(), ids=SEEKS_WITH_EPOCH.keys())
def test_seek_with_leader_epoch_is_validated_before_any_fetch(cluster: ReferenceCluster, seek) -> None:
    reader = new_consumer(cluster)
    consumer = new_consumer(cluster)
    try:
        reader.assign([TP])
        truncate_by_unclean_election(cluster, reader)
        consumer.assign([TP])
        seek(consumer)
        with pytest.raises(TruncatedPartitionError) as raised:
            poll_until(consumer, 1)   # raised before a single record of offset 10.. was returned
        assert raised.value.truncated_offsets == {TP: 5}
        # Without an epoch, the same seek fetches the new leader's records at 10 unchecked.
        consumer.seek(TP, 10)
        assert [r.offset for r in poll_until(consumer, 3)] == [10, 11, 12]
    finally:
        reader.close()
        consumer.close()


def test_stock_kafka_python_in_the_unknown_truncation_case(cluster: ReferenceCluster) -> None:
    """For contrast: what unmodified kafka-python 3.0.12 does in the table's 'unknown' situation, in a process
    that never imported kafka_kip.

    Its public seek() refuses an OffsetAndMetadata, so the position (offset 10, leader epoch 7) is set on
    its SubscriptionState: the state a stock consumer is in after consuming up to offset 10 in epoch 7.
    """
    ours = new_consumer(cluster, offset_epoch_wait_ms=1000)
    try:
        ours.assign([TP])
        situation('unknown', cluster, ours)   # positions ours at offset 10, leader epoch 7
        with FreshProcess(CONSUMER) as stock:
            stock.call('start', False, {'bootstrap_servers': cluster.bootstrap_servers, 'auto_offset_reset': 'none',
                                        'enable_auto_commit': False})
            stock.call('assign', [[TOPIC, 0]])
            stock.call('set_position', TOPIC, 0, 10, 7)
            # kafka-python never reports the truncation: its fetch carries epoch 7, the leader answers
            # OFFSET_OUT_OF_RANGE, and every poll raises a plain OffsetOutOfRangeError for offset 10 --
            # polling on never gets past it.
            for _ in range(3):
                assert stock.call('poll_error') == {'error': 'kafka.errors.OffsetOutOfRangeError',
                                                    'args': [{'table-0': 10}]}
            stock.call('close')

        with pytest.raises(TruncatedPartitionError) as raised:
            poll_until(ours, 1)
        assert raised.value.truncated_offsets == {TP: None}
        assert [r.offset for r in poll_until(ours, 3)] == [10, 11, 12]
    finally:
        ours.close()


def test_group_member_taking_over_a_truncated_committed_offset_detects_it_on_first_poll(
        cluster: ReferenceCluster) -> None:
    first = new_consumer(cluster, group_id='g', auto_offset_reset='earliest')
    try:
        first.subscribe([TOPIC])
        produce(cluster, range(0, 5))
        cluster.pause_replication(TP, 1)
        produce(cluster, range(5, 10))
        assert [r.offset for r in poll_until(first, 10)] == list(range(10))
        first.commit()
    finally:
        first.close()
    assert cluster.elect_leader(TP, 1, unclean=True) == 1
    produce(cluster, range(5, 13))

    # kafka-python (in a process that never imported kafka_kip) takes the committed offset without its epoch
    # and reads the new leader's 10..12.
    with FreshProcess(CONSUMER) as stock:
        stock.call('start', False, {'topics': [TOPIC], 'bootstrap_servers': cluster.bootstrap_servers,
                                    'group_id': 'g', 'auto_offset_reset': 'none', 'enable_auto_commit': False})
        seen = stock.call('poll_until_records', 3)
        assert [record[:2] for record in seen['records']] == [[10, 1], [11, 1], [12, 1]]
        stock.call('close')

    taker = new_consumer(cluster, group_id='g')
    try:
        taker.subscribe([TOPIC])
        assert taker.committed(TP, metadata=True) == OffsetAndMetadata(
            10, '', 0, timestamp=ts(9), partition_epoch=cluster.partition_epoch(TP))
        with pytest.raises(TruncatedPartitionError) as raised:
            wait_until(lambda: taker.poll(timeout_ms=100), 'the first poll after joining to raise')
        assert raised.value.truncated_offsets == {TP: 5}
    finally:
        taker.close()


# -- epochs and timestamps on records and commits -----------------------------------------------------


def test_records_and_commits_carry_leader_epoch_and_timestamp(cluster: ReferenceCluster) -> None:
    produce(cluster, range(0, 3))
    assert cluster.elect_leader(TP, 1) == 1
    produce(cluster, range(3, 5))
    consumer = new_consumer(cluster, group_id='epochs')
    try:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        records = poll_until(consumer, 5)
        assert [(r.offset, r.leader_epoch, r.timestamp) for r in records] == \
            [(0, 0, ts(0)), (1, 0, ts(1)), (2, 0, ts(2)), (3, 1, ts(3)), (4, 1, ts(4))]
        consumer.commit()
        expected = OffsetAndMetadata(5, '', 1, timestamp=ts(4), partition_epoch=cluster.partition_epoch(TP))
        assert consumer.committed(TP, metadata=True) == expected
        consumer.commit({TP: OffsetAndMetadata(4, 'four', 1, timestamp=ts(3))})
        assert consumer.committed(TP, metadata=True) == OffsetAndMetadata(4, 'four', 1, timestamp=ts(3))
    finally:
        consumer.close()
    # The coordinator stored them (kip.232 advertised): a new consumer reads them back.
    reader = new_consumer(cluster, group_id='epochs')
    try:
        assert reader.committed(TP, metadata=True) == OffsetAndMetadata(4, 'four', 1, timestamp=ts(3))
    finally:
        reader.close()


def test_commit_timestamp_is_kept_in_memory_without_kip_232(reference_cluster_factory) -> None:
    stock = reference_cluster_factory(brokers=3, features=())
    stock.create_topic(TOPIC, partitions=1, replication_factor=3)
    produce(stock, range(0, 3))
    consumer = new_consumer(stock, group_id='memory')
    try:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        poll_until(consumer, 3)
        consumer.commit()
        assert consumer.committed(TP, metadata=True) == OffsetAndMetadata(
            3, '', 0, timestamp=ts(2), partition_epoch=-1)
    finally:
        consumer.close()
    reader = new_consumer(stock, group_id='memory')
    try:
        assert reader.committed(TP, metadata=True) == OffsetAndMetadata(3, '', 0)   # nothing on the wire
    finally:
        reader.close()


@pytest.mark.parametrize(('timestamp', 'why'), [(-1, 'no timestamp known'), (ts(100), 'newer than every record')])
def test_closest_falls_back_to_the_log_end(cluster: ReferenceCluster, timestamp: int, why: str) -> None:
    consumer = new_consumer(cluster, auto_offset_reset='closest', offset_epoch_wait_ms=1000)
    try:
        consumer.assign([TP])
        situation('unknown', cluster, consumer)
        consumer.seek(TP, OffsetAndMetadata(10, '', 7, timestamp=timestamp))
        assert outcome(consumer, LOG_END_AFTER_TRUNCATION) == LOG_END_AFTER_TRUNCATION
    finally:
        consumer.close()
