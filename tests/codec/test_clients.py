"""kafka_kip's clients with the compiled record codec and with the fallback, against unmodified kafka-python.

Records of every shape, written with every codec, must be consumed by kafka_kip exactly as by kafka-python
(every ConsumerRecord field), whichever codec path kafka_kip takes (the ``codec_mode`` fixture).
"""
from __future__ import annotations

import collections
import gc
import itertools
import os
import subprocess
import sys
import time

import kafka
import pytest
from kafka.serializer import Deserializer, Serializer

import kafka_kip
from kafka_kip import _codec
from kafka_kip.consumer.records import DecodedPartitionRecords
from kafka_kip.producer.records import RecordFuture
from kafka_kip_reference import ReferenceCluster

COMPRESSIONS = [None, 'gzip', 'snappy', 'lz4', 'zstd']
#: (key, value, headers) of every shape: absent and empty key/value, headers with and without values
SHAPES = [(None, b'v' * 100, []), (b'k', b'', [('h', b'1')]), (b'', None, [('a', b''), ('b', b'x' * 30)]),
          (b'key' * 50, b'value' * 200, [('\u00e9t\u00e9', b'\x00\xff')])]
RECORDS = 150


class Prefix(Deserializer):
    def deserialize(self, topic, headers, data):
        return data and data[:2]


class Length(Deserializer):
    def deserialize(self, topic, headers, data):
        return len(data or b'')


class Upper(Serializer):
    """Leaves bytes alone, upper-cases text (and returns it as text, which send() refuses)."""

    def serialize(self, topic, headers, data):
        return data if isinstance(data, bytes) else data.upper()


class Encode(Serializer):
    def serialize(self, topic, headers, data):
        return None if data is None else data.encode()


@pytest.fixture(scope='module')
def cluster():
    with ReferenceCluster(brokers=1) as running:
        yield running
        assert running.internal_errors == []


def produce(cluster: ReferenceCluster, topic: str, compression: str | None) -> None:
    cluster.create_topic(topic, 1, 1)
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, compression_type=compression,
                                   linger_ms=20, batch_size=4096)
    futures = [producer.send(topic, key=key, value=value, headers=headers, partition=0,
                             timestamp_ms=1_700_000_000_000 + index)
               for index in range(RECORDS) for key, value, headers in [SHAPES[index % len(SHAPES)]]]
    producer.flush()
    producer.close()
    assert [future.get(timeout=10).offset for future in futures] == list(range(RECORDS))


def consume(consumer_class: type, cluster: ReferenceCluster, topic: str, partition: int = 0,
            expected: int = RECORDS, **configs) -> tuple[list, type]:
    consumer = consumer_class(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset='earliest',
                              enable_auto_commit=False, max_poll_records=37, **configs)
    consumer.assign([kafka.TopicPartition(topic, partition)])
    records, deadline = [], time.monotonic() + 20
    while len(records) < expected and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            records += batch
    partition_records = consumer._fetcher.PartitionRecords
    consumer.close()
    return records, partition_records


@pytest.mark.parametrize('compression', COMPRESSIONS, ids=str)
def test_consumed_records_equal_kafka_pythons(cluster, codec_mode, compression):
    topic = f'codec-consume-{compression}-{codec_mode}'
    produce(cluster, topic, compression)
    stock, _ = consume(kafka.KafkaConsumer, cluster, topic)
    ours, partition_records = consume(kafka_kip.KafkaConsumer, cluster, topic)
    assert ours == stock
    assert [record.offset for record in ours] == list(range(RECORDS))
    key, value, headers = SHAPES[3]
    assert ours[3] == kafka.consumer.fetcher.ConsumerRecord(
        topic, 0, 0, 3, 1_700_000_000_003, 0, key, value, headers, None, 150, 1000, len('\u00e9t\u00e9'.encode()) + 2)
    assert (partition_records is DecodedPartitionRecords) == (codec_mode == 'compiled')


def test_deserialized_records_equal_kafka_pythons(cluster, codec_mode):
    topic = f'codec-deserialize-{codec_mode}'
    produce(cluster, topic, 'lz4')
    configs = {'key_deserializer': Prefix(), 'value_deserializer': Length()}
    stock, _ = consume(kafka.KafkaConsumer, cluster, topic, **configs)
    ours, _ = consume(kafka_kip.KafkaConsumer, cluster, topic, **configs)
    assert ours == stock
    assert [(record.key, record.value) for record in ours[:4]] == [(None, 100), (b'k', 0), (b'', 0), (b'ke', 1000)]


