"""Spark's option names on ``format("kafka-kip")``: a ``format("kafka")`` job's text, only the format name
changed (timestamps, triggers, failOnDataLoss, group ids, SASL), beside Spark's own connector; bad options
fail at load naming the option. Their parsing without Spark: tests/spark/test_options.py.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.api_key import ApiKey

pytestmark = pytest.mark.skipif(shutil.which('java') is None, reason='Spark needs java on PATH')
pytest.importorskip('pyspark')

from kafka_kip import KafkaProducer, TopicPartition  # noqa: E402
from kafka_kip.spark import stoppable  # noqa: E402
from kafka_kip_reference import ReferenceCluster  # noqa: E402
from tests.spark.helpers import (  # noqa: E402
    TS0,
    produce,
    read,
    wait_until,
)


def clicks_cluster(reference_cluster_factory: Callable[..., ReferenceCluster]) -> ReferenceCluster:
    """Topic clicks. Partition 0: offsets 0..5, timestamps TS0+0..5, leader epoch 0. Partition 1: offsets
    0..7, timestamps TS0+6..13, leader epoch 0 up to offset 3 and 1 (a clean election) from offset 4 on.
    Record n has value v<n> and timestamp TS0+n."""
    cluster = reference_cluster_factory(2)
    cluster.create_topic('clicks', partitions=2, replication_factor=2)
    produce(cluster, 'clicks', {0: 6, 1: 4})
    tp1 = TopicPartition('clicks', 1)
    cluster.elect_leader(tp1, [b for b in cluster.replicas(tp1) if b != cluster.leader(tp1)][0])
    produce(cluster, 'clicks', {1: 4}, first=10)
    return cluster


def click(partition: int, offset: int) -> tuple[int, int, int, int, bytes]:
    """The expected row of clicks: (partition, offset, leaderEpoch, timestamp - TS0, value)."""
    n = offset if partition == 0 else 6 + offset
    return partition, offset, 1 if partition == 1 and offset >= 4 else 0, n, b'v%d' % n


def rows_of(frame: Any) -> list[tuple]:
    return sorted((r.partition, r.offset, r.leaderEpoch, round(r.timestamp.timestamp() * 1000) - TS0, r.value)
                  for r in frame.collect())


def clicks_job(spark: Any, fmt: str, cluster: ReferenceCluster, **options: str) -> Any:
    """The text of a batch job written for format("kafka"); ``fmt`` is all that differs between the runs."""
    return (spark.read.format(fmt).option('kafka.bootstrap.servers', cluster.bootstrap_servers)
            .option('subscribe', 'clicks').option('failOnDataLoss', 'false').options(**options).load())


#: Spark options for clicks_job -> (the tasks Spark plans, the rows).
CLICKS_JOBS = {
    # clicks-0 [3, 6) (no record at TS0+12: it ends at latest) and clicks-1 [0, 6): 9 offsets; minPartitions=5
    # shares the tasks 2 + 3 (Spark's KafkaOffsetRangeCalculator).
    'timestamp window, minPartitions': (
        {'startingTimestamp': str(TS0 + 3), 'endingTimestamp': str(TS0 + 12), 'minPartitions': '5'},
        5, [click(0, o) for o in (3, 4, 5)] + [click(1, o) for o in range(6)]),
    'timestamps per partition, maxRecordsPerPartition': (
        {'startingOffsetsByTimestamp': json.dumps({'clicks': {'0': TS0 + 4, '1': TS0 + 9}}),
         'endingOffsetsByTimestamp': json.dumps({'clicks': {'0': TS0 + 100, '1': TS0 + 11}}),
         'maxRecordsPerPartition': '1'},
        4, [click(0, 4), click(0, 5), click(1, 3), click(1, 4)]),
    # clicks-0 has no record at or after TS0+13: it starts (and ends) at latest; its empty range is a task.
    'no record after the timestamp, strategy latest': (
        {'startingTimestamp': str(TS0 + 13), 'startingOffsetsByTimestampStrategy': 'latest'}, 2, [click(1, 7)]),
}


def test_batch_jobs_with_spark_timestamp_options_read_the_window_in_the_planned_tasks(spark, reference_cluster_factory):
    cluster = clicks_cluster(reference_cluster_factory)
    for name, (options, tasks, rows) in CLICKS_JOBS.items():
        frame = clicks_job(spark, 'kafka-kip', cluster, **options)
        assert (name, frame.rdd.getNumPartitions(), rows_of(frame)) == (name, tasks, rows)
    with pytest.raises(Exception) as caught:  # startingOffsetsByTimestampStrategy=error, the default
        clicks_job(spark, 'kafka-kip', cluster, startingTimestamp=str(TS0 + 13)).collect()
    assert (f'OptionError: option startingTimestamp: no record at or after the timestamp in clicks-0 (timestamp '
            f'{TS0 + 13}); set startingOffsetsByTimestampStrategy=latest') in str(caught.value)


def trigger_job(spark: Any, fmt: str, reference_cluster_factory: Callable[..., ReferenceCluster], checkpoint: Path) -> list[list]:
    """A streaming job written for format("kafka") with Spark's trigger options, run on ``fmt`` through a fixed
    scenario; each micro-batch's rows as sorted ``(task, partition, offset[, leaderEpoch])``."""
    from pyspark.sql.functions import spark_partition_id

    cluster = reference_cluster_factory(2)
    cluster.create_topic('events', partitions=2, replication_factor=2)
    produce(cluster, 'events', {0: 4, 1: 4})  # events-0: TS0+0..3, events-1: TS0+4..7
    batches: list[list[tuple]] = []

    def collect(frame: Any, _: int) -> None:
        columns = ['partition', 'offset'] + (['leaderEpoch'] if 'leaderEpoch' in frame.columns else [])
        batches.append(sorted(tuple(r) for r in frame.select(spark_partition_id().alias('task'), *columns).collect()))

    query = (spark.readStream.format(fmt).option('kafka.bootstrap.servers', cluster.bootstrap_servers)
             .option('subscribe', 'events').option('startingTimestamp', str(TS0 + 2))
             .option('maxOffsetsPerTrigger', '4').option('minOffsetsPerTrigger', '3').option('minPartitions', '4')
             .option('failOnDataLoss', 'false').load()
             .writeStream.foreachBatch(stoppable(collect)).option('checkpointLocation', str(checkpoint))
             .trigger(processingTime='200 milliseconds').start())
    try:
        wait_until(lambda: len(batches) == 2, what='two batches')
        tp1 = TopicPartition('events', 1)
        cluster.elect_leader(tp1, [b for b in cluster.replicas(tp1) if b != cluster.leader(tp1)][0])
        produce(cluster, 'events', {0: 2}, first=8)  # 2 new offsets: fewer than minOffsetsPerTrigger
        produce(cluster, 'events', {1: 1}, first=10)  # 3: a batch
        wait_until(lambda: len(batches) == 3, what='the third batch')
    finally:
        query.stop()
    return batches


