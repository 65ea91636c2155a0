"""KIP-391 on a stock broker (a reference cluster without 'kip.391'): refusal by default, checked mode."""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import kafka
import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.api_key import ApiKey

from kafka_kip import KafkaProducer, ProducerRecordWithOffset, TopicPartition
from kafka_kip.errors import InvalidProduceOffsetError, UnsupportedFeatureError
from kafka_kip.protocol.constants import LEADER_NOT_AVAILABLE
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference import Answer, ControlledRequest, ReferenceCluster
from tests.support.consuming import read_to_end

pytestmark = pytest.mark.kip391


@pytest.fixture(scope='module')
def broker() -> Iterator[ReferenceCluster]:
    """A stock broker: it advertises no extension and ignores the use_offset tag."""
    with ReferenceCluster(1, features=()) as running:
        yield running


@pytest.fixture
def tp(broker) -> TopicPartition:
    name = f'kip391-stock-{uuid.uuid4().hex[:8]}'
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(name, 2, 1)])
    finally:
        admin.close()
    return TopicPartition(name, 0)


def _producer(broker, **configs) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=configs.pop('linger_ms', 5000),
                         **configs)


def _send_all(producer: KafkaProducer, tp: TopicPartition, offsets, tag: str = 'a') -> list:
    futures = [producer.send(ProducerRecordWithOffset(tp.topic, tp.partition, value=f'{tag}-{o}'.encode(),
                                                      offset=o)) for o in offsets]
    producer.flush(timeout=20)
    return futures


def _log(broker, tp: TopicPartition) -> tuple[int, list[tuple[int, bytes]]]:
    """(high watermark, [(offset, value), ...]) read back with a stock consumer."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        seen = [(r.offset, r.value) for r in read_to_end(consumer, [tp])]
        return consumer.highwater(tp), seen
    finally:
        consumer.close()


def _outcomes(futures) -> list:
    assert all(future.is_done for future in futures)
    return [future.exception if future.failed() else future.value for future in futures]


def test_default_mode_fails_with_unsupported_feature_and_writes_nothing(broker, tp):
    producer = _producer(broker)
    try:
        refused = _send_all(producer, tp, [0, 1, 2])
        plain = producer.send(tp.topic, b'plain', partition=1)  # plain records still work in the same producer
        producer.flush(timeout=20)
        errors = _outcomes(refused)
        plain_offset = plain.get(timeout=10).offset
    finally:
        producer.close()

    assert {type(e) for e in errors} == {UnsupportedFeatureError}
    assert {e.feature for e in errors} == {'kip.391'}
    assert _log(broker, tp) == (0, [])
    assert plain_offset == 0


def test_checked_mode_writes_0_to_999_at_0_to_999_and_refuses_a_gap(broker, tp):
    producer = _producer(broker, offset_mode='checked')
    try:
        written = _outcomes(_send_all(producer, tp, range(1000)))
        gap = _outcomes(_send_all(producer, tp, [1005]))[0]
        log_after_gap = _log(broker, tp)
        resumed = _outcomes(_send_all(producer, tp, [1000]))[0]
    finally:
        producer.close()

    assert [m.offset for m in written] == list(range(1000))
    assert log_after_gap == (1000, [(o, f'a-{o}'.encode()) for o in range(1000)])
    assert type(gap) is InvalidProduceOffsetError
    assert gap.log_end_offset == 1000
    assert 'cannot leave a gap' in str(gap)
    assert resumed.offset == 1000


def test_checked_mode_after_restart_fails_written_offsets_and_writes_the_rest(broker, tp):
    first = _producer(broker, offset_mode='checked')
    try:
        assert [m.offset for m in _outcomes(_send_all(first, tp, range(50), tag='first'))] == list(range(50))
    finally:
        first.close()

    # A fresh producer learns the log end from the broker: 50, although the last batch began at 0.
    second = _producer(broker, offset_mode='checked')
    try:
        outcomes = _outcomes(_send_all(second, tp, range(40, 60), tag='second'))
    finally:
        second.close()

    assert [(type(e), e.log_end_offset) for e in outcomes[:10]] == [(InvalidProduceOffsetError, 50)] * 10
    assert [m.offset for m in outcomes[10:]] == list(range(50, 60))
    assert _log(broker, tp) == (60, [(o, f'first-{o}'.encode()) for o in range(50)]
                                + [(o, f'second-{o}'.encode()) for o in range(50, 60)])


def test_checked_mode_detects_another_writer_but_cannot_undo_its_effect(broker, tp):
    producer = _producer(broker, offset_mode='checked')
    intruder = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        _send_all(producer, tp, range(10))
        intruder.send(tp.topic, b'intruder', partition=tp.partition).get(timeout=10)
        misplaced = _outcomes(_send_all(producer, tp, [10]))[0]
        next_write = _outcomes(_send_all(producer, tp, [12]))[0]
    finally:
        producer.close()
        intruder.close()

    assert type(misplaced) is InvalidProduceOffsetError
    assert misplaced.log_end_offset == 12
    assert 'requested at offsets 10-10' in str(misplaced) and 'at 11-11' in str(misplaced)
    assert next_write.offset == 12
    assert _log(broker, tp)[1][10:] == [(10, b'intruder'), (11, b'a-10'), (12, b'a-12')]


def test_checked_mode_backs_off_after_a_failed_log_end_lookup(broker, tp):
    seen: list[tuple[ApiKey, float]] = []  # the log end lookups and metadata refreshes, with their times

    def record(request: ControlledRequest) -> None:
        seen.append((ApiKey(request.api_key), time.monotonic()))

    def fail_the_lookup(request: ControlledRequest) -> Answer:
        record(request)
        topic_class = RESPONSES[ApiKey.ListOffsets].ListOffsetsTopicResponse
        return Answer(request.response(topics=[topic_class(name=tp.topic, partitions=[
            topic_class.ListOffsetsPartitionResponse(partition_index=tp.partition, error_code=LEADER_NOT_AVAILABLE,
                                                     timestamp=-1, offset=-1, leader_epoch=-1)])]))

    producer = _producer(broker, offset_mode='checked', retry_backoff_ms=300, linger_ms=0)
    try:
        producer.partitions_for(tp.topic)  # metadata first: what follows is the lookup, a refresh, the retry
        observers = [broker.control(ApiKey.ListOffsets, record, keep=True),
                     broker.control(ApiKey.Metadata, record, keep=True)]
        failure = broker.control(ApiKey.ListOffsets, fail_the_lookup)
        written = producer.send(ProducerRecordWithOffset(tp.topic, tp.partition, value=b'v', offset=0)).get(10)
    finally:
        producer.close()
        for observer in observers:
            observer.remove()

    # the observer passes the first lookup on to the failing control, which answers it; then the metadata
    # refresh and the retried lookup, both due when the backoff ends, in whichever order the sender runs them
    keys = [key for key, _ in seen]
    assert keys[:2] == [ApiKey.ListOffsets, ApiKey.ListOffsets]
    assert sorted(keys[2:]) == [ApiKey.ListOffsets, ApiKey.Metadata]
    assert (failure.fired, written.offset) == (1, 0)
    retried_at = next(at for key, at in seen[2:] if key is ApiKey.ListOffsets)
    assert retried_at - seen[1][1] >= 0.3  # not looked up again before retry_backoff_ms
    assert _log(broker, tp) == (1, [(0, b'v')])
