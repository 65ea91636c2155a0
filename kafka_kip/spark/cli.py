"""``kafka-kip spark-mirror``: the command line of the Structured Streaming replicator.

Importing this module does not import pyspark (the ``spark`` extra is optional for ``kafka-kip``).
"""
from __future__ import annotations

import argparse
import os
import sys

from kafka_kip.policies import AUTO, OFFSET_MODES, STOP, TRUNCATION_SPELLINGS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``spark-mirror`` subcommand's options."""
    parser.add_argument('--source', required=True, metavar='BOOTSTRAP', help='source bootstrap servers')
    parser.add_argument('--target', required=True, metavar='BOOTSTRAP', help='target bootstrap servers')
    parser.add_argument('--topics', required=True, metavar='REGEX',
                        help='source topics to replicate, a regex on the whole name (e.g. "orders|payments")')
    parser.add_argument('--checkpoint', required=True, metavar='DIR',
                        help='Spark checkpoint directory (local path, HDFS, S3, ...): where the query resumes')
    parser.add_argument('--master', help='Spark master, e.g. local[2] (default: from spark-submit / Spark config)')
    parser.add_argument('--starting-offsets', default='earliest', metavar='WHERE',
                        help='earliest (default), latest or Spark-style JSON; used by a new checkpoint only')
    parser.add_argument('--on-truncation', choices=tuple(TRUNCATION_SPELLINGS), default=STOP,
                        help='source truncated below the checkpoint: stop, i.e. fail the query (default; also '
                             'spelt fail or none) or closest: continue from the truncation point')
    parser.add_argument('--max-offsets-per-trigger', type=int, metavar='N',
                        help='at most N offsets per micro-batch (all partitions together)')
    parser.add_argument('--offset-mode', choices=OFFSET_MODES, default=AUTO,
                        help="as kafka-kip mirror, per partition: auto (default) = broker where the target has "
                             'kip.391, else checked while the source allows it, else translated')
    parser.add_argument('--topic-prefix', default='', metavar='PREFIX', help='prefix of target topic names')
    parser.add_argument('--trigger-interval', type=float, default=1.0, metavar='SECONDS',
                        help='micro-batch interval (default 1)')
    parser.add_argument('--available-now', action='store_true',
                        help='copy what the source has when the query starts, then exit')
    parser.add_argument('--quiet', action='store_true',
                        help="don't print each micro-batch's copied ranges")


def run_spark_mirror(args: argparse.Namespace) -> int:
    """Build (or reuse) the SparkSession, run the query until it ends, fails or gets Ctrl-C; the exit code.

    0: done or interrupted; 1: the query could not start or failed (the kafka-kip error is printed).
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print('kafka-kip spark-mirror needs pyspark: pip install "kafka-python-kip[spark]"', file=sys.stderr)
        return 1
    from kafka_kip.spark.mirror import failure_text, start_mirror

    # Local masters start their Python workers with this interpreter (so they import this package too).
    os.environ.setdefault('PYSPARK_PYTHON', sys.executable)
    builder = SparkSession.builder.appName('kafka-kip spark-mirror')
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    try:
        query = start_mirror(spark, args.source, args.target, args.topics, args.checkpoint,
                             starting_offsets=args.starting_offsets, on_truncation=args.on_truncation,
                             max_offsets_per_trigger=args.max_offsets_per_trigger, offset_mode=args.offset_mode,
                             topic_prefix=args.topic_prefix, available_now=args.available_now,
                             trigger_interval_s=args.trigger_interval, show_batches=not args.quiet)
    except Exception as exc:  # option mistakes surface here (Spark's AnalysisException around an OptionError)
        print(f'kafka-kip spark-mirror: {failure_text(exc)}', file=sys.stderr)
        return 1
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    except Exception as exc:
        print(f'kafka-kip spark-mirror: the query failed: {failure_text(exc)}', file=sys.stderr)
        return 1
    return 0