def test_streaming_job_with_spark_trigger_options(spark, reference_cluster_factory, tmp_path):
    # From TS0+2: events-0 offset 2 on, events-1 offset 0 on (6 offsets). maxOffsetsPerTrigger=4 shares by
    # lag (1 and 2 of them), minPartitions=4 cuts the larger range: (task, partition, offset, leaderEpoch).
    assert trigger_job(spark, 'kafka-kip', reference_cluster_factory, tmp_path / 'checkpoint') == [
        [(0, 0, 2, 0), (1, 1, 0, 0), (2, 1, 1, 0)],
        [(0, 0, 3, 0), (1, 1, 2, 0), (2, 1, 3, 0)],
        [(0, 0, 4, 0), (1, 0, 5, 0), (2, 1, 4, 1)]]  # 2 offsets waited for a third; leader epoch 1 after the election


def test_spark_s_own_connector_runs_the_same_batch_job_texts_to_the_same_rows_and_tasks(spark, spark_kafka, reference_cluster_factory):
    cluster = clicks_cluster(reference_cluster_factory)
    for name, (options, tasks, rows) in CLICKS_JOBS.items():
        spark_frame = clicks_job(spark, spark_kafka, cluster, **options)
        assert spark_frame.columns == clicks_job(spark, 'kafka-kip', cluster, **options).columns[:-1]
        assert (name, spark_frame.rdd.getNumPartitions(), sorted(tuple(r) for r in spark_frame.select(
            'partition', 'offset', 'timestamp', 'value').collect())) == (name, tasks, sorted(
                (p, o, datetime.fromtimestamp((TS0 + n) / 1000), v) for p, o, _, n, v in rows))
    with pytest.raises(Exception, match=f'No offset matched from request of topic-partition clicks-0 and timestamp '
                                        f'{TS0 + 13}'):
        clicks_job(spark, spark_kafka, cluster, startingTimestamp=str(TS0 + 13)).collect()
    # Streaming side by side (the 4.0.0 connector failed on Spark 4.3 with NoSuchMethodError, 4.2.0 runs): on
    # Apache Kafka, test_spark_s_own_connector_and_ours_stream_identical_rows_across_a_restart.


@pytest.mark.parametrize('fail_on_data_loss', ['true', 'false'])
def test_offsets_gone_from_the_log_fail_or_are_skipped_per_fail_on_data_loss(spark, reference_cluster_factory, fail_on_data_loss):
    from kafka_kip.admin import KafkaAdminClient

    cluster = reference_cluster_factory(1)
    cluster.create_topic('t', partitions=1, replication_factor=1)
    produce(cluster, 't', {0: 8})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    admin.delete_records({TopicPartition('t', 0): 5})  # offsets 0..4 are gone
    admin.close()
    frame = read(spark, cluster, subscribe='t', startingOffsets=json.dumps({'t': {'0': 1}}),
                 failOnDataLoss=fail_on_data_loss)
    if fail_on_data_loss == 'true':
        with pytest.raises(Exception) as caught:
            frame.collect()
        assert ('OffsetOutOfRangeError: [Error 1] OffsetOutOfRangeError: source records are no longer in the log '
                '(retention or DeleteRecords): t-0: offsets 1..4 lost (log start offset 5, position was 1)'
                ) in str(caught.value)
    else:
        assert [(r.offset, r.value) for r in frame.collect()] == [(o, b'v%d' % o) for o in (5, 6, 7)]


