"""Unmodified kafka-python 3.0.12 and confluent-kafka 2.16 against a 3-broker reference cluster.

These independent clients are the reference cluster's conformance check: a failure here is a broker bug.
"""
from __future__ import annotations

import itertools
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import ConfigResource as KafkaConfigResource
from kafka.admin import ConfigResourceType
from kafka.admin import NewPartitions as KafkaNewPartitions
from kafka.admin import NewTopic as KafkaNewTopic

from kafka_kip_reference import ReferenceCluster

COMPRESSIONS = ['gzip', 'lz4', 'zstd']


@pytest.fixture(scope='module')
def cluster():
    with ReferenceCluster(brokers=3) as running:
        yield running
        assert running.internal_errors == []


def keyed(n: int) -> list[tuple[bytes, bytes]]:
    return [(f'key-{i % 7}'.encode(), f'value-{i}'.encode()) for i in range(n)]


def log_contents(cluster, topic, partitions):
    return {p: [(r.key, r.value) for r in cluster.records(TopicPartition(topic, p))] for p in range(partitions)}


def confluent_consume(consumer, count: int, timeout: float = 20.0) -> list:
    messages, deadline = [], time.monotonic() + timeout
    while len(messages) < count and time.monotonic() < deadline:
        for message in consumer.consume(count - len(messages), 0.5):
            assert message.error() is None, message.error()
            messages.append(message)
    return messages


# -- kafka-python -------------------------------------------------------------------------------------


@pytest.mark.parametrize('compression', COMPRESSIONS)
def test_kafka_python_keyed_produce_acks_all_and_consume(cluster, compression):
    topic = f'kp-{compression}'
    cluster.create_topic(topic, 3, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all',
                             compression_type=compression, linger_ms=5)
    futures = [(key, value, producer.send(topic, key=key, value=value)) for key, value in keyed(40)]
    producer.flush()
    producer.close()
    sent = {}
    for key, value, future in futures:
        metadata = future.get(timeout=10)
        sent.setdefault(metadata.partition, []).append((metadata.offset, key, value))
    assert sum(len(v) for v in sent.values()) == 40
    stored = log_contents(cluster, topic, 3)
    for partition, records in sent.items():
        assert [offset for offset, _, _ in records] == list(range(len(records)))
        assert stored[partition] == [(key, value) for _, key, value in records]
        assert cluster.isr(TopicPartition(topic, partition)) == cluster.replicas(TopicPartition(topic, partition))
    keys_by_partition = {p: {k for _, k, _ in records} for p, records in sent.items()}
    assert sum(len(keys) for keys in keys_by_partition.values()) == 7  # a key always lands on one partition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset='earliest',
                             consumer_timeout_ms=30_000)
    consumer.assign([TopicPartition(topic, p) for p in range(3)])
    consumed = {}
    for message in consumer:
        consumed.setdefault(message.partition, []).append((message.offset, message.key, message.value))
        if sum(len(v) for v in consumed.values()) == 40:
            break
    consumer.close()
    assert consumed == sent


def test_kafka_python_group_consume_commit_and_fetch_offsets(cluster):
    cluster.create_topic('kp-group', 2, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all')
    for key, value in keyed(20):
        producer.send('kp-group', key=key, value=value)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer('kp-group', group_id='kp-g', bootstrap_servers=cluster.bootstrap_servers,
                             auto_offset_reset='earliest', enable_auto_commit=False, consumer_timeout_ms=30_000)
    seen = []
    for message in consumer:
        seen.append(message)
        if len(seen) == 20:
            break
    consumer.commit()
    ends = consumer.end_offsets([TopicPartition('kp-group', p) for p in range(2)])
    committed = {tp: consumer.committed(tp) for tp in ends}
    consumer.commit({TopicPartition('kp-group', 0): OffsetAndMetadata(1, 'meta', -1)})
    rewound = consumer.committed(TopicPartition('kp-group', 0), metadata=True)
    consumer.close()
    assert len(seen) == 20 and sum(ends.values()) == 20
    assert committed == ends
    assert (rewound.offset, rewound.metadata) == (1, 'meta')


def test_kafka_python_offsets_for_times_and_idempotent_producer(cluster):
    cluster.create_topic('kp-times', 1, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True, acks='all')
    for i, ts in enumerate([1000, 2000, 3000, 4000]):
        producer.send('kp-times', value=f'v{i}'.encode(), partition=0, timestamp_ms=ts)
    producer.flush()
    producer.close()
    tp = TopicPartition('kp-times', 0)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    found = consumer.offsets_for_times({tp: 2500})[tp]
    beyond = consumer.offsets_for_times({tp: 5000})[tp]
    begin, end = consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]
    consumer.close()
    assert (found.offset, found.timestamp, found.leader_epoch) == (2, 3000, 0)
    assert beyond is None
    assert (begin, end) == (0, 4)
    assert [r.value for r in cluster.records(tp)] == [b'v0', b'v1', b'v2', b'v3']


