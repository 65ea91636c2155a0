"""KIP-253 in the Spark source (driver-side planning and the read tasks, in this process; no Spark session): a
subscribed topic grows 2 -> 4 between micro-batches while a keyed KIP-253 producer writes. The new partitions are
planned only in the micro-batch after the one that read the prior partitions past the expansion's thresholds, so
the rows of each key come in send order when the micro-batches are taken in order.
"""
from __future__ import annotations

import pytest
from kafka.structs import TopicPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable

from kafka_kip.spark.options import ReadOptions
from kafka_kip.spark.positions import from_spark
from kafka_kip.spark.records import record_schema
from kafka_kip.spark.source import StreamReader
from tests.support.keyed import KEYS, produce

pytestmark = pytest.mark.kip253


def spans(plan: list) -> list[tuple[int, int, int]]:
    return [(tp.partition, begin.offset, until) for tp, begin, until in plan]


def batch_rows(reader: StreamReader, start: dict, end: dict) -> list[tuple[bytes, int]]:
    """(key, value) of every row of the micro-batch, task by task (each task's rows in offset order)."""
    rows = []
    for task in reader.partitions(start, end):
        for batch in reader.read(task):
            table = batch.to_pydict()
            rows.extend((key, int(value)) for key, value in zip(table['key'], table['value'], strict=True))
    return rows


@pytest.mark.reference_cluster(brokers=1)
def test_new_partitions_are_planned_in_the_micro_batch_after_the_prior_ones_reach_the_thresholds(reference_cluster) -> None:
    reference_cluster.create_topic('t', partitions=2, replication_factor=1)
    options = ReadOptions.parse({'kafka.bootstrap.servers': reference_cluster.bootstrap_servers, 'subscribe': 't',
                                 'startingoffsets': 'earliest'}).for_stream()
    reader = StreamReader(options, record_schema(False))
    try:
        initial = reader.initialOffset()
        produce(reference_cluster, range(100))
        reference_cluster.create_partitions('t', 4)
        thresholds = {p: reference_cluster.epochs(TopicPartition('t', p))[-1][1] for p in range(2)}
        assert sum(thresholds.values()) == 100
        produce(reference_cluster, range(100, 200))
        ends = {p: len(reference_cluster.records(TopicPartition('t', p))) for p in range(4)}
        first = reader.latestOffset(initial, ReadAllAvailable())
        assert {tp.partition: p.offset for tp, p in from_spark(first).items()} == {0: ends[0], 1: ends[1]}
        second = reader.latestOffset(first, ReadAllAvailable())
        assert {tp.partition: p.offset for tp, p in from_spark(second).items()} == ends
        assert spans(reader.plan(initial, first)) == [(0, 0, ends[0]), (1, 0, ends[1])]
        assert spans(reader.plan(first, second)) == [(0, ends[0], ends[0]), (1, ends[1], ends[1]),
                                                     (2, 0, ends[2]), (3, 0, ends[3])]
        rows = batch_rows(reader, initial, first) + batch_rows(reader, first, second)
    finally:
        reader.stop()
    assert sorted(value for _, value in rows) == list(range(200))
    assert len(rows) == 200
    for key in KEYS:
        values = [value for k, value in rows if k == key]
        assert values == sorted(values), key