def test_kafka_group_id_and_group_id_prefix_name_the_executors_group(spark, reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    cluster.create_topic('t', partitions=2, replication_factor=1)
    produce(cluster, 't', {0: 2, 1: 1})
    looked_up: list[str] = []  # the group ids of the FindCoordinator requests the cluster gets

    def record(seen: Any) -> None:  # passes every request on to the broker's handler
        looked_up.extend(seen.request.coordinator_keys if seen.api_version >= 4 else [seen.request.key])

    cluster.control(ApiKey.FindCoordinator, record, keep=True)
    expected = [(0, 0, b'v0'), (0, 1, b'v1'), (1, 0, b'v2')]

    def rows(**options: str) -> list[tuple]:
        return sorted((r.partition, r.offset, r.value) for r in read(spark, cluster, subscribe='t', **options).collect())

    assert rows() == expected and looked_up == []  # no group unless asked for
    assert rows(**{'kafka.group.id': 'acl-readers'}) == expected
    assert sorted(set(looked_up)) == ['acl-readers']
    looked_up.clear()
    assert rows(groupIdPrefix='etl') == expected
    [group] = set(looked_up)  # one generated group for the query's tasks
    assert group.startswith('etl-') and group.endswith('-executor')


def test_a_jobs_sasl_jaas_config_works_unchanged(spark, reference_cluster_factory):
    cluster = reference_cluster_factory(1, users={'alice': 'alice-secret'})
    cluster.create_topic('t', partitions=1, replication_factor=1)
    cluster.create_topic('copy', partitions=1, replication_factor=1)
    security = {'kafka.security.protocol': 'SASL_PLAINTEXT', 'kafka.sasl.mechanism': 'PLAIN',
                'kafka.sasl.jaas.config': 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                          'username="alice" password="alice-secret";'}
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, security_protocol='SASL_PLAINTEXT',
                             sasl_mechanism='PLAIN', sasl_plain_username='alice', sasl_plain_password='alice-secret')
    for n in range(3):
        producer.send('t', value=b'v%d' % n, partition=0)
    producer.flush()
    producer.close()
    frame = read(spark, cluster, subscribe='t', **security)
    (frame.select('value').write.format('kafka-kip').option('kafka.bootstrap.servers', cluster.bootstrap_servers)
     .option('topic', 'copy').options(**security).mode('append').save())
    assert [(r.offset, r.value) for r in cluster.records(TopicPartition('copy', 0))] == [
        (n, b'v%d' % n) for n in range(3)]


@pytest.mark.parametrize('options, named', [
    ({'subscribe': 't', 'subscribePattern': 't.*'}, 'subscribe and subscribePattern'),
    ({}, 'exactly one of the options subscribe, subscribePattern, assign'),
    ({'subscribe': 't', 'startingOffset': 'earliest'}, "unknown option 'startingoffset'"),
    ({'subscribe': 't', 'startingOffsets': '{"t": {"0": 1'}, 'option startingOffsets must be'),
    ({'subscribe': 't', 'endingOffsets': '{"t": {"zero": 1}}'}, "option endingOffsets: topic 't' has a partition key"),
    ({'subscribe': 't', 'onTruncation': 'ignore'}, "option onTruncation must be one of stop, fail, none, closest (fail, none: stop), got 'ignore'"),
    ({'subscribe': 't', 'kafka.auto.offset.reset': 'earliest'}, 'option kafka.auto.offset.reset is not supported'),
    ({'subscribe': 't', 'maxRecordsPerPartition': '0'}, 'option maxRecordsPerPartition must be a positive'),
    ({'assign': '{"t": [0, "x"]}'}, 'option assign must map topics'),
])
def test_bad_options_fail_at_load_naming_the_option(spark, options, named):
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException) as caught:
        spark.read.format('kafka-kip').option('kafka.bootstrap.servers', '127.0.0.1:1').options(**options).load()
    assert 'OptionError' in str(caught.value)
    assert named in str(caught.value)




@pytest.mark.parametrize('options, named', [
    ({'subscribe': 't'}, 'option target.bootstrap.servers is required'),
    ({'subscribe': 't', 'target.bootstrap.servers': 'h:1', 'maxRecordsPerPartition': '5'},
     'option maxRecordsPerPartition (a partition is copied in order, by one task per batch) is not supported'),
    ({'subscribe': 't', 'target.bootstrap.servers': 'h:1', 'offsetMode': 'sometimes'},
     "option offsetMode must be one of auto, broker, checked, translated (as kafka-kip mirror; 'off' is translated), "
     "got 'sometimes'"),
    ({'subscribe': 't', 'target.bootstrap.servers': 'h:1', 'target.acks': '1'}, 'option target.acks is not a'),
])
def test_bad_mirror_options_fail_at_load_naming_the_option(spark, options, named):
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException) as caught:
        (spark.readStream.format('kafka-kip-mirror').option('kafka.bootstrap.servers', '127.0.0.1:1')
         .options(**options).load())
    assert named in str(caught.value)
