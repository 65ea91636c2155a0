"""``kafka-kip``: the command-line entry point (demo, broker, ...)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kafka_kip.mirror.cli import add_arguments as add_mirror_arguments
from kafka_kip.spark.cli import add_arguments as add_spark_mirror_arguments


def _demo(args: argparse.Namespace) -> int:
    from kafka_kip.demo import run_demo
    return run_demo(out=sys.stdout)


def _mirror(args: argparse.Namespace) -> int:
    from kafka_kip.mirror.cli import run_mirror
    return run_mirror(args)


def _spark_mirror(args: argparse.Namespace) -> int:
    from kafka_kip.spark.cli import run_spark_mirror
    return run_spark_mirror(args)


def _broker(args: argparse.Namespace) -> int:
    from kafka_kip.testing.cli import run_broker
    return run_broker(brokers=args.brokers, port=args.port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='kafka-kip', description=__doc__)
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

    demo = commands.add_parser('demo', help='run the scenarios on embedded reference clusters')
    demo.set_defaults(run=_demo)

    mirror = commands.add_parser('mirror', help='replicate topics to another cluster, offsets preserved')
    add_mirror_arguments(mirror)
    mirror.set_defaults(run=_mirror)

    spark_mirror = commands.add_parser('spark-mirror',
                                       help='replicate topics as a Spark Structured Streaming query (extra spark)')
    add_spark_mirror_arguments(spark_mirror)
    spark_mirror.set_defaults(run=_spark_mirror)

    broker = commands.add_parser('broker', help='run a reference cluster until Ctrl-C')
    broker.add_argument('--brokers', type=int, default=3, help='number of brokers (default 3)')
    broker.add_argument('--port', type=int, default=0,
                        help='port of the first broker; the others take the next ones (default: ephemeral)')
    broker.set_defaults(run=_broker)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)
