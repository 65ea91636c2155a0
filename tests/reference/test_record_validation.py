"""Record validation on every produce path, as Apache Kafka's LogValidator: hostile batches get Kafka's answer.

Each case of :data:`kafka_kip_reference.fixtures.hostile_batches.CASES` (the error codes measured on Apache Kafka 4.4) is
produced over a real socket: the answer carries Kafka's error code, a refused batch leaves the log exactly as it
was, the connection stays usable and another client is served; against a broker process, its peak RSS stays
where ordinary produces left it. The same rules hold for idempotent, transactional
and ``use_offset`` batches, and with both record walkers (compiled and pure Python).
"""
from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer, TopicPartition
from kafka.protocol.api_key import ApiKey

from kafka_kip._codec import record_walk
from kafka_kip.protocol.constants import (
    INVALID_RECORD,
    INVALID_TIMESTAMP,
    MESSAGE_TOO_LARGE,
    NONE,
    UNKNOWN_SERVER_ERROR,
)
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import list_offsets_request, metadata_request, produce_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker import record_validation
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.record_validation import ValidationRules, validate_batch
from kafka_kip_reference.fixtures.hostile_batches import (
    CASES,
    COMPACTED,
    PLAIN,
    TOPIC_CONFIGS,
    raw_batch,
    record,
)
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.broker_process import BrokerProcess

WALKERS = {'compiled': record_walk.RecordWalk, 'python': record_walk.PyRecordWalk}
BUILT_WALKERS = [name for name, walker in WALKERS.items() if name == 'python' or walker is not record_walk.PyRecordWalk]


def topic(kind: str) -> str:
    return f'topic-{kind}'


@pytest.fixture(scope='module')
def cluster():
    with ReferenceCluster(brokers=1, broker_config={'reference.max.uncompressed.batch.bytes': 1 << 20}) as running:
        for kind, configs in TOPIC_CONFIGS.items():
            running.create_topic(topic(kind), 1, 1, configs=configs)
        yield running


@pytest.fixture(params=BUILT_WALKERS)
def walker(request, monkeypatch):
    monkeypatch.setattr(record_validation, 'RecordWalk', WALKERS[request.param])
    return request.param


def now_ms() -> int:
    return int(time.time() * 1000)


def answer_of(response):
    return response.responses[0].partition_responses[0]


def log_state(cluster, tp: TopicPartition):
    return cluster.log_end_offset(tp), cluster.records(tp)


@pytest.mark.parametrize('case', CASES, ids=[case.name for case in CASES])
def test_each_hostile_batch_gets_kafkas_answer_and_the_log_is_unchanged(cluster, walker, case):
    # a topic per case: some batches Kafka stores (a gzip member followed by garbage) kafka-python cannot decode
    tp = TopicPartition(f'case-{CASES.index(case)}-{walker}', 0)
    cluster.create_topic(tp.topic, 1, 1, configs=TOPIC_CONFIGS[case.topic_kind])
    before = log_state(cluster, tp)
    with WireClient(cluster.brokers()[0]) as hostile, WireClient(cluster.brokers()[0]) as other:
        answer = answer_of(hostile.request(produce_request(tp.topic, 0, case.payload(now_ms()), acks=1)))
        assert (answer.error_code, len(answer.record_errors)) == (case.expected_error, case.record_errors)
        if case.expected_error:
            assert answer.error_message  # says what is wrong (Kafka often sends none)
            assert (answer.base_offset, log_state(cluster, tp)) == (-1, before)
        else:
            assert cluster.log_end_offset(tp) > before[0] == 0
        # the hostile connection stays open and usable, another one is served
        assert answer_of(hostile.request(produce_request(tp.topic, 0, build_batch([(b'k', b'ok')]), acks=1))
                         ).error_code == NONE
        assert other.request(metadata_request([tp.topic])).topics[0].error_code == NONE
    assert cluster.internal_errors == []


