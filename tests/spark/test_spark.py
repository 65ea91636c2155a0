"""The ``kafka-kip`` Spark data source and ``spark-mirror`` against reference clusters (local[2] Spark).

One SparkSession serves every test here (the ``spark`` fixture of conftest.py; starting one takes seconds); Python
workers are separate processes and reach the in-process reference clusters over 127.0.0.1.
"""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.api_key import ApiKey

pytestmark = pytest.mark.skipif(shutil.which('java') is None, reason='Spark needs java on PATH')
pyspark = pytest.importorskip('pyspark')

import kafka_kip  # noqa: E402
from kafka_kip import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka_kip.spark import stoppable  # noqa: E402
from kafka_kip_reference import ReferenceCluster  # noqa: E402
from kafka_kip_reference.fixtures import conditions  # noqa: E402

TS0 = 1_700_000_000_000
@pytest.fixture
def clusters() -> Iterator[Callable[..., ReferenceCluster]]:
    started: list[ReferenceCluster] = []

    def start(brokers: int = 3, **kwargs: Any) -> ReferenceCluster:
        cluster = ReferenceCluster(brokers, **kwargs).start()
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.close()


def produce(cluster: Any, topic: str, counts: dict[int, int], first: int = 0, batch_per_record: bool = False) -> None:
    """``counts[p]`` records into partition ``p``, numbered from ``first`` (key, value, header, timestamp).

    ``batch_per_record`` sends each record as its own batch (Tansu's ListOffsets is off by a batch otherwise).
    """
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    n = first
    for partition, count in counts.items():
        for _ in range(count):
            sent = producer.send(topic, value=b'v%d' % n, key=b'k%d' % n, partition=partition,
                                 headers=[('n', str(n).encode())], timestamp_ms=TS0 + n)
            if batch_per_record:
                sent.get(timeout=30)
            n += 1
    producer.flush()
    producer.close()


def consume(cluster: ReferenceCluster, tp: TopicPartition) -> list[tuple]:
    """Every record of ``tp`` as ``(offset, key, value, headers, timestamp)``."""
    end = cluster.log_end_offset(tp)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None, enable_auto_commit=False,
                             auto_offset_reset='earliest')
    consumer.assign([tp])
    out: list[tuple] = []
    deadline = time.monotonic() + 20
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for record in consumer.poll(timeout_ms=200).get(tp, ()):
            out.append((record.offset, record.key, record.value, list(record.headers), record.timestamp))
    consumer.close()
    return out


#: Spark jobs start JVM work: a longer deadline than the default.
wait_until = functools.partial(conditions.wait_until, timeout=60)


def read(spark: Any, cluster: ReferenceCluster, **options: str) -> Any:
    return (spark.read.format('kafka-kip').option('kafka.bootstrap.servers', cluster.bootstrap_servers)
            .options(**options).load())


# -- batch read ---------------------------------------------------------------------------------------


def test_batch_read_three_partitions_returns_exactly_the_produced_rows(spark, clusters):
    cluster = clusters(3)
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


def test_batch_read_offset_range_split_and_json_offsets(spark, clusters):
    cluster = clusters(1)
    cluster.create_topic('t', partitions=2, replication_factor=1)
    produce(cluster, 't', {0: 10, 1: 3})
    frame = read(spark, cluster, subscribePattern='t|nothing', maxRecordsPerPartition='4',
                 startingOffsets=json.dumps({'t': {'0': 1, '1': -2}}),
                 endingOffsets=json.dumps({'t': {'0': {'offset': 9, 'leaderEpoch': 0}, '1': -1}}))
    assert frame.rdd.getNumPartitions() == 3  # t-0 [1,5) [5,9) and t-1 [0,3)
    assert sorted((r.partition, r.offset) for r in frame.select('partition', 'offset').collect()) == (
        [(0, o) for o in range(1, 9)] + [(1, o) for o in range(3)])


# -- Spark's option names: a format("kafka") job's text, only the format name changed ----------------


def clicks_cluster(clusters: Callable[..., ReferenceCluster]) -> ReferenceCluster:
    """Topic clicks. Partition 0: offsets 0..5, timestamps TS0+0..5, leader epoch 0. Partition 1: offsets
    0..7, timestamps TS0+6..13, leader epoch 0 up to offset 3 and 1 (a clean election) from offset 4 on.
    Record n has value v<n> and timestamp TS0+n."""
    cluster = clusters(2)
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


def test_batch_jobs_with_spark_timestamp_options_read_the_window_in_the_planned_tasks(spark, clusters):
    cluster = clicks_cluster(clusters)
    for name, (options, tasks, rows) in CLICKS_JOBS.items():
        frame = clicks_job(spark, 'kafka-kip', cluster, **options)
        assert (name, frame.rdd.getNumPartitions(), rows_of(frame)) == (name, tasks, rows)
    with pytest.raises(Exception) as caught:  # startingOffsetsByTimestampStrategy=error, the default
        clicks_job(spark, 'kafka-kip', cluster, startingTimestamp=str(TS0 + 13)).collect()
    assert (f'OptionError: option startingTimestamp: no record at or after the timestamp in clicks-0 (timestamp '
            f'{TS0 + 13}); set startingOffsetsByTimestampStrategy=latest') in str(caught.value)


