"""Numbers the wire cannot carry are refused where the application passes them, naming the value.

Before, an offset of 2**63 (or a timestamp, partition, epoch out of range) was accepted; the sender thread then
failed encoding it, the future never resolved and later sends to the partition hung.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_kip import (
    KafkaConsumer,
    KafkaProducer,
    OffsetAndMetadata,
    ProducerRecordWithOffset,
    TopicPartition,
)
from kafka_kip.bounds import INT32_MAX, INT64_MAX, require_int
from kafka_kip_reference import ReferenceCluster

TOPIC = 'bounds'
TP = TopicPartition(TOPIC, 0)


@pytest.fixture(scope='module')
def cluster() -> Iterator[ReferenceCluster]:
    with ReferenceCluster(1) as running:
        running.create_topic(TOPIC, partitions=1)
        producer = KafkaProducer(bootstrap_servers=running.bootstrap_servers)
        producer.send(TOPIC, b'first', partition=0).get(timeout=10)
        producer.close()
        yield running


def test_require_int_names_the_value_and_the_range():
    assert require_int(INT64_MAX, 'offset', 0, INT64_MAX) == INT64_MAX
    with pytest.raises(ValueError, match=r'^offset must be in 0\.\.9223372036854775807, got 9223372036854775808$'):
        require_int(2**63, 'offset', 0, INT64_MAX)
    with pytest.raises(TypeError, match=r"^partition must be an int in 0\.\.2147483647, got '0' \(str\)$"):
        require_int('0', 'partition', 0, INT32_MAX)
    with pytest.raises(TypeError, match=r'got True \(bool\)$'):
        require_int(True, 'partition', 0, INT32_MAX)


@pytest.mark.parametrize(('fields', 'error', 'message'), [
    ({'offset': 2**63}, ValueError, 'ProducerRecordWithOffset offset must be in 0..9223372036854775806, got 9223372036854775808'),
    # the log end offset after a record at 2**63-1 would be 2**63, which no answer can carry
    ({'offset': 2**63 - 1}, ValueError,
     'ProducerRecordWithOffset offset must be in 0..9223372036854775806, got 9223372036854775807'),
    ({'offset': -1}, ValueError, 'ProducerRecordWithOffset offset must be in 0..9223372036854775806, got -1'),
    ({'offset': 1.0}, TypeError, 'ProducerRecordWithOffset offset must be an int in 0..9223372036854775806, got 1.0 (float)'),
    ({'partition': 2**31}, ValueError, 'ProducerRecordWithOffset partition must be in 0..2147483647, got 2147483648'),
    ({'timestamp_ms': 2**63}, ValueError,
     'ProducerRecordWithOffset timestamp_ms must be in 0..9223372036854775807, got 9223372036854775808'),
    ({'timestamp_ms': -5}, ValueError, 'ProducerRecordWithOffset timestamp_ms must be in 0..9223372036854775807, got -5'),
])
def test_records_with_offsets_out_of_range_are_refused_and_the_partition_stays_usable(cluster, fields, error,
                                                                                       message):
    record = {'topic': TOPIC, 'partition': 0, 'value': b'v', 'offset': 0, **fields}
    with pytest.raises(error) as raised:
        ProducerRecordWithOffset(**record)
    assert str(raised.value) == message
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        with pytest.raises(error, match=message.replace('(', r'\(').replace(')', r'\)').replace('.', r'\.')):
            producer.send(TOPIC, b'v', partition=record['partition'], timestamp_ms=record.get('timestamp_ms'),
                          offset=record['offset'])
        assert not producer._accumulator.has_incomplete
        end = cluster.log_end_offset(TP)
        assert producer.send(ProducerRecordWithOffset(TOPIC, 0, value=b'next', offset=end)).get(timeout=10).offset == end
    finally:
        producer.close()


@pytest.mark.parametrize(('kwargs', 'error', 'message'), [
    ({'partition': 2**31}, ValueError, 'partition must be in 0..2147483647, got 2147483648'),
    ({'partition': '0'}, TypeError, "partition must be an int in 0..2147483647, got '0' (str)"),
    ({'partition': 0, 'timestamp_ms': 2**63}, ValueError,
     'timestamp_ms must be in -9223372036854775808..9223372036854775807, got 9223372036854775808'),
])
def test_plain_records_the_wire_cannot_carry_are_refused(cluster, kwargs, error, message):
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        with pytest.raises(error) as raised:
            producer.send(TOPIC, b'v', **kwargs)
        assert str(raised.value) == message
        assert not producer._accumulator.has_incomplete
        assert producer.send(TOPIC, b'after', partition=0).get(timeout=10).partition == 0
    finally:
        producer.close()


@pytest.mark.parametrize(('call', 'error', 'message'), [
    (lambda c: c.seek(TP, 2**63), ValueError, 'seek offset must be in 0..9223372036854775807, got 9223372036854775808'),
    (lambda c: c.seek(TP, 1, leader_epoch=2**31), ValueError,
     'seek leader_epoch must be in -1..2147483647, got 2147483648'),
    (lambda c: c.seek(TP, OffsetAndMetadata(2**63, '', 1)), ValueError,
     'seek offset must be in 0..9223372036854775807, got 9223372036854775808'),
    (lambda c: c.seek(TP, OffsetAndMetadata(1, '', 2**31)), ValueError,
     'seek leader_epoch must be in -1..2147483647, got 2147483648'),
    (lambda c: c.offsets_for_times({TP: 2**63}), ValueError,
     f'timestamp for {TP} must be in 0..9223372036854775807, got 9223372036854775808'),
    (lambda c: c.offsets_for_times({TP: 'soon'}), ValueError,
     f"timestamp for {TP} must be a number of milliseconds in 0..9223372036854775807, got 'soon'"),
    (lambda c: c.assign([TopicPartition(TOPIC, 2**31)]), ValueError,
     "partition of 'bounds' must be in 0..2147483647, got 2147483648"),
    (lambda c: c.commit({TP: OffsetAndMetadata(2**63, '', -1)}), ValueError,
     f'committed offset of {TP} must be in 0..9223372036854775807, got 9223372036854775808'),
    (lambda c: c.commit({TP: OffsetAndMetadata(5, '', -1, partition_epoch=2**31)}), ValueError,
     f'committed partition_epoch of {TP} must be in -1..2147483647, got 2147483648'),
    (lambda c: c.commit_async({TP: OffsetAndMetadata(5, '', 2**31)}), ValueError,
     f'committed leader_epoch of {TP} must be in -1..2147483647, got 2147483648'),
])
def test_consumer_numbers_the_wire_cannot_carry_are_refused_and_nothing_changes(cluster, call, error, message):
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id='bounds', enable_auto_commit=False)
    try:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        with pytest.raises(error) as raised:
            call(consumer)
        assert str(raised.value) == message
        assert (consumer.assignment(), consumer.position(TP)) == ({TP}, 0)
        assert consumer.offsets_for_times({TP: 0.0})[TP].offset == 0   # kafka-python takes int(timestamp)
    finally:
        consumer.close()
