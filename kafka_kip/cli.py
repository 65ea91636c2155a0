"""``kafka-kip``: the command-line entry point (demo, broker, ...)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    from kafka_kip.demo import run_demo
    return run_demo(out=sys.stdout)


def _broker(args: argparse.Namespace) -> int:
    from kafka_kip.testing.cli import run_broker
    return run_broker(brokers=args.brokers, port=args.port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='kafka-kip', description=__doc__)
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

    demo = commands.add_parser('demo', help='run the scenarios on embedded reference clusters')
    demo.set_defaults(run=_demo)

    broker = commands.add_parser('broker', help='run a reference cluster until Ctrl-C')
    broker.add_argument('--brokers', type=int, default=1, help='number of brokers (default 1)')
    broker.add_argument('--port', type=int, default=0,
                        help='port of the first broker; the others take the next ones (default: ephemeral)')
    broker.set_defaults(run=_broker)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)
