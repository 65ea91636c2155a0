"""The Spark source's stored positions follow the consumer's KIP-232 rule (driver-side, no Spark needed).

A checkpointed position names its incarnation (partition epoch, topic id); ``SourcePlanner.check`` refuses one
of another incarnation at once and waits a bounded time for one ahead of this cluster's metadata.
"""
from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer
from kafka.structs import TopicPartition

from kafka_kip.errors import InvalidPartitionEpochError
from kafka_kip.policies import STOP
from kafka_kip.spark.options import SUBSCRIBE, Subscription
from kafka_kip.spark.planner import SourcePlanner
from kafka_kip.spark.positions import Position
from kafka_kip_reference import ReferenceCluster

pytestmark = pytest.mark.kip232

TOPIC = 'events'
TP = TopicPartition(TOPIC, 0)
RESUME_HINT = ('If this cluster holds the same records at the same offsets (a mirror that kept them), start a new '
               'query (new checkpoint) with startingOffsets at those offsets; otherwise start a new query.')


@pytest.fixture
def mirror() -> Iterator[ReferenceCluster]:
    with ReferenceCluster(brokers=1) as target:
        target.create_topic(TOPIC, partitions=1, replication_factor=1)
        producer = KafkaProducer(bootstrap_servers=target.bootstrap_servers)
        for i in range(6):
            producer.send(TOPIC, b'v%d' % i, partition=0)
        producer.flush(10)
        producer.close()
        yield target


def _check(cluster: ReferenceCluster, position: Position, **consumer_configs: object) -> dict:
    planner = SourcePlanner(cluster.bootstrap_servers, consumer_configs, Subscription(SUBSCRIBE, (TOPIC,)), STOP)
    try:
        return planner.check({TP: position}, planner.describe())
    finally:
        planner.close()


def test_a_position_of_this_incarnation_is_kept(mirror):
    position = Position(4, 0, mirror.partition_epoch(TP), str(mirror.topic_id(TOPIC)))
    assert _check(mirror, position) == {TP: position}


def test_a_position_stored_on_another_cluster_is_refused_at_once(mirror):
    stored_on = '6f1d1ba0-0000-4000-8000-000000000001'   # same partition epoch, another topic id
    target_id = mirror.topic_id(TOPIC)
    with pytest.raises(InvalidPartitionEpochError) as raised:
        _check(mirror, Position(4, 0, 1, stored_on))
    assert raised.value.partition_epochs == {TP: 1}
    assert str(raised.value) == (
        f'[Error 10001] InvalidPartitionEpochError: events-0 at offset 4 with epochs (partition epoch 1, leader epoch '
        f"0, topic id {stored_on}) belongs to another incarnation of the partition than this cluster's (partition "
        f'epoch 1, leader epoch 0, topic id {target_id}): the source topic was deleted and recreated, or the '
        f'positions were stored on another cluster. {RESUME_HINT}')


def test_a_position_ahead_of_this_cluster_warns_then_is_refused_after_offset_epoch_wait_ms(mirror, caplog):
    stored_on = '6f1d1ba0-0000-4000-8000-000000000001'
    target_id = mirror.topic_id(TOPIC)
    held = f'events-0 at offset 4 with epochs (partition epoch 3, leader epoch 0, topic id {stored_on})'
    here = f'partition epoch 1, leader epoch 0, topic id {target_id}'
    started = time.monotonic()
    with caplog.at_level('WARNING', logger='kafka_kip.spark.planner'):
        with pytest.raises(InvalidPartitionEpochError) as raised:
            _check(mirror, Position(4, 0, 3, stored_on), offset_epoch_wait_ms=500)
    assert time.monotonic() - started >= 0.5
    assert [r.getMessage() for r in caplog.records if r.name == 'kafka_kip.spark.planner'] == [
        f"Waiting until this cluster's metadata reaches the epochs of {held} (it has {here}); "
        'InvalidPartitionEpochError if it does not within offset_epoch_wait_ms=500']
    assert raised.value.partition_epochs == {TP: 3}
    assert str(raised.value) == (
        f"[Error 10001] InvalidPartitionEpochError: {held}: this cluster's metadata has not reached those epochs "
        f'within offset_epoch_wait_ms=500 ({here}): the positions were stored on another cluster, or the metadata '
        f'is stuck. {RESUME_HINT}')