def test_environment_variable_forces_the_fallback_without_a_warning():
    code = ('import warnings; warnings.simplefilter("error", RuntimeWarning)\n'
            'import kafka_kip._codec as c; print(c.compiled)')
    env = dict(os.environ, KAFKA_KIP_PURE_PYTHON='1')
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == 'None'


def test_missing_extension_warns_and_falls_back():
    code = ('import sys; sys.modules["kafka_kip._codec._compiled"] = None\n'  # as if it was never built
            'import warnings\n'
            'with warnings.catch_warnings(record=True) as caught:\n'
            '    warnings.simplefilter("always", RuntimeWarning)\n'
            '    import kafka_kip\n'
            'from kafka_kip import _codec\n'
            'print(_codec.compiled, [w.category.__name__ for w in caught])\n'
            'print(kafka_kip.KafkaConsumer(bootstrap_servers=[], api_version=(2, 1))._fetcher.PartitionRecords)')
    env = {key: value for key, value in os.environ.items() if key != _codec.PURE_PYTHON_ENV}
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["None ['PurePythonRecordsWarning']",
                                        "<class 'kafka.consumer.fetcher.Fetcher.PartitionRecords'>"]


# -- producing ----------------------------------------------------------------------------------------------

def send_all(producer_class: type, cluster: ReferenceCluster, topic: str, **configs) -> list:
    """Send every shape RECORDS times over (explicit partition), with callbacks; the futures' outcomes."""
    producer = producer_class(bootstrap_servers=cluster.bootstrap_servers, linger_ms=20, batch_size=4096, **configs)
    called = []
    futures = []
    for index in range(RECORDS):
        key, value, headers = SHAPES[index % len(SHAPES)]
        future = producer.send(topic, key=key, value=value, headers=headers, partition=index % 2,
                               timestamp_ms=1_700_000_000_000 + index)
        if index % 3 == 0:
            future.add_callback(called.append)
        futures.append(future)
    producer.flush()
    late = []
    futures[0].add_callback(late.append)  # after completion: runs at once
    producer.close()
    metadata = [future.get(timeout=10) for future in futures]
    in_order = sorted(called, key=lambda m: (m.partition, m.offset))  # partitions complete in any order
    assert in_order == sorted((metadata[i] for i in range(0, RECORDS, 3)), key=lambda m: (m.partition, m.offset))
    assert late == [metadata[0]]
    return metadata