def test_kafka_python_admin_creates_expands_and_deletes_topics(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    admin.create_topics([KafkaNewTopic('kp-admin', 2, 3, topic_configs={'retention.ms': '1000'})])
    admin.create_partitions({'kp-admin': KafkaNewPartitions(5)})
    described = admin.describe_topics(['kp-admin'])
    assert 'kp-admin' in admin.list_topics()
    configs = admin.describe_configs([KafkaConfigResource(ConfigResourceType.TOPIC, 'kp-admin'),
                                      KafkaConfigResource(ConfigResourceType.BROKER, '1')], config_filter='all')
    cluster_info = admin.describe_cluster()
    admin.delete_topics(['kp-admin'])
    admin.close()
    assert len(described[0]['partitions']) == 5
    topic_configs = configs['topic']['kp-admin']
    assert (topic_configs['retention.ms']['value'], topic_configs['retention.ms']['config_source']) == (
        '1000', 'DYNAMIC_TOPIC_CONFIG')
    assert topic_configs['min.insync.replicas']['config_source'] == 'DEFAULT_CONFIG'
    assert configs['broker']['1']['broker.id']['value'] == '1'
    assert (cluster_info['cluster_id'], cluster_info['controller_id']) == (cluster.cluster_id, 0)
    assert [b['broker_id'] for b in cluster_info['brokers']] == [0, 1, 2]
    assert cluster.topic_id('kp-admin') is None


# -- confluent-kafka -------------------------------------------------------------------------------------


@pytest.mark.parametrize('compression', COMPRESSIONS + ['snappy'])
def test_confluent_keyed_produce_acks_all_and_group_consume_with_commits(cluster, compression):
    topic = f'ck-{compression}'
    cluster.create_topic(topic, 3, 3)
    delivered = []
    producer = confluent_kafka.Producer({'bootstrap.servers': cluster.bootstrap_servers, 'acks': 'all',
                                         'compression.type': compression, 'enable.idempotence': True})
    for key, value in keyed(40):
        producer.produce(topic, key=key, value=value,
                         on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert producer.flush(15) == 0
    assert [err for err, _, _ in delivered] == [None] * 40
    by_partition = {}
    for _, partition, offset in delivered:
        by_partition.setdefault(partition, []).append(offset)
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())

    consumer = confluent_kafka.Consumer({'bootstrap.servers': cluster.bootstrap_servers, 'group.id': f'g-{topic}',
                                         'auto.offset.reset': 'earliest', 'enable.auto.commit': False})
    consumer.subscribe([topic])
    messages = confluent_consume(consumer, 40)
    consumer.commit(asynchronous=False)
    committed = consumer.committed([confluent_kafka.TopicPartition(topic, p) for p in range(3)], timeout=10)
    consumer.close()
    assert sorted((m.key(), m.value()) for m in messages) == sorted(keyed(40))
    assert {c.partition: c.offset for c in committed} == {p: len(o) for p, o in by_partition.items()}
    if compression != 'snappy':  # python-snappy is not installed; the broker passes snappy through
        stored = log_contents(cluster, topic, 3)
        assert sorted(r for records in stored.values() for r in records) == sorted(keyed(40))


def test_confluent_offsets_for_times(cluster):
    cluster.create_topic('ck-times', 1, 3)
    producer = confluent_kafka.Producer({'bootstrap.servers': cluster.bootstrap_servers})
    for i, ts in enumerate([1000, 2000, 3000]):
        producer.produce('ck-times', value=f'v{i}'.encode(), partition=0, timestamp=ts)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({'bootstrap.servers': cluster.bootstrap_servers, 'group.id': 'ck-t'})
    found = consumer.offsets_for_times([confluent_kafka.TopicPartition('ck-times', 0, 1500)], timeout=10)
    low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition('ck-times', 0), timeout=10)
    consumer.close()
    assert (found[0].offset, found[0].error) == (1, None)
    assert (low, high) == (0, 3)