def test_a_broker_process_answers_every_hostile_batch_in_bounded_memory_while_serving_others():
    """Every case against ``kafka-kip broker`` in a child process, while another client's produce is in flight:
    Kafka's error code, the log unchanged by a refused batch, the broker's peak RSS as ordinary produces left it."""
    with BrokerProcess(reference_max_uncompressed_batch_bytes=1 << 20) as broker:
        with WireClient(broker.address) as admin:
            create = REQUESTS[ApiKey.CreateTopics]
            answer = admin.request(create(version=5, timeout_ms=10_000, validate_only=False, topics=[
                create.CreatableTopic(name=topic(kind), num_partitions=1, replication_factor=1, assignments=[],
                                      configs=[create.CreatableTopic.CreatableTopicConfig(name=key, value=value)
                                               for key, value in configs.items()])
                for kind, configs in TOPIC_CONFIGS.items()]))
            assert [t.error_code for t in answer.topics] == [NONE] * len(TOPIC_CONFIGS)
            for kind in TOPIC_CONFIGS:  # warm up: the memory ordinary produces take
                assert answer_of(admin.request(produce_request(topic(kind), 0, build_batch(
                    [(b'k', b'v' * 100)] * 100, compression=1), acks=1))).error_code == NONE
        baseline = broker.peak_rss_mib()
        answers = []
        with WireClient(broker.address) as hostile, WireClient(broker.address) as other:
            for case in CASES:
                name = topic(case.topic_kind)
                end = other.request(list_offsets_request(name, 0, -1)).topics[0].partitions[0].offset
                hostile.send(ApiKey.Produce, 9, produce_request(name, 0, case.payload(now_ms()), acks=1).encode(version=9))
                served = answer_of(other.request(produce_request(name, 0, build_batch([(b'k', b'meanwhile')]),
                                                                 acks=1)))
                answer = answer_of(hostile.read_response(0, 9))
                grown = other.request(list_offsets_request(name, 0, -1)).topics[0].partitions[0].offset - end
                answers.append((case.name, answer.error_code, served.error_code,
                                grown == 1 if case.expected_error else grown > 1))
        assert answers == [(case.name, case.expected_error, NONE, True) for case in CASES]
        assert broker.peak_rss_mib() - baseline < 16  # MiB


def test_a_refused_acks_0_batch_closes_the_connection_and_a_good_one_does_not(cluster):
    """acks=0 gets no answer: Kafka closes the connection on a refusal so that the producer notices."""
    tp = TopicPartition(topic(PLAIN), 0)
    refused = next(case for case in CASES if case.expected_error == INVALID_RECORD and case.topic_kind == PLAIN)
    before = log_state(cluster, tp)
    with WireClient(cluster.brokers()[0]) as wire:
        wire.send(ApiKey.Produce, 9, produce_request(tp.topic, 0, refused.payload(now_ms()), acks=0).encode(version=9))
        with pytest.raises(ConnectionError):
            wire.read_frame()
    assert log_state(cluster, tp) == before
    with WireClient(cluster.brokers()[0]) as wire:
        wire.send(ApiKey.Produce, 9, produce_request(tp.topic, 0, build_batch([(b'k', b'fine')]), acks=0).encode(version=9))
        assert answer_of(wire.request(produce_request(tp.topic, 0, build_batch([(b'k', b'acked')]), acks=1))
                         ).error_code == NONE
    assert [r.value for r in cluster.records(tp)][-2:] == [b'fine', b'acked']


def test_record_errors_name_each_refused_record_as_kafka_does(cluster):
    tp = TopicPartition(topic(PLAIN), 0)
    now = now_ms()
    ahead = raw_batch([record(0, b'a'), record(1, b'b', timestamp_delta=-7_200_000)], base_timestamp=now + 7_200_000)
    with WireClient(cluster.brokers()[0]) as wire:
        answer = answer_of(wire.request(produce_request(tp.topic, 0, ahead, acks=1)))
    assert (answer.error_code, answer.error_message) == (
        INVALID_TIMESTAMP, 'One or more records have been rejected due to invalid timestamp')
    [(index, message)] = [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors]
    assert index == 0  # the second record is stamped now: within the window
    assert message.startswith(f'Timestamp {now + 7_200_000} of message with offset 0 is out of range. The '
                              'timestamp should be within [')
    keyless = raw_batch([record(0, b'a', key=b'k'), record(1, b'b')], base_timestamp=now)
    with WireClient(cluster.brokers()[0]) as wire:
        answer = answer_of(wire.request(produce_request(topic(COMPACTED), 0, keyless, acks=1)))
    assert answer.error_code == INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
        (1, f'Compacted topic cannot accept message without key in topic partition {topic(COMPACTED)}-0')]


