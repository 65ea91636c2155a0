"""Spark's own Kafka source and ``format("kafka-kip")`` restarted after data loss on Apache Kafka (issue 22).

A ``Trigger.AvailableNow`` query with a checkpoint reads partition 0 of a topic, on each format. Then the
partition loses records the queries read -- an unclean leader election on the session's 3-broker cluster, or
the topic deleted and recreated -- and each query is restarted from a copy of its checkpoint with
``failOnDataLoss=true`` and with ``=false`` (the four restarts at once): first while the new log still ends
below the checkpointed position ("short"), then, from fresh copies, once new records reach past it ("long").

Spark's connector is asserted as it behaves: the contrast README.md tabulates. Ours names the lost offsets
(``TruncatedPartitionError``) or the other incarnation (``InvalidPartitionEpochError``), and with
``failOnDataLoss=false`` continues at the truncation point.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import pytest

pytestmark = pytest.mark.skipif(shutil.which('java') is None, reason='Spark needs java on PATH')
pytest.importorskip('pyspark')

from pyspark.errors import StreamingQueryException  # noqa: E402

from kafka_kip import KafkaProducer, TopicPartition  # noqa: E402

OURS = 'kafka-kip'
FLAGS = ('true', 'false')
#: A restarted query either fails at its first plan or ends after reading what there is: far below this.
QUERY_TIMEOUT_S = 120


class Run(NamedTuple):
    """What one run of a query did."""

    rows: list[tuple[int, str]]  # (offset, value) of every row it emitted
    next_offset: int  # partition 0's offset at the end of the checkpoint's last committed batch: where a run starts
    failure: str | None  # '<exception class>: <message naming the offsets>' if it failed


def produce(cluster: Any, topic: str, values: list[str]) -> list[int]:
    """Write ``values`` to partition 0 with acks=all; returns their offsets."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all')
    try:
        return [producer.send(topic, value=v.encode(), partition=0).get(timeout=30).offset for v in values]
    finally:
        producer.close()


def start_query(spark: Any, fmt: str, cluster: Any, topic: str, checkpoint: Path, rows: list[tuple[int, str]],
                **options: str) -> Any:
    """A streaming job written for format("kafka") on ``fmt``: Trigger.AvailableNow, rows appended to ``rows``."""
    def collect(frame: Any, _: int) -> None:
        rows.extend((r.offset, r.value.decode()) for r in frame.collect())

    return (spark.readStream.format(fmt).option('kafka.bootstrap.servers', cluster.bootstrap_servers)
            .option('subscribe', topic).option('startingOffsets', 'earliest').options(**options).load()
            .writeStream.foreachBatch(collect).option('checkpointLocation', str(checkpoint))
            .trigger(availableNow=True).start())


def failure_of(exc: StreamingQueryException) -> str:
    """Our kafka_kip error (the last such line of the Python traceback Spark carries), or the Java class of
    Spark's failure with the reason its message gives."""
    text = str(exc)
    ours = re.findall(r'^kafka_kip\.errors\.(\w+): \[Error \d+\] \w+: (.*)$', text, re.MULTILINE)
    if ours:
        name, message = ours[-1]
        return f'{name}: {message}'
    reason = re.search(r'^Reason: (.*)$', text, re.MULTILINE)
    assert reason is not None, text
    # PySpark keeps the Java exception in _origin (no public accessor); its cause is the source's exception.
    return f'{exc._origin.getCause().getClass().getSimpleName()}: {reason.group(1)}'


def next_offset(checkpoint: Path, topic: str) -> int:
    """Partition 0's offset at the end of the last committed micro-batch of ``checkpoint``."""
    last = max(int(name) for name in os.listdir(checkpoint / 'commits') if name.isdigit())
    sources = (checkpoint / 'offsets' / str(last)).read_text().splitlines()[2]  # 'v1', batch metadata, the source
    entry = json.loads(sources)[topic]['0']
    return entry if isinstance(entry, int) else entry['offset']