def test_confluent_admin_creates_expands_describes_and_deletes_topics(cluster):
    admin = AdminClient({'bootstrap.servers': cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic('ck-admin', 2, 3, config={'cleanup.policy': 'delete'})]).values():
        future.result(10)
    for future in admin.create_partitions([NewPartitions('ck-admin', 4)]).values():
        future.result(10)
    resource = ConfigResource(ConfigResource.Type.TOPIC, 'ck-admin')
    configs = admin.describe_configs([resource])[resource].result(10)
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics['ck-admin'].partitions) == 4
    assert configs['min.insync.replicas'].value == '1'
    assert configs['cleanup.policy'].is_default is False
    for future in admin.delete_topics(['ck-admin']).values():
        future.result(10)
    assert cluster.topic_id('ck-admin') is None


# -- stock clients across faults --------------------------------------------------------------------


def test_kafka_python_producer_and_consumer_follow_a_stopped_leader(cluster):
    cluster.create_topic('kp-failover', 1, 3)
    tp = TopicPartition('kp-failover', 0)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all', retries=10,
                             retry_backoff_ms=50)
    first = [producer.send('kp-failover', f'a{i}'.encode()).get(timeout=10).offset for i in range(5)]
    cluster.stop_broker(0)
    try:
        second = [producer.send('kp-failover', f'b{i}'.encode()).get(timeout=20).offset for i in range(5)]
        producer.close()
        assert (cluster.leader(tp), cluster.leader_epoch(tp)) == (1, 1)
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset='earliest',
                                 consumer_timeout_ms=30_000)
        consumer.assign([tp])
        consumed = [(m.offset, m.value) for m in itertools.islice(consumer, 10)]
        consumer.close()
    finally:
        cluster.start_broker(0)
    assert first + second == list(range(10))
    assert consumed == [(i, f'a{i}'.encode()) for i in range(5)] + [(5 + i, f'b{i}'.encode()) for i in range(5)]
    assert [r.leader_epoch for r in cluster.records(tp, 0)] == [0] * 5 + [1] * 5  # broker 0 caught up on start


def test_confluent_consumer_follows_an_elected_leader(cluster):
    cluster.create_topic('ck-failover', 1, 3)
    producer = confluent_kafka.Producer({'bootstrap.servers': cluster.bootstrap_servers, 'acks': 'all'})
    for i in range(5):
        producer.produce('ck-failover', value=f'a{i}'.encode())
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({'bootstrap.servers': cluster.bootstrap_servers, 'group.id': 'ck-fo',
                                         'auto.offset.reset': 'earliest', 'topic.metadata.refresh.interval.ms': 500})
    consumer.assign([confluent_kafka.TopicPartition('ck-failover', 0, 0)])
    before = confluent_consume(consumer, 5)
    cluster.elect_leader(TopicPartition('ck-failover', 0), 2)
    for i in range(5):
        producer.produce('ck-failover', value=f'b{i}'.encode())
    assert producer.flush(20) == 0
    after = confluent_consume(consumer, 5)
    consumer.close()
    assert [m.value() for m in before + after] == [f'a{i}'.encode() for i in range(5)] + [
        f'b{i}'.encode() for i in range(5)]
    assert [m.leader_epoch() for m in after] == [1] * 5