def trigger_job(spark: Any, fmt: str, clusters: Callable[..., ReferenceCluster], checkpoint: Path) -> list[list]:
    """A streaming job written for format("kafka") with Spark's trigger options, run on ``fmt`` through a fixed
    scenario; each micro-batch's rows as sorted ``(task, partition, offset[, leaderEpoch])``."""
    from pyspark.sql.functions import spark_partition_id

    cluster = clusters(2)
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


def test_streaming_job_with_spark_trigger_options(spark, clusters, tmp_path):
    # From TS0+2: events-0 offset 2 on, events-1 offset 0 on (6 offsets). maxOffsetsPerTrigger=4 shares by
    # lag (1 and 2 of them), minPartitions=4 cuts the larger range: (task, partition, offset, leaderEpoch).
    assert trigger_job(spark, 'kafka-kip', clusters, tmp_path / 'checkpoint') == [
        [(0, 0, 2, 0), (1, 1, 0, 0), (2, 1, 1, 0)],
        [(0, 0, 3, 0), (1, 1, 2, 0), (2, 1, 3, 0)],
        [(0, 0, 4, 0), (1, 0, 5, 0), (2, 1, 4, 1)]]  # 2 offsets waited for a third; leader epoch 1 after the election


def test_spark_s_own_connector_runs_the_same_batch_job_texts_to_the_same_rows_and_tasks(spark, spark_kafka, clusters):
    cluster = clicks_cluster(clusters)
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
def test_offsets_gone_from_the_log_fail_or_are_skipped_per_fail_on_data_loss(spark, clusters, fail_on_data_loss):
    from kafka_kip.admin import KafkaAdminClient

    cluster = clusters(1)
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


def test_kafka_group_id_and_group_id_prefix_name_the_executors_group(spark, clusters):
    cluster = clusters(1)
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


def test_a_jobs_sasl_jaas_config_works_unchanged(spark, clusters):
    cluster = clusters(1, users={'alice': 'alice-secret'})
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

def test_batch_write_plain_and_with_preserved_offsets_is_idempotent(spark, clusters):
    from pyspark.errors import AnalysisException

    source, target = clusters(1), clusters(1)
    source.create_topic('orders', partitions=2, replication_factor=1)
    target.create_topic('orders', partitions=2, replication_factor=1)
    target.create_topic('plain', partitions=1, replication_factor=1)
    produce(source, 'orders', {0: 3, 1: 4})
    frame = read(spark, source, subscribe='orders', includeHeaders='true')

    def copy() -> None:
        (frame.write.format('kafka-kip').option('kafka.bootstrap.servers', target.bootstrap_servers)
         .option('preserveOffsets', 'true').mode('append').save())

    copy()
    copy()  # a re-executed job: every row is already there
    assert_same_logs(source, target, 'orders', 2)

    plain = spark.createDataFrame([('a', 'x'), (None, 'y')], 'key string, value string').coalesce(1)
    (plain.write.format('kafka-kip').option('kafka.bootstrap.servers', target.bootstrap_servers)
     .option('topic', 'plain').mode('append').save())
    assert [(r.offset, r.key, r.value) for r in target.records(TopicPartition('plain', 0))] == [
        (0, b'a', b'x'), (1, None, b'y')]
    with pytest.raises(AnalysisException) as caught:  # as Spark's Kafka sink: a topic is only appended to
        (plain.write.format('kafka-kip').option('kafka.bootstrap.servers', target.bootstrap_servers)
         .option('topic', 'plain').mode('overwrite').save())
    assert 'OptionError: save mode overwrite is not supported' in str(caught.value)
    assert target.log_end_offset(TopicPartition('plain', 0)) == 2


@pytest.mark.parametrize('topic_configs, options, limit', [
    ({}, {'kafka.max.request.size': '2000'}, 'max_request_size'),
    ({'max.message.bytes': '2000'}, {}, "the topic's max.message.bytes"),
])
def test_a_row_over_the_size_limit_fails_the_write_naming_it_and_nothing_after_it_is_written(
        spark, clusters, topic_configs, options, limit):
    target = clusters(1)
    target.create_topic('copy', partitions=1, replication_factor=1, configs=topic_configs)
    frame = spark.createDataFrame([(0, n, 'x' * (3000 if n == 5 else 10)) for n in range(10)],
                                  'partition int, offset long, value string').coalesce(1)
    with pytest.raises(Exception) as caught:
        (frame.write.format('kafka-kip').option('kafka.bootstrap.servers', target.bootstrap_servers)
         .option('topic', 'copy').option('preserveOffsets', 'true').options(**options).mode('append').save())
    assert ('MessageSizeTooLargeError: a row for copy-0 at offset 5 is 3070 bytes as a record batch, over the '
            f'limit of 2000 bytes ({limit}); nothing of it or after it was sent') in str(caught.value)
    assert [r.offset for r in target.records(TopicPartition('copy', 0))] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize('ddl, options, named', [
    ('key string', {'topic': 't'}, "needs a 'value' column"),
    ('value string', {}, "set the option topic or give the DataFrame a 'topic' column"),
    ('value string, partition int', {'topic': 't', 'preserveOffsets': 'true'}, "needs 'partition' and 'offset'"),
    ('value int', {'topic': 't'}, "column 'value' must be binary or string, got int"),
    ('value string', {'topic': 't', 'preserveOffset': 'true'}, "unknown option 'preserveoffset' for the kafka-kip sink"),
])
def test_bad_write_options_and_columns_fail_naming_them(spark, ddl, options, named):
    from pyspark.errors import AnalysisException

    frame = spark.createDataFrame([], ddl)
    with pytest.raises(AnalysisException) as caught:
        frame.write.format('kafka-kip').option('kafka.bootstrap.servers', '127.0.0.1:1').options(**options) \
            .mode('append').save()
    assert 'OptionError' in str(caught.value)
    assert named in str(caught.value)

