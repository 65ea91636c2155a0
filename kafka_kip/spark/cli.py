"""``kafka-kip spark-mirror``: the command line of the Structured Streaming replicator.

Importing this module does not import pyspark (the ``spark`` extra is optional for ``kafka-kip``).
"""
from __future__ import annotations

import argparse
import os
import sys

from kafka_kip.spark.settings import MIRROR_OPTIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``spark-mirror`` subcommand's options (:data:`~kafka_kip.spark.settings.MIRROR_OPTIONS`)."""
    MIRROR_OPTIONS.add_arguments(parser, defaults=True)


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
