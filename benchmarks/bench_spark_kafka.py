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
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import harness
from benchmarks.brokers import end_offsets
from benchmarks.harness import Column, Table
from benchmarks.mirrormaker.clusters import produce
from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster
from kafka_kip_reference.external.spark_connector import SPARK_KAFKA_VERSION, spark_kafka_jars

TOPIC = 'bench'
FORMATS = ('kafka', 'kafka-kip')
MASTERS = ('local[1]', 'local[2]')
#: the write side's sinks: (name, format, options)
SINKS = (('kafka', 'kafka', {}), ('kafka-kip', 'kafka-kip', {}),
         ('kafka-kip preserveOffsets', 'kafka-kip', {'preserveOffsets': 'true', 'kafka.offset.mode': 'checked'}))
WRITE_MASTER = 'local[2]'
WRITE_GOALS = {'kafka-kip': harness.Goal('format("kafka-kip") / format("kafka"), write', 1.5),
               'kafka-kip preserveOffsets': harness.Goal('preserveOffsets / format("kafka"), write', 1.2)}


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


def timed_read(spark: Any, fmt: str, bootstrap: str) -> dict[str, Any]:
    """One read job, timed whole (its ``seconds``; ``cpu_seconds`` is the driver's only)."""
    window = harness.Window()
    window.start()
    frame(spark, fmt, bootstrap).write.format('noop').mode('overwrite').save()
    window.stop()
    return window.result()


def main(argv: Sequence[str] | None = None) -> int:
    args_parser = harness.parser('bench_spark_kafka', __doc__)
    args_parser.add_argument('--side', choices=('read', 'write', 'both'), default='both', help='what to measure')
    args_parser.add_argument('--records', type=int, default=1_000_000,
                             help='records to read / write (default 1,000,000)')
    args_parser.add_argument('--partitions', type=int, default=4, help='topic partitions (default 4)')
    args_parser.add_argument('--rounds', type=int, default=3, help='interleaved rounds per master (default 3)')
    args = args_parser.parse_args(argv)
    tables: list[Table] = []
    with ApacheKafkaCluster(brokers=1) as kafka:
        if args.side in ('read', 'both'):
            tables.append(read_table(read_side(kafka, args), args))
        if args.side in ('write', 'both'):
            tables.append(write_table(write_side(kafka, args), args))
    print(harness.render(tables, as_json=args.json, markdown=True))
    return 0


def read_side(kafka: ApacheKafkaCluster, args: argparse.Namespace) -> harness.Samples:
    """Rates per (master, format), one per round."""
    samples = harness.Samples()
    kafka.create_topic(TOPIC, args.partitions)
    produce(kafka.bootstrap_servers, TOPIC, args.records, partitions=args.partitions, size=100)
    harness.progress(f'loaded {args.records:,} records into {args.partitions} partitions')
    for master in MASTERS:
        spark = session(master)
        try:
            for fmt in FORMATS:
                rows = frame(spark, fmt, kafka.bootstrap_servers).count()
                if rows != args.records:
                    raise harness.BenchmarkError(f'{fmt} on {master}: {rows:,} rows, expected {args.records:,}')
                timed_read(spark, fmt, kafka.bootstrap_servers)  # warm-up
            for round_ in range(args.rounds):
                for fmt in harness.alternated(FORMATS, round_):
                    rate = harness.Rate.of(args.records, timed_read(spark, fmt, kafka.bootstrap_servers))
                    samples.add((master, fmt), rate)
                    harness.progress(f'{master} round {round_ + 1}: {fmt}: {rate.per_s:,.0f} records/s')
        finally:
            spark.stop()
    return samples


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


def write_side(kafka: ApacheKafkaCluster, args: argparse.Namespace) -> harness.Samples:
    """Rates per sink name, one per round."""
    samples = harness.Samples()
    per_partition = args.records // args.partitions
    expected = [per_partition] * args.partitions
    spark = session(WRITE_MASTER)
    topics = iter(range(1_000_000))
    try:
        rows = rows_to_write(spark, args.records, args.partitions)

        def timed_write(name: str, fmt: str, options: dict[str, str]) -> dict[str, Any]:
            topic = f'write-{next(topics)}'
            kafka.create_topic(topic, args.partitions)
            window = harness.Window()
            window.start()
            (rows.write.format(fmt).option('kafka.bootstrap.servers', kafka.bootstrap_servers).option('topic', topic)
             .options(**options).mode('append').save())
            window.stop()
            ends = end_offsets(kafka.bootstrap_servers, topic, args.partitions)
            if ends != expected:
                raise harness.BenchmarkError(f'{name}: topic {topic} ends at {ends}, expected {expected}')
            return window.result()

        for name, fmt, options in SINKS:
            timed_write(name, fmt, options)  # warm-up
        for round_ in range(args.rounds):
            for name, fmt, options in harness.alternated(SINKS, round_):
                rate = harness.Rate.of(per_partition * args.partitions, timed_write(name, fmt, options))
                samples.add(name, rate)
                harness.progress(f'{WRITE_MASTER} write round {round_ + 1}: {name}: {rate.per_s:,.0f} records/s')
    finally:
        spark.stop()
    return samples


def read_table(samples: harness.Samples, args: argparse.Namespace) -> Table:
    made = Table([Column('master', left=True), Column('format("kafka"), records/s', ',.0f'),
                  Column('format("kafka-kip"), records/s', ',.0f'), Column('kafka-kip / kafka', '.2f', 'x')],
                 title=f'{args.records:,} records x 100 bytes, {args.partitions} partitions, one Apache Kafka '
                       f'broker; medians of {args.rounds} interleaved rounds; Spark\'s connector '
                       f'{SPARK_KAFKA_VERSION}\n')
    for master in MASTERS:
        made.add(master, samples.median((master, 'kafka')), samples.median((master, 'kafka-kip')),
                 samples.ratio((master, 'kafka-kip'), (master, 'kafka')))
    return made


def write_table(samples: harness.Samples, args: argparse.Namespace) -> Table:
    made = Table([Column('sink', left=True), Column('records/s', ',.0f'), Column('vs format("kafka")', '.2f', 'x')],
                 title=f'write: {args.records:,} rows x 100 bytes from one cached DataFrame, {args.partitions} '
                       f'partitions, {WRITE_MASTER}, one Apache Kafka broker; medians of {args.rounds} interleaved '
                       f'rounds; Spark\'s connector {SPARK_KAFKA_VERSION}\n',
                 notes=['', *map(str, WRITE_GOALS.values())])
    for name, _, _ in SINKS:
        fmt, _, option = name.partition(' ')
        made.add(f'format("{fmt}"){" " + option if option else ""}', samples.median(name),
                 samples.ratio(name, 'kafka'))
    return made


if __name__ == '__main__':
    sys.exit(main())
