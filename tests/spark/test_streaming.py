"""Streaming queries with ``format("kafka-kip")``: replication with preserved offsets and the foreachBatch
mirror through restarts and a batch stopped mid-job, a clean stop of a running batch, restarts after an
unclean election or a recreated topic.
"""
from __future__ import annotations

import re
import shutil
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(shutil.which('java') is None, reason='Spark needs java on PATH')
pytest.importorskip('pyspark')

from kafka_kip import TopicPartition  # noqa: E402
from kafka_kip.spark import stoppable  # noqa: E402
from kafka_kip_reference import ReferenceCluster  # noqa: E402
from tests.spark.helpers import (  # noqa: E402
    assert_same_logs,
    checkpoint_state,
    idle,
    produce,
    start_collecting,
    wait_until,
)


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


def run_replication_scenario(start: Callable[[Path], Any], source: ReferenceCluster, target: ReferenceCluster,
                             checkpoint: Path) -> None:
    """Run and stop; restart with new records and kill that run in the middle of its micro-batch; restart again
    with more records: the planned batch runs again, then the next one.

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
    assert_same_logs(source, target, 'orders', 3)

    tp1 = TopicPartition('orders', 1)
    follower = [b for b in target.replicas(tp1) if b != target.leader(tp1)][0]
    target.pause_replication(tp1, follower)
    produce(source, 'orders', {0: 5, 1: 5, 2: 5}, first=100)
    query = start(checkpoint)  # plans its batch from the first run's committed offsets
    wait_until(lambda: all(target.log_end_offset(TopicPartition('orders', p)) == 15 for p in (0, 2)),
               what='partitions 0 and 2 of the restarted run')
    planned, committed = checkpoint_state(checkpoint)
    assert target.log_end_offset(tp1) == 10 and planned[-1] not in committed  # mid-batch
    query.stop()
    assert (query.status['message'], query.exception()) == ('Stopped', None)  # a clean stop, no stream-thread crash
    target.resume_replication(tp1, follower)
    produce(source, 'orders', {0: 7, 1: 7, 2: 7}, first=200)
    query = start(checkpoint)  # re-runs the planned batch (partitions 0 and 2 are already there), then the next
    wait_until(caught, what='the re-run batch and the next one')
    query.stop()
    assert_same_logs(source, target, 'orders', 3)
    assert [target.log_end_offset(TopicPartition('orders', p)) for p in range(3)] == [22, 22, 22]


def replication_clusters(reference_cluster_factory: Callable[..., ReferenceCluster]) -> tuple[ReferenceCluster, ReferenceCluster]:
    source, target = reference_cluster_factory(1), reference_cluster_factory(2)
    source.create_topic('orders', partitions=3, replication_factor=1)
    target.create_topic('orders', partitions=3, replication_factor=2, configs={'min.insync.replicas': '2'})
    return source, target


def test_streaming_replication_with_preserve_offsets_survives_restarts_and_a_killed_batch(spark, reference_cluster_factory, tmp_path):
    source, target = replication_clusters(reference_cluster_factory)
    run_replication_scenario(lambda checkpoint: start_replication(spark, source, target, checkpoint),
                             source, target, tmp_path / 'checkpoint')


def test_spark_mirror_with_foreach_batch_survives_restarts_and_a_batch_stopped_mid_job(spark, reference_cluster_factory, tmp_path):
    from kafka_kip.spark.mirror import start_mirror

    source, target = replication_clusters(reference_cluster_factory)
    rows: list[tuple] = []  # the summary rows of every batch the foreachBatch function saw complete

    def collect(frame: Any, _: int) -> None:
        rows.extend(sorted((r.partition, r.startOffset, r.endOffset, r.records) for r in frame.collect()))

    run_replication_scenario(
        lambda checkpoint: start_mirror(spark, source.bootstrap_servers, target.bootstrap_servers, 'orders',
                                        str(checkpoint), trigger_interval_s=0.2, foreach_batch=collect),
        source, target, tmp_path / 'checkpoint')
    # The first run's batch, then the batch stopped mid-job, run again whole: partitions 0 and 2 were already
    # there (0 records written); partition 1's 5 records were written by this run or by the stopped run's
    # task, whose produce retries can still land once replication resumes (the logs are equal either way).
    # Then the next batch, planned after the re-run one.
    assert rows[:3] == [(p, 0, 10, 10) for p in range(3)]
    assert [r[:3] for r in rows[3:6]] == [(p, 10, 15) for p in range(3)] and rows[3][3] == rows[5][3] == 0
    assert rows[6:] == [(p, 15, 22, 7) for p in range(3)]


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


@pytest.mark.parametrize('fail_on_data_loss', ['true', 'false'])
def test_restart_after_unclean_election_fails_or_resumes_at_the_truncation_offset(spark, reference_cluster_factory, tmp_path,
                                                                                  fail_on_data_loss):
    from pyspark.errors import StreamingQueryException

    cluster = reference_cluster_factory(3)
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


def test_restart_after_topic_recreation_fails_with_invalid_partition_epoch(spark, reference_cluster_factory, tmp_path):
    from pyspark.errors import StreamingQueryException

    cluster = reference_cluster_factory(1)
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
