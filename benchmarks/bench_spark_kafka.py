"""Batch read and write throughput: Spark's own Kafka connector (``format("kafka")``) against ``format("kafka-kip")``.

Read side:

One Apache Kafka broker (:mod:`kafka_kip_reference.external.apache_kafka`) holds N records of 100 bytes over P partitions
(default 4). For each master (``local[1]``, ``local[2]``: 1 and 2 executor cores) a fresh SparkSession with Spark's
connector in ``spark.jars`` (:mod:`kafka_kip_reference.external.spark_connector`) runs the same job text on both formats,
interleaved for ``--rounds`` rounds after an untimed warm-up of each (Python workers, JIT):
``spark.read.format(fmt).option('subscribe', ...).load().write.format('noop').save()``, i.e. every row
materialised and dropped. Each format's row count is checked to be N first (untimed). Timed: the whole job.

Write side (``local[2]``): one cached DataFrame of N rows (``value`` 100 bytes, ``partition``, ``offset``: the
rows of Kafka partition p, in offset order from 0, in Spark partition p) is written by Spark's sink, by
``format("kafka-kip")`` and by ``format("kafka-kip")`` with ``preserveOffsets=true`` (``kafka.offset.mode=checked``:
Apache Kafka does not implement KIP-391), each to a fresh topic of P partitions, interleaved for ``--rounds``
rounds after an untimed warm-up of each. Every written topic is checked to end at N/P per partition (untimed).

    python -m benchmarks.bench_spark_kafka [--side read|write|both] [--records 1000000] [--partitions 4] [--rounds 3]

Prints tables (medians; a ratio is the median of the rounds' ratios); progress on stderr.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.bench_cluster import BenchmarkError
from benchmarks.bench_mirrormaker import produce
from benchmarks.bench_spark import end_offsets
from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster
from kafka_kip_reference.external.spark_connector import SPARK_KAFKA_VERSION, spark_kafka_jars

TOPIC = 'bench'
FORMATS = ('kafka', 'kafka-kip')
MASTERS = ('local[1]', 'local[2]')
#: the write side's sinks: (name, format, options)
SINKS = (('kafka', 'kafka', {}), ('kafka-kip', 'kafka-kip', {}),
         ('kafka-kip preserveOffsets', 'kafka-kip', {'preserveOffsets': 'true', 'kafka.offset.mode': 'checked'}))
WRITE_MASTER = 'local[2]'


def session(master: str) -> Any:
    from pyspark.sql import SparkSession

    import kafka_kip
    from kafka_kip.spark import register

    root = str(Path(kafka_kip.__file__).resolve().parent.parent)
    os.environ['PYSPARK_PYTHON'] = sys.executable
    os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (root, os.environ.get('PYTHONPATH')) if p)
    spark = (SparkSession.builder.master(master).appName('bench-spark-kafka').config('spark.ui.enabled', 'false')
             .config('spark.jars', ','.join(spark_kafka_jars())).getOrCreate())
    spark.sparkContext.setLogLevel('ERROR')
    register(spark)
    return spark


def frame(spark: Any, fmt: str, bootstrap: str) -> Any:
    return spark.read.format(fmt).option('kafka.bootstrap.servers', bootstrap).option('subscribe', TOPIC).load()


def timed_read(spark: Any, fmt: str, bootstrap: str) -> float:
    start = time.perf_counter()
    frame(spark, fmt, bootstrap).write.format('noop').mode('overwrite').save()
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_spark_kafka', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--side', choices=('read', 'write', 'both'), default='both', help='what to measure')
    parser.add_argument('--records', type=int, default=1_000_000, help='records to read / write (default 1,000,000)')
    parser.add_argument('--partitions', type=int, default=4, help='topic partitions (default 4)')
    parser.add_argument('--rounds', type=int, default=3, help='interleaved rounds per master (default 3)')
    args = parser.parse_args(argv)
    with ApacheKafkaCluster(brokers=1) as kafka:
        if args.side in ('read', 'both'):
            print(format_table(read_side(kafka, args), args))
        if args.side in ('write', 'both'):
            print(format_write_table(write_side(kafka, args), args))
    return 0


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def read_side(kafka: ApacheKafkaCluster, args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    rates: dict[str, dict[str, list[float]]] = {m: {f: [] for f in FORMATS} for m in MASTERS}
    kafka.create_topic(TOPIC, args.partitions)
    produce(kafka.bootstrap_servers, TOPIC, args.records, partitions=args.partitions, size=100)
    say(f'loaded {args.records:,} records into {args.partitions} partitions')
    for master in MASTERS:
        spark = session(master)
        try:
            for fmt in FORMATS:
                rows = frame(spark, fmt, kafka.bootstrap_servers).count()
                if rows != args.records:
                    raise BenchmarkError(f'{fmt} on {master}: {rows:,} rows, expected {args.records:,}')
                timed_read(spark, fmt, kafka.bootstrap_servers)  # warm-up
            for round_ in range(args.rounds):
                for fmt in (FORMATS if round_ % 2 == 0 else FORMATS[::-1]):
                    rate = args.records / timed_read(spark, fmt, kafka.bootstrap_servers)
                    rates[master][fmt].append(rate)
                    say(f'{master} round {round_ + 1}: {fmt}: {rate:,.0f} records/s')
        finally:
            spark.stop()
    return rates


def rows_to_write(spark: Any, records: int, partitions: int) -> Any:
    """The cached DataFrame every sink writes: Kafka partition p's rows (offsets 0..) in Spark partition p."""
    from pyspark.sql import functions as F

    per_partition = records // partitions
    frame = (spark.range(0, per_partition * partitions, numPartitions=partitions)
             .select((F.col('id') / per_partition).cast('int').alias('partition'),
                     (F.col('id') % per_partition).alias('offset'),
                     F.expr("unhex(lpad(hex(id), 200, '0'))").alias('value')))
    frame = frame.cache()
    frame.count()
    return frame