def test_the_timestamp_window_is_the_topics(cluster):
    cluster.create_topic('strict-times', 1, 1, configs={'message.timestamp.before.max.ms': '60000',
                                                         'message.timestamp.after.max.ms': '0'})
    now = now_ms()

    def produce(base_timestamp: int) -> int:
        batch = raw_batch([record(0)], base_timestamp=base_timestamp)
        with WireClient(cluster.brokers()[0]) as wire:
            return answer_of(wire.request(produce_request('strict-times', 0, batch, acks=1))).error_code

    assert produce(now - 3_600_000) == INVALID_TIMESTAMP  # an hour old: more than 60 s before the broker's clock
    assert produce(now + 60_000) == INVALID_TIMESTAMP     # a minute ahead: after.max.ms is 0
    assert produce(now - 1_000) == NONE
    assert produce(-1) == NONE                            # NO_TIMESTAMP is never checked


def test_idempotent_transactional_and_offset_batches_are_validated_too(cluster):
    tp = TopicPartition(topic(PLAIN), 0)
    before = log_state(cluster, tp)
    now = now_ms()
    idempotent = raw_batch([record(0), record(1)], count=3, producer=(4000, 0, 0), base_timestamp=now)
    transactional = raw_batch([record(0), record(2)], compression=1, attributes=0x11, producer=(4001, 0, 0),
                              base_timestamp=now)
    with_offsets = raw_batch([record(0), record(1, length=b'\x09')], base_offset=before[0] + 5, base_timestamp=now)
    with WireClient(cluster.brokers()[0]) as wire:
        first = answer_of(wire.request(produce_request(tp.topic, 0, idempotent, acks=-1)))
        second = answer_of(wire.request(produce_request(tp.topic, 0, transactional, acks=-1,
                                                        transactional_id='tx-validated')))
        third = answer_of(wire.request(produce_request(tp.topic, 0, with_offsets, acks=-1, use_offset=True)))
    assert (first.error_code, first.error_message) == (INVALID_RECORD, 'the batch ends after 2 of its 3 records')
    assert (second.error_code, second.error_message) == (
        UNKNOWN_SERVER_ERROR, 'record offsets within the batch are not consecutive: record 1 has offset delta 2')
    assert (third.error_code, third.error_message) == (INVALID_RECORD, 'record 1 has a negative length')
    assert log_state(cluster, tp) == before


@pytest.mark.parametrize('compression', [1, 2, 3, 4], ids=['gzip', 'snappy', 'lz4', 'zstd'])
def test_a_large_compressed_batch_is_walked_in_pieces(walker, compression, monkeypatch):
    monkeypatch.setattr(record_validation, 'PIECE_BYTES', 4096)
    values = [(f'k{i}'.encode(), bytes([i % 251]) * (i % 700)) for i in range(3000)]
    batch = build_batch(values, compression=compression, timestamps=[now_ms()] * 3000)
    rules = ValidationRules(partition='t-0', max_message_bytes=1 << 22, max_uncompressed_bytes=1 << 22,
                            now_ms=now_ms())
    validated = validate_batch(batch, rules)
    assert (validated.header.records_count, validated.records) == (3000, batch)
    small = ValidationRules(partition='t-0', max_message_bytes=1 << 22, max_uncompressed_bytes=100_000,
                            now_ms=now_ms())
    with pytest.raises(record_validation.InvalidBatch) as refused:
        validate_batch(batch, small)
    assert refused.value.error_code == MESSAGE_TOO_LARGE
    assert str(refused.value) == (f'the {["gzip", "snappy", "lz4", "zstd"][compression - 1]} records inflate to '
                                  'more than 100000 bytes, the most this broker decompresses of one batch')


