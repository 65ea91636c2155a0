"""When KipClusterMetadata refreshes: a topic no request asked for yet at once, retries after retry_backoff_ms."""
from __future__ import annotations

import kafka
from kafka.cluster import ClusterMetadata

from kafka_kip import KafkaProducer
from kafka_kip.metadata import KipClusterMetadata

BACKOFF_MS = 60_000


def test_a_new_topic_is_asked_for_at_once_and_then_backs_off_as_kafka_python_does():
    ours, stock = KipClusterMetadata(retry_backoff_ms=BACKOFF_MS), ClusterMetadata(retry_backoff_ms=BACKOFF_MS)
    for cluster in (ours, stock):
        cluster.failed_update(kafka.errors.KafkaConnectionError('a refresh just failed'))
        cluster.add_topic('t')
    assert ours.ttl() == 0
    assert stock.ttl() > BACKOFF_MS - 10_000  # kafka-python's own cache is left as it is
    ours.metadata_request()  # 't' is asked for ...
    ours.failed_update(kafka.errors.KafkaConnectionError('no answer'))
    assert ours.ttl() > BACKOFF_MS - 10_000  # ... so its retry waits
    ours.add_topic('u')
    assert ours.ttl() == 0


def test_a_producer_gets_a_topics_first_metadata_without_waiting_retry_backoff(reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    cluster.create_topic('t', partitions=2, replication_factor=1)
    # kafka-python's backoff after the bootstrap's refresh would outlast max_block_ms
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=BACKOFF_MS,
                             max_block_ms=20_000)
    try:
        assert producer.partitions_for('t') == {0, 1}
    finally:
        producer.close()
