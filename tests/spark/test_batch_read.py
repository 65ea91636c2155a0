"""Batch reads with ``format("kafka-kip")`` on the reference cluster: rows, columns, leader epochs, offset
ranges and their tasks.
"""
from __future__ import annotations

import json
import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which('java') is None, reason='Spark needs java on PATH')
pytest.importorskip('pyspark')

from kafka_kip import TopicPartition  # noqa: E402
from tests.spark.helpers import (  # noqa: E402
    TS0,
    produce,
    read,
)


def test_batch_read_three_partitions_returns_exactly_the_produced_rows(spark, reference_cluster_factory):
    cluster = reference_cluster_factory(3)
    cluster.create_topic('orders', partitions=3, replication_factor=3)
    produce(cluster, 'orders', {0: 4, 1: 3, 2: 5})
    tp1 = TopicPartition('orders', 1)
    new_leader = [b for b in cluster.replicas(tp1) if b != cluster.leader(tp1)][0]
    cluster.elect_leader(tp1, new_leader)  # clean election: partition 1 continues in leader epoch 1
    produce(cluster, 'orders', {1: 2}, first=100)

    frame = read(spark, cluster, subscribe='orders', includeHeaders='true')
    assert frame.columns == ['key', 'value', 'topic', 'partition', 'offset', 'timestamp', 'timestampType', 'headers',
                             'leaderEpoch']  # Spark's columns in Spark's order, then the leader epoch
    assert read(spark, cluster, subscribe='orders').columns == [
        'key', 'value', 'topic', 'partition', 'offset', 'timestamp', 'timestampType', 'leaderEpoch']
    assert frame.rdd.getNumPartitions() == 3
    rows = frame.collect()
    got = sorted((r.partition, r.offset, r.leaderEpoch, r.key, r.value, r.topic, r.timestampType,
                  [(h.key, h.value) for h in r.headers], int(r.timestamp.timestamp() * 1000)) for r in rows)
    expected = []
    for p in range(3):
        for rec in cluster.records(TopicPartition('orders', p)):
            n = int(rec.value[1:])
            expected.append((p, rec.offset, rec.leader_epoch, rec.key, rec.value, 'orders', 0,
                             [('n', str(n).encode())], TS0 + n))
    assert len(rows) == 14
    assert got == sorted(expected)
    assert [(o, e) for p, o, e, *_ in got if p == 1] == [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1)]


def test_batch_read_offset_range_split_and_json_offsets(spark, reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    cluster.create_topic('t', partitions=2, replication_factor=1)
    produce(cluster, 't', {0: 10, 1: 3})
    frame = read(spark, cluster, subscribePattern='t|nothing', maxRecordsPerPartition='4',
                 startingOffsets=json.dumps({'t': {'0': 1, '1': -2}}),
                 endingOffsets=json.dumps({'t': {'0': {'offset': 9, 'leaderEpoch': 0}, '1': -1}}))
    assert frame.rdd.getNumPartitions() == 3  # t-0 [1,5) [5,9) and t-1 [0,3)
    assert sorted((r.partition, r.offset) for r in frame.select('partition', 'offset').collect()) == (
        [(0, o) for o in range(1, 9)] + [(1, o) for o in range(3)])


# -- Spark's option names: a format("kafka") job's text, only the format name changed ----------------