def test_other_connections_are_served_while_a_large_batch_waits_its_turn(cluster, monkeypatch):
    """A compressed batch of more than one piece yields to other connections between pieces and holds the
    cluster's large-batch lock; with the lock taken by the test, the batch waits while others are served."""
    monkeypatch.setattr(record_validation, 'PIECE_BYTES', 4096)
    tp = TopicPartition(topic(PLAIN), 0)
    lock = cluster.state.large_batch_lock
    asyncio.run_coroutine_threadsafe(lock.acquire(), cluster._loop).result()
    large = build_batch([(None, b'x' * 500)] * 400, compression=1, timestamps=[now_ms()] * 400)
    end = cluster.log_end_offset(tp)
    with WireClient(cluster.brokers()[0]) as waiting, WireClient(cluster.brokers()[0]) as other:
        try:
            waiting.send(ApiKey.Produce, 9, produce_request(tp.topic, 0, large, acks=1).encode(version=9))
            small = answer_of(other.request(produce_request(tp.topic, 0, build_batch([(None, b'small')]), acks=1)))
            assert (small.error_code, small.base_offset) == (NONE, end)
            assert other.request(metadata_request([tp.topic])).topics[0].error_code == NONE
        finally:
            cluster._loop.call_soon_threadsafe(lock.release)
        answer = answer_of(waiting.read_response(0, 9))
    assert (answer.error_code, answer.base_offset) == (NONE, end + 1)
    assert cluster.log_end_offset(tp) == end + 401


def test_without_replicator_principals_every_client_may_produce_with_offsets(cluster):
    """No authorizer, no replicator_principals: as Kafka without an authorizer, every operation is allowed."""
    tp = TopicPartition(topic(PLAIN), 0)
    end = cluster.log_end_offset(tp)
    batch = raw_batch([record(0)], base_offset=end + 10, base_timestamp=now_ms())
    with WireClient(cluster.brokers()[0]) as wire:
        answer = answer_of(wire.request(produce_request(tp.topic, 0, batch, use_offset=True)))
    assert (answer.error_code, answer.base_offset) == (NONE, end + 10)


@pytest.mark.parametrize('compression', [0, 1, 2, 3, 4], ids=['none', 'gzip', 'snappy', 'lz4', 'zstd'])
def test_kafka_python_batches_of_every_codec_are_taken(cluster, compression):
    name = ['none', 'gzip', 'snappy', 'lz4', 'zstd'][compression]
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, compression_type=None if not compression
                             else name, linger_ms=50, acks=1)
    try:
        futures = [producer.send(topic(PLAIN), key=b'k', value=b'%d' % i, partition=0) for i in range(500)]
        producer.flush()
        offsets = [f.get(timeout=10).offset for f in futures]
    finally:
        producer.close()
    assert offsets == list(range(offsets[0], offsets[0] + 500))


def _walk(walker_class, data: bytes, count: int, piece: int | None):
    """What a walker makes of ``data``: its final state, or the error (index and message)."""
    walk = walker_class(count)
    try:
        if piece is None:
            walk.feed(data, 0, True)
        else:
            buffer = bytearray()
            for start in range(0, len(data), piece):
                buffer += data[start:start + piece]
                del buffer[:walk.feed(buffer, 0, False)]
            walk.feed(buffer, 0, True)
    except record_walk.MalformedRecords as exc:
        return 'error', exc.index, str(exc)
    return ('ok', walk.walked, walk.gap_index, walk.gap_delta, walk.min_timestamp_delta, walk.max_timestamp_delta,
            walk.null_keys, walk.first_null_key)


_VALID = b''.join([record(0, b'a', key=b'k'), record(1, b'', timestamp_delta=-300), record(2, b'v' * 200, key=b''),
                   record(3, b'x', timestamp_delta=10**12), record(4, b'y', header_count=0)])


@pytest.mark.skipif('compiled' not in BUILT_WALKERS, reason='the compiled record walker is not built')
@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), max_size=4),
       st.integers(0, len(_VALID)), st.integers(0, 7), st.sampled_from([None, 1, 3, 64]))
def test_the_compiled_walker_reads_any_bytes_as_the_python_walker_does(flips, cut, count, piece):
    data = bytearray(_VALID)
    for position, value in flips:
        data[position] = value
    data = bytes(data[:cut])
    assert _walk(WALKERS['compiled'], data, count, piece) == _walk(WALKERS['python'], data, count, piece)