# -- streaming ----------------------------------------------------------------------------------------


def checkpoint_state(checkpoint: Path) -> tuple[list[int], list[int]]:
    """The batch ids in the checkpoint's offset log and in its commit log."""
    def ids(folder: str) -> list[int]:
        path = checkpoint / folder
        return sorted(int(name) for name in os.listdir(path) if name.isdigit()) if path.exists() else []
    return ids('offsets'), ids('commits')


def idle(checkpoint: Path) -> bool:
    """True when the query's last planned micro-batch is committed (a restart will not run it again)."""
    planned, committed = checkpoint_state(checkpoint)
    return bool(planned) and planned == committed


def start_replication(spark: Any, source: ReferenceCluster, target: ReferenceCluster, checkpoint: Path,
                      **read_options: str) -> Any:
    """Records read from ``source`` and written to ``target`` at their offsets (preserveOffsets)."""
    frame = (spark.readStream.format('kafka-kip').option('kafka.bootstrap.servers', source.bootstrap_servers)
             .option('subscribe', 'orders').option('startingOffsets', 'earliest').option('includeHeaders', 'true')
             .options(**read_options).load())
    return (frame.writeStream.format('kafka-kip').option('kafka.bootstrap.servers', target.bootstrap_servers)
            .option('preserveOffsets', 'true').option('checkpointLocation', str(checkpoint))
            .trigger(processingTime='200 milliseconds').start())


def caught_up(source: ReferenceCluster, target: ReferenceCluster, topic: str, partitions: int) -> Callable[[], bool]:
    def check() -> bool:
        return all(target.log_end_offset(TopicPartition(topic, p)) == source.log_end_offset(TopicPartition(topic, p))
                   for p in range(partitions))
    return check


def assert_same_logs(source: ReferenceCluster, target: ReferenceCluster, topic: str, partitions: int) -> None:
    for p in range(partitions):
        tp = TopicPartition(topic, p)
        copied = consume(target, tp)
        assert copied == consume(source, tp)
        assert [r[0] for r in copied] == list(range(len(copied)))  # every offset once: no duplicate, no gap


def run_replication_scenario(start: Callable[[Path], Any], source: ReferenceCluster, target: ReferenceCluster,
                             checkpoint: Path) -> None:
    """Run, stop, produce, restart; then kill a run in the middle of a micro-batch and restart again.

    The kill: the target topic needs 2 in-sync replicas (acks=all) and partition 1's follower stops
    copying, so that batch writes partitions 0 and 2 and hangs on partition 1 until the query is stopped.
    """
    copied = caught_up(source, target, 'orders', 3)

    def caught() -> bool:
        return copied() and idle(checkpoint)

    produce(source, 'orders', {0: 10, 1: 10, 2: 10})
    query = start(checkpoint)
    wait_until(caught, what='first run to copy 30 records')
    query.stop()

    produce(source, 'orders', {0: 5, 1: 5, 2: 5}, first=100)
    query = start(checkpoint)
    wait_until(caught, what='restarted run to copy 15 more records')
    query.stop()
    assert_same_logs(source, target, 'orders', 3)

    tp1 = TopicPartition('orders', 1)
    follower = [b for b in target.replicas(tp1) if b != target.leader(tp1)][0]
    target.pause_replication(tp1, follower)
    produce(source, 'orders', {0: 7, 1: 7, 2: 7}, first=200)
    query = start(checkpoint)
    wait_until(lambda: all(target.log_end_offset(TopicPartition('orders', p)) == 22 for p in (0, 2)),
               what='partitions 0 and 2 of the third run')
    planned, committed = checkpoint_state(checkpoint)
    assert target.log_end_offset(tp1) == 15 and planned[-1] not in committed  # mid-batch
    query.stop()
    assert (query.status['message'], query.exception()) == ('Stopped', None)  # a clean stop, no stream-thread crash
    target.resume_replication(tp1, follower)
    query = start(checkpoint)  # re-runs the planned batch: partitions 0 and 2 are already there
    wait_until(caught, what='the re-run batch')
    query.stop()
    assert_same_logs(source, target, 'orders', 3)
    assert [target.log_end_offset(TopicPartition('orders', p)) for p in range(3)] == [22, 22, 22]


def replication_clusters(clusters: Callable[..., ReferenceCluster]) -> tuple[ReferenceCluster, ReferenceCluster]:
    source, target = clusters(1), clusters(2)
    source.create_topic('orders', partitions=3, replication_factor=1)
    target.create_topic('orders', partitions=3, replication_factor=2, configs={'min.insync.replicas': '2'})
    return source, target


def test_streaming_replication_with_preserve_offsets_survives_restarts_and_a_killed_batch(spark, clusters, tmp_path):
    source, target = replication_clusters(clusters)
    run_replication_scenario(lambda checkpoint: start_replication(spark, source, target, checkpoint),
                             source, target, tmp_path / 'checkpoint')