def finish(query: Any, rows: list[tuple[int, str]], checkpoint: Path, topic: str) -> Run:
    try:
        ended = query.awaitTermination(QUERY_TIMEOUT_S)
    except StreamingQueryException as exc:
        return Run(sorted(rows), next_offset(checkpoint, topic), failure_of(exc))
    if not ended:
        query.stop()
        raise AssertionError(f'query {query.id} still running after {QUERY_TIMEOUT_S} s')
    return Run(sorted(rows), next_offset(checkpoint, topic), None)


def run_at_once(spark: Any, cluster: Any, topic: str, jobs: dict[Any, tuple[str, Path, dict[str, str]]]) -> dict:
    """Start every job -- ``key -> (format, checkpoint, options)`` -- then wait for each: ``key -> Run``."""
    started = {}
    for key, (fmt, checkpoint, options) in jobs.items():
        rows: list[tuple[int, str]] = []
        started[key] = (start_query(spark, fmt, cluster, topic, checkpoint, rows, **options), rows, checkpoint)
    return {key: finish(query, rows, checkpoint, topic) for key, (query, rows, checkpoint) in started.items()}


def first_runs(spark: Any, cluster: Any, topic: str, checkpoints: dict[str, Path]) -> dict[str, Run]:
    """Each format's query run on its checkpoint (``format -> checkpoint``), both at once."""
    return run_at_once(spark, cluster, topic, {fmt: (fmt, checkpoint, {}) for fmt, checkpoint in checkpoints.items()})


def copy_checkpoint(checkpoint: Path, to: Path) -> Path:
    """``checkpoint`` copied as another query at the same positions (its own id, so the copies can run at once)."""
    shutil.copytree(checkpoint, to)
    (to / '.metadata.crc').unlink()
    (to / 'metadata').write_text(json.dumps({'id': str(uuid.uuid4())}))
    return to


def restarts(spark: Any, cluster: Any, topic: str, checkpoints: dict[str, Path], label: str) -> dict:
    """Each format's query restarted from fresh copies of its checkpoint with failOnDataLoss=true and =false,
    the four at once: ``(format, failOnDataLoss) -> Run``."""
    return run_at_once(spark, cluster, topic, {
        (fmt, flag): (fmt, copy_checkpoint(checkpoint, checkpoint.with_name(f'{checkpoint.name}-{label}-{flag}')),
                      {'failOnDataLoss': flag})
        for fmt, checkpoint in checkpoints.items() for flag in FLAGS})


def new_topic(cluster: Any, prefix: str, **kwargs: Any) -> str:
    topic = f'{prefix}-{uuid.uuid4().hex[:8]}'
    cluster.create_topic(topic, **kwargs)
    return topic


