"""Shared by the Spark tests: records in and out, checkpoints, Spark-length waits (import after pyspark)."""
from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any

from kafka_kip import KafkaConsumer, KafkaProducer, TopicPartition
from kafka_kip.spark import stoppable
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures import conditions

TS0 = 1_700_000_000_000


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


#: Spark jobs start JVM work: a longer deadline than the default.
wait_until = functools.partial(conditions.wait_until, timeout=60)


def read(spark: Any, cluster: ReferenceCluster, **options: str) -> Any:
    return (spark.read.format('kafka-kip').option('kafka.bootstrap.servers', cluster.bootstrap_servers)
            .options(**options).load())


# -- batch read ---------------------------------------------------------------------------------------


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


def assert_same_logs(source: ReferenceCluster, target: ReferenceCluster, topic: str, partitions: int) -> None:
    for p in range(partitions):
        tp = TopicPartition(topic, p)
        copied = consume(target, tp)
        assert copied == consume(source, tp)
        assert [r[0] for r in copied] == list(range(len(copied)))  # every offset once: no duplicate, no gap


def start_collecting(spark: Any, cluster: ReferenceCluster, checkpoint: Path, rows: list, **options: str) -> Any:
    """A streaming read of topic ``events`` whose rows are appended to ``rows`` as (offset, leaderEpoch, value)."""
    frame = (spark.readStream.format('kafka-kip').option('kafka.bootstrap.servers', cluster.bootstrap_servers)
             .option('subscribe', 'events').option('startingOffsets', 'earliest').options(**options).load())
    return (frame.select('offset', 'leaderEpoch', 'value').writeStream
            .foreachBatch(stoppable(lambda batch, _: rows.extend(tuple(r) for r in batch.collect())))
            .option('checkpointLocation', str(checkpoint)).trigger(processingTime='200 milliseconds').start())