def test_spark_mirror_with_foreach_batch_survives_restarts_and_a_batch_stopped_mid_job(spark, clusters, tmp_path):
    from kafka_kip.spark.mirror import start_mirror

    source, target = replication_clusters(clusters)
    rows: list[tuple] = []  # the summary rows of every batch the foreachBatch function saw complete

    def collect(frame: Any, _: int) -> None:
        rows.extend(sorted((r.partition, r.startOffset, r.endOffset, r.records) for r in frame.collect()))

    run_replication_scenario(
        lambda checkpoint: start_mirror(spark, source.bootstrap_servers, target.bootstrap_servers, 'orders',
                                        str(checkpoint), trigger_interval_s=0.2, foreach_batch=collect),
        source, target, tmp_path / 'checkpoint')
    # Two runs' batches, then the batch stopped mid-job, run again whole: partitions 0 and 2 were already
    # there (0 records written); partition 1's 7 records were written by this run or by the stopped run's
    # task, whose produce retries can still land once replication resumes (the logs are equal either way).
    assert rows[:6] == [(p, 0, 10, 10) for p in range(3)] + [(p, 10, 15, 5) for p in range(3)]
    assert [r[:3] for r in rows[6:]] == [(p, 15, 22) for p in range(3)] and rows[6][3] == rows[8][3] == 0


def test_stoppable_turns_an_interrupted_batch_into_an_error_spark_s_stop_check_recognises(spark):
    """The cause of the StackOverflowError on stop, and the fix, with Spark's own regex (StreamExecution.PROXY_ERROR)."""
    import threading

    from py4j.protocol import Py4JJavaError

    from kafka_kip.spark.stopping import BatchInterrupted

    context = spark.sparkContext
    raised: list[BaseException] = []

    def slow_batch(frame: Any, _: int) -> None:
        frame.sparkSession.range(1).selectExpr("java_method('java.lang.Thread', 'sleep', 60000L)").collect()

    def run(batch_function: Callable[[Any, int], None], group: str, by_tag: bool = False) -> BaseException:
        def batch() -> None:
            context.setJobGroup(group, 'a micro-batch', interruptOnCancel=True)
            context.addJobTag(group)
            try:
                batch_function(spark.range(1), 7)
            except Exception as exc:
                raised.append(exc)
            finally:
                context.removeJobTag(group)

        thread = threading.Thread(target=batch)
        thread.start()
        wait_until(lambda: bool(context.statusTracker().getJobIdsForGroup(group)), what='the job')
        if by_tag:  # how StreamingQuery.stop() cancels the query's jobs in Spark 4.3
            context._jsc.sc().cancelJobsWithTag(group, f'Query {group} was stopped')
        else:
            context.cancelJobGroup(group)
        thread.join()
        return raised.pop()

    proxy_error = getattr(spark._jvm, 'org.apache.spark.sql.execution.streaming.runtime.StreamExecution').PROXY_ERROR()
    raw = run(slow_batch, 'kip-stop-test-1')
    assert isinstance(raw, Py4JJavaError)
    text = ''.join(traceback.format_exception(raw))  # what py4j hands back to the stream thread
    assert len(text) > 4000  # it carries the whole Java stack trace
    with pytest.raises(Py4JJavaError) as overflow:  # Spark's check on such a text
        proxy_error.findFirstIn(text)
    assert overflow.value.java_exception.getClass().getName() == 'java.lang.StackOverflowError'

    short = run(stoppable(slow_batch), 'kip-stop-test-2')
    assert isinstance(short, BatchInterrupted)
    assert re.fullmatch(r'py4j\.protocol\.Py4JJavaError: An error occurred while calling o\d+\.collectToPython\. '
                        r'java\.lang\.InterruptedException: micro-batch 7 was interrupted \(\[SPARK_JOB_CANCELLED\] '
                        r'Job \d+ cancelled part of cancelled job group kip-stop-test-2 SQLSTATE: XXKDA\), e\.g\. by '
                        r'StreamingQuery\.stop\(\)', str(short))
    assert proxy_error.findFirstIn(str(short)).isDefined()  # Spark counts it as a stop

    by_tag = run(stoppable(slow_batch), 'kip-stop-test-3', by_tag=True)
    assert isinstance(by_tag, BatchInterrupted)
    assert re.fullmatch(r'py4j\.protocol\.Py4JJavaError: An error occurred while calling o\d+\.collectToPython\. '
                        r'java\.lang\.InterruptedException: micro-batch 7 was interrupted \(\[SPARK_JOB_CANCELLED\] '
                        r'Job \d+ cancelled Query kip-stop-test-3 was stopped SQLSTATE: XXKDA\), e\.g\. by '
                        r'StreamingQuery\.stop\(\)', str(by_tag))
    assert proxy_error.findFirstIn(str(by_tag)).isDefined()


def start_collecting(spark: Any, cluster: ReferenceCluster, checkpoint: Path, rows: list, **options: str) -> Any:
    """A streaming read of topic ``events`` whose rows are appended to ``rows`` as (offset, leaderEpoch, value)."""
    frame = (spark.readStream.format('kafka-kip').option('kafka.bootstrap.servers', cluster.bootstrap_servers)
             .option('subscribe', 'events').option('startingOffsets', 'earliest').options(**options).load())
    return (frame.select('offset', 'leaderEpoch', 'value').writeStream
            .foreachBatch(stoppable(lambda batch, _: rows.extend(tuple(r) for r in batch.collect())))
            .option('checkpointLocation', str(checkpoint)).trigger(processingTime='200 milliseconds').start())