@pytest.mark.parametrize('compression', COMPRESSIONS, ids=str)
def test_produced_records_and_metadata_equal_kafka_pythons(cluster, codec_mode, compression):
    ours_topic, stock_topic = f'codec-produce-{compression}-{codec_mode}', f'codec-produce-{compression}-{codec_mode}-stock'
    for topic in (ours_topic, stock_topic):
        cluster.create_topic(topic, 2, 1)
    ours = send_all(kafka_kip.KafkaProducer, cluster, ours_topic, compression_type=compression)
    stock = send_all(kafka.KafkaProducer, cluster, stock_topic, compression_type=compression)
    assert [m._replace(topic='t', topic_partition=None) for m in ours] == [
        m._replace(topic='t', topic_partition=None) for m in stock]
    assert [(m.partition, m.offset) for m in ours[:4]] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    for partition in (0, 1):
        read, _ = consume(kafka.KafkaConsumer, cluster, ours_topic, partition, RECORDS // 2)
        expected, _ = consume(kafka.KafkaConsumer, cluster, stock_topic, partition, RECORDS // 2)
        assert [r._replace(topic='t') for r in read] == [r._replace(topic='t') for r in expected]
        assert len(read) == RECORDS // 2


def test_plain_records_take_the_lean_path_only_with_the_compiled_codec(cluster, codec_mode):
    topic = f'codec-lean-{codec_mode}'
    cluster.create_topic(topic, 1, 1)
    producer = kafka_kip.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    future = producer.send(topic, b'v', partition=0)
    assert future.get(timeout=10).offset == 0
    producer.close()
    assert producer._lean_send is (codec_mode == 'compiled')
    assert (type(future) is RecordFuture) is (codec_mode == 'compiled')


def test_keyed_and_keyless_records_land_as_with_kafka_python(cluster, codec_mode):
    ours_topic, stock_topic = f'codec-keys-{codec_mode}', f'codec-keys-{codec_mode}-stock'
    outcomes = []
    for producer_class, topic in ((kafka_kip.KafkaProducer, ours_topic), (kafka.KafkaProducer, stock_topic)):
        cluster.create_topic(topic, 4, 1)
        producer = producer_class(bootstrap_servers=cluster.bootstrap_servers, key_serializer=Encode(),
                                  batch_size=512)
        keyed = [producer.send(topic, key=f'key-{index % 9}', value=b'x' * 50) for index in range(60)]
        keyless = [producer.send(topic, value=b'y' * 50) for _ in range(60)]
        producer.flush()
        producer.close()
        partitions_by_key = [future.get(timeout=10).partition for future in keyed]
        keyless_partitions = [future.get(timeout=10).partition for future in keyless]
        outcomes.append(partitions_by_key)
        # the sticky partitioner (KIP-480) moves on a batch at a time: runs of one partition, none split
        runs = [p for index, p in enumerate(keyless_partitions) if index == 0 or p != keyless_partitions[index - 1]]
        assert len(runs) == len(set(runs)) or len(runs) > 1
        assert sum(len(cluster.records(kafka.TopicPartition(topic, p))) for p in range(4)) == 120
    assert outcomes[0] == outcomes[1]  # murmur2 of the serialized key, as kafka-python


_numbers = itertools.count()


@pytest.mark.parametrize(('arguments', 'configs'), [
    ({'value': None}, {}),                                    # neither key nor value
    ({'value': b'v', 'headers': [('h', 'text')]}, {}),         # header value not bytes
    ({'value': b'v', 'headers': ('h', b'v')}, {}),             # headers not a list
    ({'value': b'v', 'partition': 7}, {}),                     # no such partition
    ({'value': 'text'}, {}),                                  # value not serialized
    ({'value': 'text'}, {'value_serializer': Upper()}),         # serializer returns str
    ({'value': b'v' * 5000}, {'max_request_size': 1000}),       # too large
])
def test_bad_sends_fail_as_in_kafka_python(cluster, codec_mode, arguments, configs):
    topic = f'codec-bad-sends-{next(_numbers)}'
    cluster.create_topic(topic, 1, 1)
    errors = []
    for producer_class in (kafka_kip.KafkaProducer, kafka.KafkaProducer):
        producer = producer_class(bootstrap_servers=cluster.bootstrap_servers, **configs)
        producer.send(topic, b'warm-up', partition=0).get(timeout=10)  # metadata known: the lean path applies
        try:
            producer.send(topic, **arguments)
        except Exception as exc:  # the errors are what is compared
            errors.append((type(exc), str(exc)))
        producer.close()
    assert len(errors) == 2 and errors[0] == errors[1]


#: the objects of the record path, produce and consume (connections may leave cycles of their own)
RECORD_PATH_TYPES = {'RecordFuture', 'FutureRecordMetadata', 'RecordMetadata', 'BatchProduceResult',
                     'FutureProduceResult', 'CompiledProducerBatch', 'ProducerBatch', 'RecordBatchBuilder',
                     'MemoryRecordsBuilder', 'ConsumerRecord', 'DecodedBatch', 'Progress', 'DecodedPartitionRecords',
                     'PartitionRecords', 'MemoryRecords', 'DefaultRecordBatch'}


def test_sent_and_consumed_records_leave_no_reference_cycles(cluster, codec_mode):
    """Completed batches, record futures and fetched records are freed by reference counting, as with
    kafka-python: none is left for the garbage collector (which would cost more than the codec saves)."""
    topic = f'codec-cycles-{codec_mode}'
    cluster.create_topic(topic, 1, 1)
    producer = kafka_kip.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, batch_size=4096)
    consumer = kafka_kip.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset='earliest',
                                       enable_auto_commit=False)
    consumer.assign([kafka.TopicPartition(topic, 0)])
    producer.send(topic, b'warm-up', partition=0).get(timeout=10)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for index in range(2000):
            producer.send(topic, b'v%d' % index, partition=0)
        producer.flush()
        consumed, deadline = 0, time.monotonic() + 20
        while consumed < 2001 and time.monotonic() < deadline:
            consumed += sum(len(records) for records in consumer.poll(timeout_ms=200).values())
        gc.collect()
        garbage = collections.Counter(type(thing).__name__ for thing in gc.garbage
                                      if type(thing).__name__ in RECORD_PATH_TYPES)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
        producer.close()
        consumer.close()
    assert consumed == 2001
    assert garbage == collections.Counter()