def test_restart_after_an_unclean_election_spark_s_connector_and_ours(spark, spark_kafka, apache_kafka, tmp_path):
    # Replicas [0, 1]: with broker 1 stopped, records 5..7 are acknowledged by the leader alone; broker 1,
    # elected uncleanly, continues from its offset 5.
    topic = new_topic(apache_kafka, 'unclean', replica_assignment={0: [0, 1]})
    tp = TopicPartition(topic, 0)
    assert (apache_kafka.leader(tp), sorted(apache_kafka.isr(tp))) == (0, [0, 1])
    assert produce(apache_kafka, topic, [f'a{n}' for n in range(5)]) == [0, 1, 2, 3, 4]
    apache_kafka.stop_broker(1)
    assert produce(apache_kafka, topic, [f'lost{n}' for n in (5, 6, 7)]) == [5, 6, 7]
    checkpoints = {fmt: tmp_path / fmt for fmt in (spark_kafka, OURS)}
    read = [(n, f'a{n}') for n in range(5)] + [(n, f'lost{n}') for n in (5, 6, 7)]
    assert first_runs(spark, apache_kafka, topic, checkpoints) == {fmt: Run(read, 8, None) for fmt in checkpoints}

    apache_kafka.elect_uncleanly(tp, 1)  # broker 0 truncates its log to offset 5 when it comes back
    assert produce(apache_kafka, topic, ['new5']) == [5]  # the new log ends at 6, below the checkpoints' 8
    truncated = (f'TruncatedPartitionError: source log truncated (unclean leader election?): {topic}-0: offsets '
                 '5..7 lost (log truncated at 5, position was 8). Set failOnDataLoss=false (or onTruncation=closest) '
                 'to continue from the truncation point.')
    assert restarts(spark, apache_kafka, topic, checkpoints, 'short') == {
        (spark_kafka, 'true'): Run([], 8, f'KafkaIllegalStateException: Partition {topic}-0 offset was changed from '
                                          '8 to 6.'),
        (spark_kafka, 'false'): Run([], 6, None),  # its next run starts at 6: new5 (offset 5) is passed over
        (OURS, 'true'): Run([], 8, truncated),
        (OURS, 'false'): Run([(5, 'new5')], 6, None),
    }

    assert produce(apache_kafka, topic, [f'new{n}' for n in range(6, 10)]) == [6, 7, 8, 9]  # past the 8
    assert restarts(spark, apache_kafka, topic, checkpoints, 'long') == {
        (spark_kafka, 'true'): Run([(8, 'new8'), (9, 'new9')], 10, None),  # new5..new7 skipped, silently
        (spark_kafka, 'false'): Run([(8, 'new8'), (9, 'new9')], 10, None),
        (OURS, 'true'): Run([], 8, truncated),
        (OURS, 'false'): Run([(n, f'new{n}') for n in range(5, 10)], 10, None),
    }


def test_restart_after_the_topic_is_recreated_spark_s_connector_and_ours(spark, spark_kafka, apache_kafka, tmp_path):
    topic = new_topic(apache_kafka, 'recreated')
    assert produce(apache_kafka, topic, [f'old{n}' for n in range(4)]) == [0, 1, 2, 3]
    checkpoints = {fmt: tmp_path / fmt for fmt in (spark_kafka, OURS)}
    assert first_runs(spark, apache_kafka, topic, checkpoints) == {
        fmt: Run([(n, f'old{n}') for n in range(4)], 4, None) for fmt in checkpoints}
    old_id = apache_kafka.topic_id(topic)

    apache_kafka.recreate_topic(topic, 1)
    assert produce(apache_kafka, topic, ['new0', 'new1']) == [0, 1]  # the new log ends at 2, below the 4
    other_incarnation = (f"InvalidPartitionEpochError: {topic}-0 at offset 4 with epochs (leader epoch 0, topic id "
                         f"{old_id}) belongs to another incarnation of the partition than this cluster's (leader "
                         f"epoch 0, topic id {apache_kafka.topic_id(topic)}): the source topic was deleted and "
                         'recreated, or the positions were stored on another cluster. If this cluster holds the same '
                         'records at the same offsets (a mirror that kept them), start a new query (new checkpoint) '
                         'with startingOffsets at those offsets; otherwise start a new query.')
    assert restarts(spark, apache_kafka, topic, checkpoints, 'short') == {
        (spark_kafka, 'true'): Run([], 4, f'KafkaIllegalStateException: Partition {topic}-0 offset was changed from '
                                          '4 to 2.'),
        (spark_kafka, 'false'): Run([], 2, None),  # its next run starts at 2: new0, new1 are passed over
        (OURS, 'true'): Run([], 4, other_incarnation),
        (OURS, 'false'): Run([], 4, other_incarnation),
    }

    assert produce(apache_kafka, topic, [f'new{n}' for n in range(2, 6)]) == [2, 3, 4, 5]  # past the 4
    assert restarts(spark, apache_kafka, topic, checkpoints, 'long') == {
        (spark_kafka, 'true'): Run([(4, 'new4'), (5, 'new5')], 6, None),  # new0..new3 skipped, silently
        (spark_kafka, 'false'): Run([(4, 'new4'), (5, 'new5')], 6, None),
        (OURS, 'true'): Run([], 4, other_incarnation),
        (OURS, 'false'): Run([], 4, other_incarnation),
    }