@pytest.mark.parametrize('fail_on_data_loss', ['true', 'false'])
def test_restart_after_unclean_election_fails_or_resumes_at_the_truncation_offset(spark, clusters, tmp_path,
                                                                                  fail_on_data_loss):
    from pyspark.errors import StreamingQueryException

    cluster = clusters(3)
    cluster.create_topic('events', partitions=1, replication_factor=3)
    tp = TopicPartition('events', 0)
    produce(cluster, 'events', {0: 10})
    lagging = [b for b in cluster.replicas(tp) if b != cluster.leader(tp)][0]
    cluster.pause_replication(tp, lagging)
    produce(cluster, 'events', {0: 5}, first=10)  # offsets 10..14 only on the leader and one follower
    rows: list[tuple] = []
    checkpoint = tmp_path / 'checkpoint'
    query = start_collecting(spark, cluster, checkpoint, rows, failOnDataLoss=fail_on_data_loss)
    wait_until(lambda: len(rows) >= 15 and idle(checkpoint), what='15 rows')
    query.stop()
    assert rows == [(o, 0, b'v%d' % o) for o in range(15)]

    cluster.elect_leader(tp, lagging, unclean=True)  # leader epoch 1, log truncated to offset 10
    produce(cluster, 'events', {0: 3}, first=50)  # offsets 10..12 in epoch 1
    rows.clear()
    query = start_collecting(spark, cluster, checkpoint, rows, failOnDataLoss=fail_on_data_loss)
    if fail_on_data_loss == 'true':
        with pytest.raises(StreamingQueryException) as caught:
            query.awaitTermination(60)
        assert ('TruncatedPartitionError: source log truncated (unclean leader election?): events-0: offsets 10..14 '
                'lost (log truncated at 10, position was 15)') in str(caught.value)
        assert rows == []
    else:
        wait_until(lambda: len(rows) >= 3 and idle(checkpoint), what='3 rows after the truncation')
        query.stop()
        assert rows == [(10, 1, b'v50'), (11, 1, b'v51'), (12, 1, b'v52')]


def test_restart_after_topic_recreation_fails_with_invalid_partition_epoch(spark, clusters, tmp_path):
    from pyspark.errors import StreamingQueryException

    cluster = clusters(1)
    cluster.create_topic('events', partitions=1, replication_factor=1)
    produce(cluster, 'events', {0: 4})
    rows: list[tuple] = []
    checkpoint = tmp_path / 'checkpoint'
    query = start_collecting(spark, cluster, checkpoint, rows)
    wait_until(lambda: len(rows) >= 4 and idle(checkpoint), what='4 rows')
    query.stop()
    old_topic_id = cluster.topic_id('events')
    cluster.delete_topic('events')
    cluster.create_topic('events', partitions=1, replication_factor=1)
    produce(cluster, 'events', {0: 6})
    query = start_collecting(spark, cluster, checkpoint, rows)
    with pytest.raises(StreamingQueryException) as caught:
        query.awaitTermination(60)
    assert ('InvalidPartitionEpochError: events-0 at offset 4 with epochs (partition epoch 1, leader epoch 0, '
            f'topic id {old_topic_id}) belongs to another incarnation of the partition than this cluster\'s '
            f'(partition epoch 3, leader epoch 0, topic id {cluster.topic_id("events")}): the source topic was '
            'deleted and recreated') in str(caught.value)
    assert len(rows) == 4


@pytest.mark.parametrize('on_truncation', ['fail', 'closest'])
def test_cli_spark_mirror_copies_then_handles_a_source_truncation(spark, clusters, tmp_path, capsys, on_truncation):
    from kafka_kip.cli import main

    source, target = clusters(3), clusters(1)
    source.create_topic('orders', partitions=2, replication_factor=3)
    tp = TopicPartition('orders', 0)
    lagging = [b for b in source.replicas(tp) if b != source.leader(tp)][0]
    source.pause_replication(tp, lagging)
    produce(source, 'orders', {0: 6, 1: 4})
    argv = ['spark-mirror', '--source', source.bootstrap_servers, '--target', target.bootstrap_servers,
            '--topics', 'ord.*', '--checkpoint', str(tmp_path / 'checkpoint'), '--available-now', '--quiet',
            '--on-truncation', on_truncation]
    assert main(argv) == 0
    assert target.topic_id('orders') is not None  # created like the source: 2 partitions
    assert_same_logs(source, target, 'orders', 2)

    source.elect_leader(tp, lagging, unclean=True)  # orders-0 loses offsets 0..5
    produce(source, 'orders', {0: 2}, first=50)
    if on_truncation == 'fail':
        assert main(argv) == 1
        assert ('kafka_kip.errors.TruncatedPartitionError: [Error 10006] TruncatedPartitionError: source log '
                'truncated (unclean leader election?): orders-0: offsets 0..5 lost (log truncated at 0, position '
                'was 6)' in capsys.readouterr().err)
        assert [r.value for r in target.records(tp)] == [b'v%d' % n for n in range(6)]
    else:
        # The same query, its summary rows collected: the batch continues at offset 0, after the target's end
        # (which keeps the lost records), and says so.
        rows: list[Any] = []
        (spark.readStream.format('kafka-kip-mirror').option('kafka.bootstrap.servers', source.bootstrap_servers)
         .option('target.bootstrap.servers', target.bootstrap_servers).option('subscribePattern', 'ord.*')
         .option('startingOffsets', 'earliest').option('onTruncation', 'closest').option('offsetMode', 'auto')
         .option('topicPrefix', '').load().writeStream.foreachBatch(lambda frame, _: rows.extend(frame.collect()))
         .option('checkpointLocation', str(tmp_path / 'checkpoint')).trigger(availableNow=True).start()
         .awaitTermination())
        [row] = [r for r in rows if r.partition == 0]
        assert (row.startOffset, row.endOffset, row.records) == (0, 2, 2)
        [incident] = row.incidents  # the copier's report: it compared the target with the source
        assert incident.startswith('truncation: orders-0: the source truncated its log at offset 0 ')
        assert incident.endswith("continuing from the truncation point in translated mode: the source's records "
                                 'from 0 on follow at target offset 6, their offsets in the offset map (the '
                                 "partition's offsets cannot equal the source's again)")
        produce(source, 'orders', {0: 6}, first=60)  # source offsets 2..7
        assert main(argv) == 0
        assert [(r.offset, r.value) for r in target.records(tp)] == [
            (n, b'v%d' % n) for n in range(6)] + [(6, b'v50'), (7, b'v51')] + [(8 + n, b'v6%d' % n) for n in range(6)]


