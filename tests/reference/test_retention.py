"""Retention as Kafka enforces it (``retention.ms``, ``retention.bytes``, ``cleanup.policy``): a periodic check
deletes whole old segments and raises the log start offset; consumers below it see OFFSET_OUT_OF_RANGE or reset.
The same calls against the reference cluster and Apache Kafka 4.4 with the same log start offsets (segments roll
at ``segment.ms``, measured between record timestamps, so each record below gets a segment of its own)."""
from __future__ import annotations

import time
import uuid
from contextlib import contextmanager

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import OffsetOutOfRangeError
from kafka.structs import TopicPartition

from kafka_kip_reference.broker.batches import BatchHeader, build_batch, parse_header
from kafka_kip_reference.broker.config import BrokerConfig
from kafka_kip_reference.broker.log import PartitionLog
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.support.broker_operations import bootstrap_fixture  # noqa: F401  (the fixture)

HOUR_MS = 3_600_000
VALUE = b'v' * 100


def produce(bootstrap: str, topic: str, timestamps: list[int]) -> None:
    """One record per batch (``b'k<i>'``, :data:`VALUE`), each with its timestamp."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)  # idempotent: retried, never twice
    try:
        for i, timestamp in enumerate(timestamps):
            producer.send(topic, VALUE, key=b'k%d' % i, timestamp_ms=timestamp).get(timeout=30)
    finally:
        producer.close()


def log_start(consumer: KafkaConsumer, tp: TopicPartition, expected: int) -> int:
    """The log start offset of ``tp`` once it is ``expected`` (retention runs periodically), or the last one seen
    after 30 s."""
    seen = []

    def reached() -> bool:
        seen.append(consumer.beginning_offsets([tp])[tp])
        return seen[-1] == expected
    try:
        wait_until(reached, f'log start offset {expected} of {tp}')
    except AssertionError:
        pass
    return seen[-1]


def test_retention_ms_deletes_old_segments_and_consumers_reset(bootstrap):
    name = f'retention-{uuid.uuid4().hex[:8]}'
    compacted, deleted = TopicPartition(f'{name}-compact', 0), TopicPartition(f'{name}-delete', 0)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset='earliest', enable_auto_commit=False)
    strict = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset='none', enable_auto_commit=False)
    try:
        configs = {'segment.ms': '60000', 'retention.ms': str(HOUR_MS)}
        admin.create_topics([NewTopic(compacted.topic, 1, 1, topic_configs={**configs, 'cleanup.policy': 'compact'}),
                             NewTopic(deleted.topic, 1, 1, topic_configs=configs)])
        now = int(time.time() * 1000)
        timestamps = [now - 3 * HOUR_MS, now - 2 * HOUR_MS, now - 2 * HOUR_MS + 120_000, now]
        produce(bootstrap, compacted.topic, timestamps)  # first: every check that deletes below has seen it
        produce(bootstrap, deleted.topic, timestamps)
        # segments [0] [1] [2] [3]: the three older than retention.ms go, the log starts at the fresh one
        assert log_start(consumer, deleted, 3) == 3
        assert (consumer.end_offsets([deleted]), consumer.end_offsets([compacted])) == ({deleted: 4}, {compacted: 4})
        assert consumer.beginning_offsets([compacted]) == {compacted: 0}  # compacted: nothing deleted by time
        consumer.assign([deleted])
        consumer.seek(deleted, 0)
        records = wait_until(lambda: consumer.poll(timeout_ms=300).get(deleted), f'a record of {deleted}')
        assert [(r.offset, r.key) for r in records] == [(3, b'k3')]  # OFFSET_OUT_OF_RANGE, reset to earliest
        strict.assign([deleted])
        strict.seek(deleted, 1)
        with pytest.raises(OffsetOutOfRangeError) as raised:
            for _ in range(100):
                strict.poll(timeout_ms=300)
        assert raised.value.args == ({deleted: 1},)
    finally:
        consumer.close()
        strict.close()
        admin.delete_topics([compacted.topic, deleted.topic])
        admin.close()


@contextmanager
def one_partition_topic(bootstrap: str, prefix: str, segment_ms: int):
    """A fresh one-partition topic rolling segments at ``segment_ms``, with an admin client, a consumer and the
    topic's ConfigResource: ``(tp, admin, consumer, resource)``; the topic is deleted afterwards."""
    tp = TopicPartition(f'{prefix}-{uuid.uuid4().hex[:8]}', 0)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(tp.topic, 1, 1, topic_configs={'segment.ms': str(segment_ms)})])
        yield tp, admin, consumer, ConfigResource(ConfigResourceType.TOPIC, tp.topic)
    finally:
        consumer.close()
        admin.delete_topics([tp.topic])
        admin.close()


