"""KIP-391 produce-with-offsets against the reference cluster (a broker that advertises 'kip.391')."""
from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator

import kafka
import pytest
from kafka.errors import ClusterAuthorizationFailedError, UnknownTopicOrPartitionError

from kafka_kip import KafkaProducer, ProducerRecordWithOffset, TopicPartition
from kafka_kip.errors import InvalidProduceOffsetError
from kafka_kip.producer import RecordMetadata
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.support.consuming import poll_records, read_to_end
from tests.support.record_batches import batch_kind

pytestmark = pytest.mark.kip391

# Sparse offsets from the issue: two runs of ten, a gap of one, a lone record.
SPARSE = list(range(10)) + list(range(20, 30)) + [31, 32, 40]


@pytest.fixture(scope='module')
def cluster() -> Iterator[ReferenceCluster]:
    # Topics are created explicitly and a missing one must stay missing: kafka-python 3.0.12's clients ask for
    # auto-creation whatever allow_auto_create_topics says, so the broker's auto-creation is off.
    with ReferenceCluster(1, broker_config={'auto.create.topics.enable': 'false'}) as running:
        yield running


@pytest.fixture
def tp(cluster: ReferenceCluster) -> TopicPartition:
    name = f'kip391-{uuid.uuid4().hex[:8]}'
    cluster.create_topic(name, partitions=2)
    return TopicPartition(name, 0)


def _producer(cluster: ReferenceCluster, **configs) -> KafkaProducer:
    # linger + flush(): everything sent before flush() is batched deterministically
    return KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=configs.pop('linger_ms', 5000),
                         **configs)


def _value(offset: int, tag: str = 'a') -> bytes:
    return f'{tag}-{offset}'.encode()


def _send_all(producer: KafkaProducer, tp: TopicPartition, offsets: list[int], tag: str = 'a') -> list:
    futures = [producer.send(ProducerRecordWithOffset(tp.topic, tp.partition, key=b'k', value=_value(o, tag),
                                                      offset=o)) for o in offsets]
    producer.flush(timeout=10)
    return futures