def test_cli_spark_mirror_translates_offsets_onto_a_stock_target_exactly_across_runs(spark, clusters, tmp_path):
    from kafka_kip.cli import main
    from kafka_kip.mirror import Run
    from kafka_kip.mirror.translate import OffsetTranslator

    source, target = clusters(1), clusters(1, features=())
    source.create_topic('orders', partitions=1, replication_factor=1)
    tp = TopicPartition('orders', 0)
    produce(source, 'orders', {0: 30})
    admin = kafka_kip.admin.KafkaAdminClient(bootstrap_servers=source.bootstrap_servers)
    try:
        admin.delete_records({tp: 10})  # the source starts at 10
    finally:
        admin.close()
    argv = ['spark-mirror', '--source', source.bootstrap_servers, '--target', target.bootstrap_servers,
            '--topics', 'orders', '--checkpoint', str(tmp_path / 'checkpoint'), '--available-now', '--quiet',
            '--offset-mode', 'translated']
    assert main(argv) == 0
    produce(source, 'orders', {0: 5}, first=30)
    assert main(argv) == 0  # a second query run resumes from the checkpoint and the offset map
    assert [(r.offset, r.value) for r in target.records(tp)] == [(n - 10, b'v%d' % n) for n in range(10, 35)]
    with OffsetTranslator(target.bootstrap_servers) as translator:
        assert translator.maps[tp].runs == [Run(10, 0, 25)]
        assert translator.translate(tp, 17) == (tp, 7)


# -- stock brokers: the reference cluster with its extensions off, and Tansu ------------------------------


class StockBroker:
    """A broker without kafka-kip's extensions, driven through clients only (as any Kafka cluster)."""

    def __init__(self, name: str, bootstrap_servers: str) -> None:
        self.name = name
        self.bootstrap_servers = bootstrap_servers

    def _admin(self) -> Any:
        from kafka_kip.admin import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap_servers)

    def create_topic(self, name: str, partitions: int) -> None:
        from kafka.errors import TopicAlreadyExistsError

        from kafka_kip.admin import NewTopic

        admin = self._admin()
        try:
            def created() -> bool:  # a topic being deleted still exists for a moment on some brokers
                try:
                    admin.create_topics([NewTopic(name, partitions, 1)])
                except TopicAlreadyExistsError:
                    return False
                return True
            wait_until(created, what=f'topic {name} created')
        finally:
            admin.close()

    def delete_topic(self, name: str) -> None:
        admin = self._admin()
        try:
            admin.delete_topics([name])
        finally:
            admin.close()

    def topic_id(self, name: str) -> str:
        admin = self._admin()
        try:
            [topic] = admin.describe_topics([name])
            return str(topic['topic_id'])
        finally:
            admin.close()

    def records(self, tp: TopicPartition) -> list[tuple]:
        """``(offset, key, value, headers, timestamp)`` of every record of ``tp``, up to its high watermark.

        The high watermark comes from a Fetch: Tansu 0.6 answers ListOffsets(latest) with its last batch's
        base offset + 1.
        """
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset='earliest')
        out: list[tuple] = []

        def read_all() -> bool:
            out.extend((r.offset, r.key, r.value, list(r.headers), r.timestamp)
                       for r in consumer.poll(timeout_ms=200).get(tp, ()))
            end = consumer.highwater(tp)
            return end is not None and consumer.position(tp) >= end

        try:
            consumer.assign([tp])
            wait_until(read_all, what=f'the records of {tp}')
            return out
        finally:
            consumer.close()


@pytest.fixture(params=['reference cluster, features off', 'tansu'])
def stock_broker(request: Any) -> Iterator[StockBroker]:
    if request.param == 'tansu':
        tansu = pytest.importorskip('integration.tansu')
        try:
            tansu.tansu_binary()
        except FileNotFoundError as exc:
            pytest.skip(str(exc))
        with tansu.TansuBroker() as broker:
            yield StockBroker(request.param, broker.bootstrap_servers)
    else:
        with ReferenceCluster(1, features=()) as cluster:
            yield StockBroker(request.param, cluster.bootstrap_servers)


