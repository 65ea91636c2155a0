"""spark-mirror's group sync (``kafka_kip.spark.groups``) without Spark: targets written by ``copy_range``, the code
a spark-mirror task runs, then one sync round as the driver runs it, translating from the target alone."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka.structs import TopicPartition

import kafka_kip
from kafka_kip import KafkaProducer
from kafka_kip.mirror.copy import copy_range
from kafka_kip.spark.groups import QueryGroupSync
from kafka_kip_reference import ReferenceCluster
from tests.mirror.helpers import commit_groups, committed_offsets, first_record_of_group

TP = TopicPartition('orders', 0)


@pytest.fixture
def source() -> Iterator[ReferenceCluster]:
    with ReferenceCluster(1) as cluster:
        cluster.create_topic('orders', partitions=1, replication_factor=1)
        yield cluster


def produce(cluster: ReferenceCluster, first: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    for n in range(first, first + count):
        producer.send('orders', value=b'v%d' % n, partition=0)
    producer.flush()
    producer.close()


def one_round(source: ReferenceCluster, target: ReferenceCluster, **options: object) -> dict[str, int | None]:
    """One sync round of groups ``app`` and ``late``; returns the sync's lag per group."""
    sync = QueryGroupSync(source.bootstrap_servers, target.bootstrap_servers, 'app|late', 'orders', **options)
    try:
        result = sync.sync_once(retry_for_s=30)
    finally:
        sync.close()
    assert result.failed == {}
    return result.lag


def test_translated_groups_land_exactly_on_a_stock_target_whose_source_starts_above_zero(source) -> None:
    produce(source, 0, 30)
    admin = kafka_kip.admin.KafkaAdminClient(bootstrap_servers=source.bootstrap_servers)
    try:
        admin.delete_records({TP: 10})  # the source's log starts at 10: target offset 0 holds source offset 10
    finally:
        admin.close()
    with ReferenceCluster(1, features=()) as target:
        target.create_topic('orders', partitions=1, replication_factor=1)
        copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 10, 20, offset_mode='translated')
        commit_groups(source.bootstrap_servers, {'app': {TP: 15}, 'late': {TP: 25}, 'other': {TP: 12}})

        assert one_round(source, target, offset_mode='translated') == {'app': 0, 'late': 5}
        # late is ahead of the copy: it lands at the end of what is copied, never beyond
        assert committed_offsets(target.bootstrap_servers, ['app', 'late', 'other'], TP) == {
            'app': 5, 'late': 10, 'other': None}

        copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 20, 30, offset_mode='translated')
        commit_groups(source.bootstrap_servers, {'app': {TP: 27}})
        assert one_round(source, target, offset_mode='translated') == {'app': 0, 'late': 0}
        assert committed_offsets(target.bootstrap_servers, ['app', 'late'], TP) == {'app': 17, 'late': 15}
        assert first_record_of_group(target.bootstrap_servers, 'app', TP) == (17, b'v27')


def test_auto_mode_keeps_offsets_on_a_kip391_target_and_follows_the_prefix(source) -> None:
    produce(source, 0, 20)
    with ReferenceCluster(1) as target:
        target_tp = TopicPartition('dr.orders', 0)
        target.create_topic('dr.orders', partitions=1, replication_factor=1)
        copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 0, 15, target_tp=target_tp,
                   offset_mode='auto')
        commit_groups(source.bootstrap_servers, {'app': {TP: 12}, 'late': {TP: 18}})

        assert one_round(source, target, offset_mode='auto', topic_prefix='dr.') == {'app': 0, 'late': 3}
        assert committed_offsets(target.bootstrap_servers, ['app', 'late'], target_tp) == {'app': 12, 'late': 15}
        assert first_record_of_group(target.bootstrap_servers, 'app', target_tp) == (12, b'v12')


def test_a_group_of_a_topic_not_copied_yet_is_synced_with_nothing_committed(source) -> None:
    produce(source, 0, 5)
    with ReferenceCluster(1) as target:  # no target topic, no offset map: no task has run
        commit_groups(source.bootstrap_servers, {'app': {TP: 3}})
        assert one_round(source, target) == {'app': 0}
        assert committed_offsets(target.bootstrap_servers, ['app'], TP) == {'app': None}
