"""Side by side with Spark's own Kafka connector on Apache Kafka (issue 22): the same job texts read, write
and stream identical rows.
"""
from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(shutil.which('java') is None, reason='Spark needs java on PATH')
pytest.importorskip('pyspark')

from kafka_kip import KafkaProducer  # noqa: E402
from tests.spark.helpers import (  # noqa: E402
    TS0,
)


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