def write_side(kafka: ApacheKafkaCluster, args: argparse.Namespace) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {name: [] for name, _, _ in SINKS}
    per_partition = args.records // args.partitions
    expected = [per_partition] * args.partitions
    spark = session(WRITE_MASTER)
    topics = iter(range(1_000_000))
    try:
        rows = rows_to_write(spark, args.records, args.partitions)

        def timed_write(name: str, fmt: str, options: dict[str, str]) -> float:
            topic = f'write-{next(topics)}'
            kafka.create_topic(topic, args.partitions)
            start = time.perf_counter()
            (rows.write.format(fmt).option('kafka.bootstrap.servers', kafka.bootstrap_servers).option('topic', topic)
             .options(**options).mode('append').save())
            seconds = time.perf_counter() - start
            ends = end_offsets(kafka.bootstrap_servers, topic, args.partitions)
            if ends != expected:
                raise BenchmarkError(f'{name}: topic {topic} ends at {ends}, expected {expected}')
            return seconds

        for name, fmt, options in SINKS:
            timed_write(name, fmt, options)  # warm-up
        for round_ in range(args.rounds):
            for name, fmt, options in (SINKS if round_ % 2 == 0 else SINKS[::-1]):
                rate = per_partition * args.partitions / timed_write(name, fmt, options)
                rates[name].append(rate)
                say(f'{WRITE_MASTER} write round {round_ + 1}: {name}: {rate:,.0f} records/s')
    finally:
        spark.stop()
    return rates


def format_table(rates: dict[str, dict[str, list[float]]], args: argparse.Namespace) -> str:
    lines = [f'{args.records:,} records x 100 bytes, {args.partitions} partitions, one Apache Kafka broker; medians of '
             f'{args.rounds} interleaved rounds; Spark\'s connector {SPARK_KAFKA_VERSION}', '',
             '| master | format("kafka"), records/s | format("kafka-kip"), records/s | kafka-kip / kafka |',
             '|---|---|---|---|']
    for master, by_format in rates.items():
        ratio = statistics.median(k / s for k, s in zip(by_format['kafka-kip'], by_format['kafka'], strict=True))
        lines.append(f'| {master} | {statistics.median(by_format["kafka"]):,.0f} | '
                     f'{statistics.median(by_format["kafka-kip"]):,.0f} | {ratio:.2f}x |')
    return '\n'.join(lines)


def format_write_table(rates: dict[str, list[float]], args: argparse.Namespace) -> str:
    lines = [f'write: {args.records:,} rows x 100 bytes from one cached DataFrame, {args.partitions} partitions, '
             f'{WRITE_MASTER}, one Apache Kafka broker; medians of {args.rounds} interleaved rounds; Spark\'s '
             f'connector {SPARK_KAFKA_VERSION}', '', '| sink | records/s | vs format("kafka") |', '|---|---|---|']
    for name, by_round in rates.items():
        ratio = statistics.median(r / k for r, k in zip(by_round, rates['kafka'], strict=True))
        lines.append(f'| format("{name.split()[0]}"){" " + name.split(" ", 1)[1] if " " in name else ""} | '
                     f'{statistics.median(by_round):,.0f} | {ratio:.2f}x |')
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())
