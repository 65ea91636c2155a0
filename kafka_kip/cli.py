"""``kafka-kip``: the command-line entry point (demo, broker, ...).

``demo`` and ``broker`` run the reference cluster (:mod:`kafka_kip_reference`, extra ``reference``), imported
only when one of them runs; ``mirror`` and ``spark-mirror`` need nothing of it.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from kafka_kip.mirror.cli import add_arguments as add_mirror_arguments
from kafka_kip.settings.properties import parse_assignment, parse_properties
from kafka_kip.spark.cli import add_arguments as add_spark_mirror_arguments


def _reference(module: str) -> ModuleType:
    """``kafka_kip_reference.<module>``, or exit naming the extra that installs it."""
    try:
        return importlib.import_module(f'kafka_kip_reference.{module}')
    except ImportError as exc:
        raise SystemExit(f'kafka-kip: this command runs the reference cluster (kafka_kip_reference), which cannot '
                         f'be imported: {exc}. Install it with: pip install "kafka-python-kip[reference]"') from None


def _demo(args: argparse.Namespace) -> int:
    return _reference('demo.run').run_demo(out=sys.stdout)


def _mirror(args: argparse.Namespace) -> int:
    from kafka_kip.mirror.cli import run_mirror
    return run_mirror(args)


def _spark_mirror(args: argparse.Namespace) -> int:
    from kafka_kip.spark.cli import run_spark_mirror
    return run_spark_mirror(args)


def _broker(args: argparse.Namespace) -> int:
    run_broker = _reference('broker.cli').run_broker
    config = dict(args.config_file or {})
    config.update(args.config or [])
    # this process is the broker's: its full garbage collections walk only what changed since the last one
    # (kafka_kip_reference/broker/gc_policy.py); a process embedding ReferenceCluster keeps its own collector
    gc_policy = _reference('broker.gc_policy').FreezeSurvivors()
    gc_policy.install()
    try:
        return run_broker(brokers=args.brokers, port=args.port, broker_config=config, features=args.features,
                          data_dir=args.data_dir, **security_options(args))
    finally:
        gc_policy.uninstall()


def _add_security_arguments(parser: argparse.ArgumentParser) -> None:
    """The broker's security flags (see :func:`security_options`)."""
    parser.add_argument('--user', action='append', type=_user, metavar='NAME=PASSWORD', dest='users',
                        help='a SASL user (repeatable): every listener then requires SASL PLAIN, SCRAM-SHA-256 or '
                             'SCRAM-SHA-512')
    parser.add_argument('--replicator', action='append', metavar='NAME', dest='replicators',
                        help='a user who may produce with offsets (KIP-391; repeatable; default without --authorizer: '
                             'everyone; with it: REPLICATOR_WRITE ACLs decide, these users are granted one)')
    parser.add_argument('--authorizer', action='store_true',
                        help="check every request against ACLs (Kafka's StandardAuthorizer rules; nothing is allowed "
                             'until ACLs allow it); manage them with CreateAcls/DescribeAcls/DeleteAcls')
    parser.add_argument('--super-user', action='append', metavar='NAME', dest='super_users',
                        help='a user the authorizer lets do everything (repeatable)')
    parser.add_argument('--tls', action='store_true',
                        help='TLS listeners (SSL, or SASL_SSL with --user) with a test CA made for this run; the '
                             "CA's PEM file is printed after the bootstrap servers as ssl_cafile=PATH")


def security_options(args: argparse.Namespace) -> dict[str, object]:
    """The ``ReferenceCluster`` arguments of the broker's security flags."""
    return {'users': dict(args.users) if args.users else None,
            'replicator_principals': set(args.replicators) if args.replicators else None, 'tls': args.tls,
            'authorizer': args.authorizer, 'super_users': set(args.super_users or ())}


def _user(text: str) -> tuple[str, str]:
    name, sep, password = text.partition('=')
    if not sep or not name:
        raise argparse.ArgumentTypeError(f'expected NAME=PASSWORD, got {text!r}')
    return name, password


def _config_assignment(text: str) -> tuple[str, str]:
    try:
        return parse_assignment(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _properties_file(path: str) -> dict[str, str]:
    try:
        with open(path, encoding='utf-8') as lines:
            return parse_properties(lines)
    except (OSError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f'{path}: {exc}') from None


def _feature_list(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(',') if name.strip())


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
    broker.add_argument('--config', action='append', type=_config_assignment, metavar='KEY=VALUE',
                        help="a broker config as in Kafka's server.properties (repeatable), e.g. "
                             'auto.create.topics.enable=false; unset keys have Apache Kafka\'s defaults')
    broker.add_argument('--config-file', type=_properties_file, metavar='PATH',
                        help='a server.properties file of broker configs (--config values win)')
    broker.add_argument('--features', type=_feature_list, default=None, metavar='NAMES',
                        help='comma-separated extensions to advertise and honour (default: all the reference '
                             "cluster implements; '' for a stock broker)")
    broker.add_argument('--data-dir', metavar='PATH',
                        help='keep what Kafka keeps across a restart (topics and records, committed offsets, '
                             'transactions, users, ACLs, dynamic configs) in this directory: written at Ctrl-C / '
                             'SIGTERM, read back at the next start')
    _add_security_arguments(broker)
    broker.set_defaults(run=_broker)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)