def test_stock_broker_restart_after_topic_recreation_is_caught_through_the_topic_id(spark, stock_broker, tmp_path):
    from pyspark.errors import StreamingQueryException

    stock_broker.create_topic('events', 1)
    produce(stock_broker, 'events', {0: 4}, batch_per_record=True)
    rows: list[tuple] = []
    checkpoint = tmp_path / 'checkpoint'
    query = start_collecting(spark, stock_broker, checkpoint, rows)
    wait_until(lambda: len(rows) >= 4 and idle(checkpoint), what='4 rows')
    query.stop()
    [stored] = [json.loads(line) for line in (checkpoint / 'offsets' / '0').read_text().splitlines()[2:]]
    position = stored['events']['0']
    assert (position['offset'], position['partitionEpoch']) == (4, -1) and len(position['topicId']) == 36

    stock_broker.delete_topic('events')
    stock_broker.create_topic('events', 1)
    produce(stock_broker, 'events', {0: 6}, batch_per_record=True)
    query = start_collecting(spark, stock_broker, checkpoint, rows)
    with pytest.raises(StreamingQueryException) as caught:
        query.awaitTermination(60)
    assert (f"InvalidPartitionEpochError: events-0 at offset 4 with epochs (leader epoch 0, topic id "
            f"{position['topicId']}) belongs to another incarnation of the partition than this cluster's (leader "
            f"epoch 0, topic id {stock_broker.topic_id('events')}): the source topic was deleted and recreated"
            ) in str(caught.value)
    assert len(rows) == 4


def test_stock_broker_preserve_offsets_writes_in_checked_mode(spark, stock_broker):
    for topic, partitions in (('orders', 2), ('copy', 2), ('gap', 1)):
        stock_broker.create_topic(topic, partitions)
    produce(stock_broker, 'orders', {0: 3, 1: 4}, batch_per_record=True)
    frame = read(spark, stock_broker, subscribe='orders', includeHeaders='true')

    def copy(rows: Any, topic: str, **options: str) -> None:
        (rows.write.format('kafka-kip').option('kafka.bootstrap.servers', stock_broker.bootstrap_servers)
         .option('topic', topic).option('preserveOffsets', 'true').options(**options).mode('append').save())

    copy(frame, 'copy', **{'kafka.offset.mode': 'checked'})
    copy(frame, 'copy', **{'kafka.offset.mode': 'checked'})  # a re-executed job: every row is already there
    for p in range(2):
        tp = TopicPartition('orders', p)
        assert stock_broker.records(TopicPartition('copy', p)) == stock_broker.records(tp)
    assert [len(stock_broker.records(TopicPartition('copy', p))) for p in range(2)] == [3, 4]

    with pytest.raises(Exception) as caught:  # offsets the broker would have to place: refused, nothing written
        copy(frame.where('partition = 0'), 'gap')
    assert ("kafka_kip.errors.UnsupportedFeatureError: [Error 10007] UnsupportedFeatureError: Broker "
            in str(caught.value))
    assert "did not advertise feature 'kip.391' in ApiVersionsResponse SupportedFeatures" in str(caught.value)
    gapped = spark.createDataFrame([(0, 10, 'a'), (0, 11, 'b')], 'partition int, offset long, value string')
    with pytest.raises(Exception) as caught:  # a stock broker cannot leave offsets 0..9 out
        copy(gapped.coalesce(1), 'gap', **{'kafka.offset.mode': 'checked'})
    assert ("InvalidProduceOffsetError: [Error 10002] InvalidProduceOffsetError: cannot write records at offsets "
            "10-11 of TopicPartition(topic='gap', partition=0) (checked offset mode): the broker does not implement "
            "KIP-391, and a stock broker cannot leave a gap: it appends at its log end offset 0") in str(caught.value)
    assert stock_broker.records(TopicPartition('gap', 0)) == []


# -- side by side with Spark's own connector on Apache Kafka (issue 22) ---------------------------------------

def _sbs_topic(apache_kafka: Any) -> tuple[str, list[tuple]]:
    """A fresh 2-partition topic on Apache Kafka: record n (0..19) in partition n % 2, key k<n> (none for n % 5
    == 4), value v<n>, headers n=<n> (two for n % 3 == 0), timestamp TS0 + n. Returns the name and the rows as
    Spark's connector should give them: (topic, partition, offset, timestamp ms, timestampType, key, value,
    headers)."""
    import uuid

    topic = f'sbs-{uuid.uuid4().hex[:8]}'
    apache_kafka.create_topic(topic, partitions=2, config={'retention.ms': -1})  # TS0 is years past 7 days
    producer = KafkaProducer(bootstrap_servers=apache_kafka.bootstrap_servers, acks='all')
    rows = []
    for n in range(20):
        headers = [('n', str(n).encode())] + ([('three', b'')] if n % 3 == 0 else [])
        key = None if n % 5 == 4 else b'k%d' % n
        sent = producer.send(topic, value=b'v%d' % n, key=key, partition=n % 2, headers=headers, timestamp_ms=TS0 + n)
        rows.append((topic, n % 2, sent.get(timeout=30).offset, TS0 + n, 0, key, b'v%d' % n, headers))
    producer.close()
    return topic, rows


def _spark_rows(frame: Any) -> list[tuple]:
    return sorted((r.topic, r.partition, r.offset, round(r.timestamp.timestamp() * 1000), r.timestampType, r.key,
                   r.value, None if r.headers is None else [(h.key, h.value) for h in r.headers])
                  for r in frame.collect())


