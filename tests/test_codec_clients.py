"""kafka_kip's clients with the compiled record codec and with the fallback, against unmodified kafka-python.

Records of every shape, written with every codec, must be consumed by kafka_kip exactly as by kafka-python
(every ConsumerRecord field), whichever codec path kafka_kip takes (the ``codec_mode`` fixture).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import kafka
import pytest
from kafka.serializer import Deserializer

import kafka_kip
from kafka_kip import _codec
from kafka_kip.consumer.records import DecodedPartitionRecords
from kafka_kip.testing import ReferenceCluster

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


def consume(consumer_class: type, cluster: ReferenceCluster, topic: str, **configs) -> tuple[list, type]:
    consumer = consumer_class(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset='earliest',
                              enable_auto_commit=False, max_poll_records=37, **configs)
    consumer.assign([kafka.TopicPartition(topic, 0)])
    records, deadline = [], time.monotonic() + 20
    while len(records) < RECORDS and time.monotonic() < deadline:
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