def test_retention_ms_changed_at_run_time_takes_effect(bootstrap):
    """retention.ms lowered after the records were written, by IncrementalAlterConfigs then AlterConfigs: the next
    periodic checks delete the segments older than the new limit."""
    with one_partition_topic(bootstrap, 'retention-ms', 60_000) as (tp, admin, consumer, resource):
        now = int(time.time() * 1000)
        produce(bootstrap, tp.topic, [now - 4 * HOUR_MS, now - 3 * HOUR_MS, now - 2 * HOUR_MS, now])
        assert consumer.beginning_offsets([tp]) == {tp: 0}  # retention.ms: the default 7 days keeps them all
        # segments [0] [1] [2] [3]: 2.5 hours keeps the two newest
        resource.configs = {'retention.ms': str(150 * 60_000)}
        assert admin.alter_configs([resource], incremental=True) == {'topic': {tp.topic: 'OK'}}
        assert log_start(consumer, tp, 2) == 2
        # 1 hour, by AlterConfigs (which sets the topic's whole dynamic config): only the fresh one stays
        resource.configs = {'retention.ms': str(HOUR_MS)}
        assert admin.alter_configs([resource], incremental=False) == {'topic': {tp.topic: 'OK'}}
        assert log_start(consumer, tp, 3) == 3
        assert consumer.end_offsets([tp]) == {tp: 4}


def test_retention_bytes_keeps_whole_segments_within_the_limit(bootstrap):
    with one_partition_topic(bootstrap, 'retention-bytes', 1000) as (tp, admin, consumer, resource):
        now = int(time.time() * 1000)
        produce(bootstrap, tp.topic, [now - 4 * 60_000, now - 3 * 60_000, now - 2 * 60_000, now - 60_000])
        # every batch has the size of this one (a producer's batch of one record of these sizes)
        size = len(build_batch([(b'k0', VALUE)]))
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        # 4 segments of `size` bytes over a limit of 2: the two oldest go, exactly down to the limit
        resource.configs = {'retention.bytes': str(2 * size)}
        assert admin.alter_configs([resource], incremental=True) == {'topic': {tp.topic: 'OK'}}
        assert log_start(consumer, tp, 2) == 2
        # a limit of 0: the active segment goes too, the log starts at its end
        resource.configs = {'retention.bytes': '0'}
        assert admin.alter_configs([resource], incremental=True) == {'topic': {tp.topic: 'OK'}}
        assert log_start(consumer, tp, 4) == 4
        assert consumer.end_offsets([tp]) == {tp: 4}


def segment_bases(log: PartitionLog) -> list[int]:
    return [segment.base_offset for segment in log.segments]


def test_segments_roll_at_segment_bytes_and_segment_ms():
    limits = [10_000, 7 * 24 * HOUR_MS]
    log = PartitionLog(segment_limits=lambda: tuple(limits))
    size = len(build_batch([(b'k', b'x' * 3000)]))
    for offset in range(7):
        log.append(*stored(offset, timestamp=1000 + offset, value=b'x' * 3000))
    per_segment = 10_000 // size
    assert segment_bases(log) == list(range(0, 7, per_segment))
    limits[:] = [2**31 - 1, 50]  # segment.ms: measured from the first batch's max timestamp of the segment
    log.append(*stored(7, timestamp=1000 + 6 + 50))  # 50 ms after the active segment's first batch: no roll
    log.append(*stored(8, timestamp=1000 + 6 + 51))
    log.high_watermark = log.log_end_offset
    assert segment_bases(log)[-2:] == [6, 8]
    log.truncate_to(8)  # truncation drops the segments past the new end
    assert segment_bases(log)[-1] == 6
    log.advance_log_start(4)  # DeleteRecords inside a segment keeps it (from its first remaining batch)
    assert segment_bases(log) == [3, 6]
    assert log.retention_start_offset(now_ms=2000, retention_ms=-1, retention_bytes=-1) is None
    assert log.retention_start_offset(now_ms=1000 + 5 + 101, retention_ms=100, retention_bytes=-1) == 6
    assert log.retention_start_offset(now_ms=1000 + 56 + 101, retention_ms=100, retention_bytes=-1) == 8


def stored(offset: int, timestamp: int, value: bytes = b'v') -> tuple[bytes, BatchHeader]:
    batch = build_batch([(b'k', value)], base_offset=offset, timestamps=[timestamp])
    return batch, parse_header(batch)


def test_the_checks_run_every_five_minutes_by_default():
    config = BrokerConfig()
    assert [config.int(name) for name in ('log.retention.check.interval.ms', 'log.initial.task.delay.ms')] == [
        300_000, 300_000]  # Kafka's interval; the first check one interval in, not Kafka's 30 s