def _consume(cluster: ReferenceCluster, tp: TopicPartition, count: int) -> list[tuple[int, bytes]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        return [(r.offset, r.value) for r in poll_records(consumer, count, 10, tp)]
    finally:
        consumer.close()


def _send_one(producer: KafkaProducer, *args, **kwargs) -> RecordMetadata:
    future = producer.send(*args, **kwargs)
    producer.flush(timeout=10)
    return future.get(timeout=10)


def _error(future) -> BaseException:
    with pytest.raises(Exception) as caught:
        future.get(timeout=10)
    return caught.value


@pytest.mark.parametrize('configs', [{}, {'enable_idempotence': False, 'acks': 1}],
                         ids=['idempotent-acks-all', 'acks-1'])
def test_sparse_offsets_land_exactly_and_consume_back_in_order(cluster, tp, configs):
    producer = _producer(cluster, **configs)
    try:
        futures = _send_all(producer, tp, SPARSE)
        metadata = [future.get(timeout=10) for future in futures]
    finally:
        producer.close()

    assert [m.offset for m in metadata] == SPARSE
    assert all(isinstance(m, RecordMetadata) for m in metadata)
    # one batch per consecutive run; each reports the log end right after it
    assert [m.log_end_offset for m in metadata] == [10] * 10 + [30] * 10 + [33, 33, 41]
    assert [(r.offset, r.key, r.value) for r in cluster.records(tp)] == [(o, b'k', _value(o)) for o in SPARSE]
    assert _consume(cluster, tp, len(SPARSE)) == [(o, _value(o)) for o in SPARSE]


def test_acks_0_writes_at_the_offsets_without_acknowledgement(cluster, tp):
    producer = _producer(cluster, acks=0, enable_idempotence=False)
    try:
        metadata = [future.get(timeout=10) for future in _send_all(producer, tp, [0, 1, 2, 10])]
    finally:
        producer.close()  # waits for the request to be written to the socket
    wait_until(lambda: len(cluster.records(tp)) >= 4, 'the 4 records in the log')
    assert [(m.offset, m.log_end_offset) for m in metadata] == [(-1, -1)] * 4
    assert [r.offset for r in cluster.records(tp)] == [0, 1, 2, 10]


def test_offset_below_log_end_fails_with_log_end_offset_and_log_unchanged(cluster, tp):
    producer = _producer(cluster)
    try:
        _send_all(producer, tp, SPARSE)
        before = cluster.records(tp)
        late = producer.send(tp.topic, b'late', partition=tp.partition, offset=5)
        refused_batch = _send_all(producer, tp, [10, 11, 12, 13], tag='again')  # one batch, all below 41
        producer.flush(timeout=10)
        error = _error(late)
        batch_errors = [_error(future) for future in refused_batch]
        after_refusals = cluster.records(tp)
        still_usable = _send_one(producer, tp.topic, b'next', partition=tp.partition, offset=41)
    finally:
        producer.close()

    assert type(error) is InvalidProduceOffsetError
    assert error.log_end_offset == 41
    assert [(type(e), e.log_end_offset) for e in batch_errors] == [(InvalidProduceOffsetError, 41)] * 4
    assert after_refusals == before
    assert (still_usable.offset, still_usable.log_end_offset) == (41, 42)
    assert [r.offset for r in cluster.records(tp)] == SPARSE + [41]


def test_restarted_producer_fails_rewritten_offsets_and_writes_the_rest_once(cluster, tp):
    first = _producer(cluster)
    try:
        assert [f.get(timeout=10).offset for f in _send_all(first, tp, list(range(60)), tag='first')] == list(
            range(60))
    finally:
        first.close()

    # The restarted producer resumes from an older position: 40..99 forms one batch that straddles the log end.
    second = _producer(cluster)
    try:
        futures = _send_all(second, tp, list(range(40, 100)), tag='second')
        outcomes = [future.exception if future.failed() else future.value for future in futures]
    finally:
        second.close()

    refused, written = outcomes[:20], outcomes[20:]
    assert [(type(e), e.log_end_offset) for e in refused] == [(InvalidProduceOffsetError, 60)] * 20
    assert [m.offset for m in written] == list(range(60, 100))
    assert {m.log_end_offset for m in written} == {100}
    records = cluster.records(tp)
    assert [r.offset for r in records] == list(range(100))  # no duplicate, no gap
    assert [r.value for r in records] == [_value(o, 'first') for o in range(60)] + [
        _value(o, 'second') for o in range(60, 100)]


def test_batch_too_large_for_the_broker_is_split_and_keeps_its_offsets(cluster):
    cluster.create_topic('kip391-small-batches', partitions=1, configs={'max.message.bytes': '500'})
    tp = TopicPartition('kip391-small-batches', 0)
    # No flush(): kafka-python's flush() raises UnknownError when it meets a batch being split.
    producer = _producer(cluster, linger_ms=300)
    try:
        futures = [producer.send(tp.topic, _value(o), partition=0, offset=o) for o in range(100, 200)]
        metadata = [future.get(timeout=10) for future in futures]  # one 1.6 kB batch, split down to <= 500 bytes
    finally:
        producer.close()

    assert [m.offset for m in metadata] == list(range(100, 200))
    assert sorted({m.log_end_offset for m in metadata}) == [125, 150, 175, 200]
    assert [(r.offset, r.value) for r in cluster.records(tp)] == [(o, _value(o)) for o in range(100, 200)]


def test_plain_and_offset_records_share_a_producer_but_never_a_batch_or_request(cluster, tp):
    other = TopicPartition(tp.topic, 1)
    producer = _producer(cluster, linger_ms=0)
    requests = []
    build = producer._sender._produce_request

    def spy(node_id, acks, timeout, batches):
        request = build(node_id, acks, timeout, batches)
        requests.append((getattr(request, 'use_offset', False), frozenset(batch_kind(b) for b in batches)))
        return request

    producer._sender._produce_request = spy
    try:
        sends = []
        for round_ in range(3):
            for offset in range(round_ * 10, round_ * 10 + 5):
                sends.append(producer.send(tp.topic, _value(offset), partition=0, offset=offset))
                sends.append(producer.send(other.topic, b'plain-1', partition=1))
            sends.append(producer.send(tp.topic, b'plain-0', partition=0))
        producer.flush(timeout=10)
        metadata = [future.get(timeout=10) for future in sends]
    finally:
        producer.close()

    # partition 0: offset records where asked, each plain record at the log end after the run before it
    assert [r.offset for r in cluster.records(tp)] == [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15,
                                                       20, 21, 22, 23, 24, 25]
    assert [r.value for r in cluster.records(tp)][5] == b'plain-0'
    assert [r.offset for r in cluster.records(other)] == list(range(15))
    assert sorted(m.offset for m in metadata if m.partition == 1) == list(range(15))
    assert {kinds for use_offset, kinds in requests if use_offset} == {frozenset({'OffsetProducerBatch'})}
    assert {kinds for use_offset, kinds in requests if not use_offset} == {
        frozenset({'ProducerBatch'})}


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    """Make the interpreter switch threads every microsecond, so threads interleave at almost any line."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_threads_sending_offset_and_plain_records_never_share_a_request(cluster, tiny_switch_interval):
    # One application thread sends records with offsets to partition 0, another plain records to partitions
    # 1-3 of the same leader, each in chunks of 10 that it waits for: queues keep running empty, so the
    # sender keeps choosing what to drain while a thread starts a new batch.
    rounds, per_thread, chunk = 2, 5000, 10
    for round_ in range(rounds):
        name = f'kip391-threads-{round_}-{uuid.uuid4().hex[:8]}'
        cluster.create_topic(name, partitions=4)
        with_offsets = TopicPartition(name, 0)
        producer = _producer(cluster, linger_ms=0)
        requests = []
        build = producer._sender._produce_request

        def spy(node_id, acks, timeout, batches, build=build, requests=requests):
            request = build(node_id, acks, timeout, batches)
            requests.append((getattr(request, 'use_offset', False), frozenset(batch_kind(b) for b in batches)))
            return request

        producer._sender._produce_request = spy
        futures: dict[str, list] = {'offsets': [], 'plain': []}
        failures: list[BaseException] = []
        start = threading.Barrier(2)

        def send(kind, send_one, futures=futures, failures=failures, start=start):
            start.wait()
            try:
                for first in range(0, per_thread, chunk):
                    futures[kind] += [send_one(i) for i in range(first, first + chunk)]
                    futures[kind][-1].get(timeout=30)
            except BaseException as exc:  # surfaced below, in the test's thread
                failures.append(exc)

        def send_with_offset(offset, producer=producer, tp=with_offsets):
            return producer.send(ProducerRecordWithOffset(tp.topic, tp.partition, value=_value(offset), offset=offset))

        def send_plain(i, producer=producer, topic=name):
            return producer.send(topic, b'plain-%d' % i, partition=1 + i % 3)

        threads = [threading.Thread(target=send, args=('offsets', send_with_offset), daemon=True),
                   threading.Thread(target=send, args=('plain', send_plain), daemon=True)]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            producer.flush(timeout=30)
        finally:
            producer.close()

        assert failures == [], f'round {round_}'
        assert [future.get(timeout=0).offset for future in futures['offsets']] == list(range(per_thread))
        plain = sorted((future.get(timeout=0).partition, future.get(timeout=0).offset) for future in futures['plain'])
        assert plain == sorted((1 + i % 3, i // 3) for i in range(per_thread)), f'round {round_}'
        assert [(r.offset, r.value) for r in cluster.records(with_offsets)] == \
            [(o, _value(o)) for o in range(per_thread)], f'round {round_}'
        assert {kinds for use_offset, kinds in requests if use_offset} == {frozenset({'OffsetProducerBatch'})}
        assert {kinds for use_offset, kinds in requests if not use_offset} == {frozenset({'ProducerBatch'})}


def test_offset_records_reject_bad_input_before_sending(cluster, tp):
    producer = _producer(cluster, max_block_ms=1000)
    try:
        with pytest.raises(ValueError, match='explicit partition'):
            producer.send(tp.topic, b'v', offset=3)
        with pytest.raises(ValueError, match=r'ProducerRecordWithOffset offset must be in 0..9223372036854775806, got -1'):
            producer.send(tp.topic, b'v', partition=0, offset=-1)
        with pytest.raises(ValueError, match='explicit partition'):
            ProducerRecordWithOffset(tp.topic, key=b'k', value=b'v', offset=1)
        with pytest.raises(UnknownTopicOrPartitionError, match="Topic 'kip391-missing' is not visible"):
            producer.send(ProducerRecordWithOffset('kip391-missing', 0, value=b'v', offset=0))
        with pytest.raises(UnknownTopicOrPartitionError, match=r'Partition 7 .* knows partitions \[0, 1\]'):
            producer.send(tp.topic, b'v', partition=7, offset=0)
        with pytest.raises(TypeError, match='takes no other arguments'):
            producer.send(ProducerRecordWithOffset(tp.topic, 0, value=b'v', offset=0), value=b'w')
        with pytest.raises(TypeError, match='headers must be a list'):
            producer.send(tp.topic, b'v', partition=0, offset=0, headers=[('h', 'not-bytes')])
        assert not producer._accumulator.has_incomplete
    finally:
        producer.close()
    assert cluster.records(tp) == []


def test_records_keep_key_value_headers_timestamp_and_null_fields(cluster, tp):
    producer = _producer(cluster)
    try:
        full = producer.send(ProducerRecordWithOffset(tp.topic, 0, key=b'k', value=b'v', headers=[('h', b'1'), ('n', None)],
                                                      timestamp_ms=1_700_000_000_123, offset=7))
        empty = producer.send(ProducerRecordWithOffset(tp.topic, 0, offset=8))
        producer.flush(timeout=10)
        assert (full.get(timeout=10).timestamp, empty.get(timeout=10).offset) == (1_700_000_000_123, 8)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 7)
        records = read_to_end(consumer, [tp])
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in records][0] == (
        7, b'k', b'v', [('h', b'1'), ('n', None)], 1_700_000_000_123)
    assert [(r.offset, r.key, r.value) for r in records][1] == (8, None, None)


def test_produce_with_offsets_needs_replicator_write(reference_cluster_factory):
    cluster = reference_cluster_factory(1, users={'replicator': 'secret', 'app': 'secret'},
                                        replicator_principals={'replicator'})
    cluster.create_topic('acl', partitions=1)
    tp = TopicPartition('acl', 0)

    def producer(user: str) -> KafkaProducer:
        return _producer(cluster, security_protocol='SASL_PLAINTEXT', sasl_mechanism='PLAIN',
                         sasl_plain_username=user, sasl_plain_password='secret')

    app = producer('app')
    try:
        errors = [_error(future) for future in _send_all(app, tp, [0, 1, 2])]
        log_after_refusal = cluster.records(tp)
        plain = _send_one(app, 'acl', b'plain', partition=0)  # the producer is still usable
    finally:
        app.close()
    replicator = producer('replicator')
    try:
        allowed = [f.get(timeout=10).offset for f in _send_all(replicator, tp, [5, 6])]
    finally:
        replicator.close()

    assert {type(e) for e in errors} == {ClusterAuthorizationFailedError}
    assert 'REPLICATOR_WRITE' in str(errors[0])
    assert log_after_refusal == []
    assert (plain.offset, allowed) == (0, [5, 6])


def test_kafka_kip_producer_builds_offset_collaborators_and_a_stock_producer_builds_its_own(cluster):
    from kafka.producer.record_accumulator import RecordAccumulator
    from kafka.producer.sender import Sender

    from kafka_kip.producer.accumulator import OffsetRecordAccumulator
    from kafka_kip.producer.sender import OffsetSender

    ours = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    stock = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        assert (type(ours._accumulator), type(ours._sender)) == (OffsetRecordAccumulator, OffsetSender)
        assert (type(stock._accumulator), type(stock._sender)) == (RecordAccumulator, Sender)
        assert ours._sender._accumulator is ours._accumulator
    finally:
        ours.close()
        stock.close()
