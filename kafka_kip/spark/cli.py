"""``kafka-kip spark-mirror``: the command line of the Structured Streaming replicator.

Importing this module does not import pyspark (the ``spark`` extra is optional for ``kafka-kip``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from kafka_kip.spark.settings import MIRROR_OPTIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``spark-mirror`` subcommand's options (:data:`~kafka_kip.spark.settings.MIRROR_OPTIONS`)."""
    MIRROR_OPTIONS.add_arguments(parser, defaults=True)


def run_spark_mirror(args: argparse.Namespace) -> int:
    """Build (or reuse) the SparkSession, run the query until it ends, fails or gets Ctrl-C; the exit code.

    As ``kafka-kip mirror``'s: 0 every partition copied and every group synced (or interrupted); 1 the query
    could not start or failed (the kafka-kip error is printed); 2 a partition stopped by an incident (a
    truncation, a recreated topic, ...: the query fails naming it) or a group sync that failed in its last round.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print('kafka-kip spark-mirror needs pyspark: pip install "kafka-python-kip[spark]"', file=sys.stderr)
        return 1
    from kafka_kip.mirror.cli import event
    from kafka_kip.mirror.config import SINGLE_FLOW
    from kafka_kip.mirror.metrics import FlowStatus, serve
    from kafka_kip.mirror.progress import render_summary
    from kafka_kip.mirror.state import Incident
    from kafka_kip.spark.mirror import failure_text, start_mirror

    def incident(found: Incident) -> None:
        if args.json:
            event(sys.stderr, 'incident', **found.to_dict())
        else:
            print(('STOPPED ' if found.stopped else 'REPORTED ') + found.message, file=sys.stderr, flush=True)

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
                             topic_prefix=args.topic_prefix, offset_map_topic=args.offset_map_topic,
                             groups=args.groups, group_sync_interval_ms=args.group_sync_interval_ms,
                             available_now=args.available_now, trigger_interval_s=args.trigger_interval,
                             show_batches=not (args.quiet or args.json), on_incident=incident)
    except Exception as exc:  # option mistakes surface here (Spark's AnalysisException around an OptionError)
        print(f'kafka-kip spark-mirror: {failure_text(exc)}', file=sys.stderr)
        return 1
    stop_metrics = None
    if args.metrics_port is not None:
        try:
            url, stop_metrics = serve(lambda: [FlowStatus(SINGLE_FLOW, query.summary(), query.isActive)],
                                      args.metrics_port, args.metrics_host)
        except OSError as exc:
            query.stop()
            print(f'kafka-kip spark-mirror: cannot serve metrics on {args.metrics_host}:{args.metrics_port} '
                  f'(--metrics-port): {exc.strerror or exc}', file=sys.stderr)
            return 1
        print(f'kafka-kip spark-mirror: metrics at {url}', file=sys.stderr, flush=True)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    except Exception as exc:  # the query failed: finish() reads its exception
        print(f'kafka-kip spark-mirror: the query failed: {failure_text(exc)}', file=sys.stderr)
    finally:
        query.finish()
        if stop_metrics is not None:
            stop_metrics()
    summary, code = query.summary(), query.exit_code
    print(json.dumps({**summary.to_dict(), 'exit_code': code}, indent=2) if args.json else render_summary(summary))
    return code