def test_spark_s_own_connector_and_ours_read_identical_rows_from_apache_kafka(spark, spark_kafka, apache_kafka):
    topic, rows = _sbs_topic(apache_kafka)
    jobs = {  # Spark's options -> the expected rows (record numbers)
        'offsets JSON': ({'startingOffsets': json.dumps({topic: {'0': 2, '1': -2}}),
                          'endingOffsets': json.dumps({topic: {'0': 7, '1': -1}})},
                         [n for n in range(20) if n % 2 or 4 <= n < 14]),
        'timestamps JSON': ({'startingOffsetsByTimestamp': json.dumps({topic: {'0': TS0 + 5, '1': TS0 + 3}}),
                             'endingOffsetsByTimestamp': json.dumps({topic: {'0': TS0 + 12, '1': TS0 + 100}})},
                            [n for n in range(20) if (n % 2 == 0 and 5 <= n < 12) or (n % 2 and n >= 3)]),
        'one timestamp': ({'startingTimestamp': str(TS0 + 15)}, list(range(15, 20))),
    }
    for name, (options, numbers) in jobs.items():
        frames = {fmt: (spark.read.format(fmt).option('kafka.bootstrap.servers', apache_kafka.bootstrap_servers)
                        .option('subscribe', topic).option('includeHeaders', 'true').options(**options).load())
                  for fmt in (spark_kafka, 'kafka-kip')}
        assert frames['kafka-kip'].columns == frames[spark_kafka].columns + ['leaderEpoch'], name
        expected = sorted(rows[n] for n in numbers)
        assert (name, _spark_rows(frames[spark_kafka])) == (name, expected)
        assert (name, _spark_rows(frames['kafka-kip'])) == (name, expected)


def test_a_dataframe_written_by_spark_s_sink_and_by_ours_reads_back_identical(spark, spark_kafka, apache_kafka):
    """Keyed rows without a partition land where Spark's sink (the Java client's partitioner) puts them."""
    import uuid

    from kafka_kip._codec._encoder import key_partition

    rows = [(None if n % 5 == 4 else f'k{n}', f'v{n}', n % 3 if n % 5 == 4 or n % 7 == 0 else None,
             [('n', str(n).encode())] if n % 2 else None, datetime.fromtimestamp((TS0 + n) / 1000))
            for n in range(40)]
    frame = spark.createDataFrame(rows, 'key string, value string, partition int, '
                                        'headers array<struct<key: string, value: binary>>, timestamp timestamp')
    read_back = {}
    for fmt in (spark_kafka, 'kafka-kip'):
        topic = f'written-{uuid.uuid4().hex[:8]}'
        apache_kafka.create_topic(topic, partitions=3, config={'retention.ms': -1})
        (frame.coalesce(1).write.format(fmt).option('kafka.bootstrap.servers', apache_kafka.bootstrap_servers)
         .option('topic', topic).mode('append').save())
        written = (spark.read.format('kafka-kip').option('kafka.bootstrap.servers', apache_kafka.bootstrap_servers)
                   .option('subscribe', topic).option('includeHeaders', 'true').load())
        read_back[fmt] = [row[1:] for row in _spark_rows(written)]
    # Spark's 4.2.0 sink wrote 1796182136496 for the first row's timestamp column (TS0): compared apart
    assert [row[2] for row in read_back['kafka-kip']] == [TS0 + int(row[5][1:]) for row in read_back['kafka-kip']]
    assert ([row[:2] + row[3:] for row in read_back['kafka-kip']]
            == [row[:2] + row[3:] for row in read_back[spark_kafka]])
    partitions = {row[5]: row[0] for row in read_back['kafka-kip']}
    assert partitions == {f'v{n}'.encode(): rows[n][2] if rows[n][2] is not None else key_partition(rows[n][0].encode(), 3)
                          for n in range(40)}
    assert len(read_back['kafka-kip']) == 40


def _available_now(spark: Any, fmt: str, bootstrap: str, topic: str, checkpoint: Path) -> list[tuple]:
    """The rows a streaming job (written for format("kafka")) with Trigger.AvailableNow and a checkpoint reads."""
    rows: list[tuple] = []
    (spark.readStream.format(fmt).option('kafka.bootstrap.servers', bootstrap).option('subscribe', topic)
     .option('startingOffsets', 'earliest').option('includeHeaders', 'true').load()
     .writeStream.foreachBatch(lambda frame, _: rows.extend(_spark_rows(frame)))
     .option('checkpointLocation', str(checkpoint)).trigger(availableNow=True).start().awaitTermination())
    return sorted(rows)


def test_spark_s_own_connector_and_ours_stream_identical_rows_across_a_restart(spark, spark_kafka, apache_kafka,
                                                                               tmp_path):
    topic, rows = _sbs_topic(apache_kafka)
    first = {fmt: _available_now(spark, fmt, apache_kafka.bootstrap_servers, topic, tmp_path / fmt)
             for fmt in (spark_kafka, 'kafka-kip')}
    producer = KafkaProducer(bootstrap_servers=apache_kafka.bootstrap_servers, acks='all')
    for n in range(20, 26):  # without headers: Spark's column is null then, not an empty array
        sent = producer.send(topic, value=b'v%d' % n, key=b'k%d' % n, partition=n % 2, timestamp_ms=TS0 + n)
        rows.append((topic, n % 2, sent.get(timeout=30).offset, TS0 + n, 0, b'k%d' % n, b'v%d' % n, None))
    producer.close()
    second = {fmt: _available_now(spark, fmt, apache_kafka.bootstrap_servers, topic, tmp_path / fmt)
              for fmt in (spark_kafka, 'kafka-kip')}
    for fmt in (spark_kafka, 'kafka-kip'):  # the restart reads only what was added: nothing twice, nothing lost
        assert (fmt, first[fmt], second[fmt]) == (fmt, sorted(rows[:20]), sorted(rows[20:]))
