"""kafka-python's own integration suite (``test/integration`` of a kafka-python source tree) against a broker.

    python -m integration.kafka_python_suite KAFKA_PYTHON_SRC [--broker apache-kafka|reference]
        [--clients kafka-python|kafka_kip] [pytest arguments ...]
    python -m integration.kafka_python_suite KAFKA_PYTHON_SRC --suite unit [pytest arguments ...]

``KAFKA_PYTHON_SRC`` is a checkout of dpkp/kafka-python (never committed here), ideally at the tag of the
installed release. The suite is pointed at a running broker through its own ``KAFKA_URI`` / ``KAFKA_VERSION``
settings and run with the installed kafka-python (the checkout's ``test`` and ``servers`` are copied to a
temporary directory, without its ``kafka`` package); the last line is pytest's summary. Brokers, each configured as
the suite's own broker fixture configures its broker where a client can see it (``num.partitions=4``, sessions
from 1 s, no initial rebalance delay):

- ``apache-kafka``: one broker of :class:`kafka_kip_reference.external.apache_kafka.ApacheKafkaCluster` (with the standard
  authorizer allowing everyone);
- ``reference``: a one-broker :class:`kafka_kip_reference.ReferenceCluster` in this process with the same
  ``server.properties`` keys (the authorizer included), announced to the suite as the Apache Kafka release whose API
  versions it advertises; the brokers the suite starts itself (its SSL tests) are reference brokers too, started
  from the suite's own ``kafka.properties`` by the ``KAFKA_ROOT`` of :mod:`integration.kafka_root`.

``--clients kafka_kip`` runs the suite with kafka_kip's ``KafkaConsumer``, ``KafkaProducer`` and
``KafkaAdminClient`` in place of kafka-python's (:mod:`integration.kafka_python_suite_kip`).

``--suite unit`` runs kafka-python's unit suite instead (``test`` without ``test/integration``; no broker) with
kafka_kip's clients and its internal collaborators swapped in (``--kafka-kip-internals``); it needs
``pytest-mock``, as kafka-python's suite does (not among this project's test extras). With kafka-python
3.0.12 installed and the 3.0.11 tag's tests: 2,618 passed, 1 skipped, and the same 8 failures as without kafka_kip
(SASL GSSAPI/MSK tests of 3.0.11 against 3.0.12's modules, lz4's legacy framing).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

from integration.kafka_root import make_kafka_root
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster, kafka_jars

#: What the suite's own KafkaFixture writes into server.properties, where a client can see it.
SUITE_BROKER_CONFIG = {'num.partitions': '4', 'auto.create.topics.enable': 'true',
                       'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
                       'allow.everyone.if.no.acl.found': 'true'}
#: The same settings for the reference cluster; the suite's sessions start at 1 s.
REFERENCE_BROKER_CONFIG = {**SUITE_BROKER_CONFIG, 'default.replication.factor': '1',
                           'group.min.session.timeout.ms': '1000', 'group.initial.rebalance.delay.ms': '0'}
BROKERS = ('apache-kafka', 'reference')
CLIENTS = ('kafka-python', 'kafka_kip')
SUITES = ('integration', 'unit')


@contextmanager
def suite_broker(broker: str) -> Iterator[dict[str, str]]:
    """Start ``broker``; yields the suite's environment settings for it."""
    if broker == 'apache-kafka':
        with ApacheKafkaCluster(brokers=1, broker_config=SUITE_BROKER_CONFIG) as cluster:
            # KAFKA_ROOT: the suite's fixtures insist on a Kafka directory even for an external broker.
            yield {'KAFKA_URI': f'tcp://{cluster.bootstrap_servers}', 'KAFKA_VERSION': cluster.version,
                   'KAFKA_ROOT': str(kafka_jars(cluster.version))}
    elif broker == 'reference':
        with ReferenceCluster(brokers=1, broker_config=REFERENCE_BROKER_CONFIG) as cluster, \
                tempfile.TemporaryDirectory(prefix='kafka-root-') as kafka_root:
            release = '.'.join(map(str, infer_broker_version_from_api_versions(cluster.api_versions))) + '.0'
            yield {'KAFKA_URI': f'tcp://{cluster.bootstrap_servers}', 'KAFKA_VERSION': release,
                   'KAFKA_ROOT': str(make_kafka_root(Path(kafka_root)))}
    else:
        raise SystemExit(f'unknown broker {broker!r}; accepted: {", ".join(BROKERS)}')


def run(source: Path, broker: str, clients: str, pytest_args: list[str]) -> int:
    """Start ``broker``, run the suite against it in a subprocess, return pytest's exit status."""
    if not (source / 'test' / 'integration').is_dir():
        raise SystemExit(f'{source} has no test/integration: pass a kafka-python source tree')
    if clients not in CLIENTS:
        raise SystemExit(f'unknown clients {clients!r}; accepted: {", ".join(CLIENTS)}')
    with suite_broker(broker) as settings, tempfile.TemporaryDirectory(prefix='kafka-python-suite-') as work:
        # The suite's tests and broker resources without the checkout's own ``kafka`` package, which would shadow
        # the installed kafka-python (pytest puts the rootdir on sys.path).
        for name in ('test', 'servers'):
            shutil.copytree(source / name, Path(work) / name)
        env = {**os.environ, **settings}
        env.pop('PYTHONPATH', None)  # the suite imports its own test package and the installed kafka-python
        plugins = []
        if clients == 'kafka_kip':
            env['PYTHONPATH'] = str(Path(__file__).resolve().parents[1])  # this checkout's kafka_kip
            plugins = ['-p', 'integration.kafka_python_suite_kip']
        # Only the suite's own fixtures: hypothesis's plugin stays out (it trips over the suite's modules on
        # CPython 3.11.7).
        command = [sys.executable, '-m', 'pytest', 'test/integration', '-q', '-p',
                   'no:hypothesispytest', '-p', 'no:cacheprovider', *plugins, '-o', 'log_level=WARNING',
                   '-o', 'addopts=--timeout=120', '-rfE', *pytest_args]
        return subprocess.run(command, cwd=work, env=env).returncode


def run_unit(source: Path, pytest_args: list[str]) -> int:
    """kafka-python's unit suite with kafka_kip's clients and internal collaborators; pytest's exit status."""
    if not (source / 'test').is_dir():
        raise SystemExit(f'{source} has no test: pass a kafka-python source tree')
    with tempfile.TemporaryDirectory(prefix='kafka-python-unit-suite-') as work:
        shutil.copytree(source / 'test', Path(work) / 'test', ignore=shutil.ignore_patterns('integration'))
        env = {**os.environ, 'PYTHONPATH': str(Path(__file__).resolve().parents[1])}
        command = [sys.executable, '-m', 'pytest', 'test', '-q', '-p', 'no:kafka_kip', '-p', 'no:hypothesispytest',
                   '-p', 'no:cacheprovider', '-p', 'integration.kafka_python_suite_kip', '--kafka-kip-internals',
                   '-o', 'addopts=--timeout=120', '-rfE', *pytest_args]
        return subprocess.run(command, cwd=work, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('source', type=Path)
    parser.add_argument('--broker', default='apache-kafka', choices=BROKERS)
    parser.add_argument('--clients', default='kafka-python', choices=CLIENTS)
    parser.add_argument('--suite', default='integration', choices=SUITES)
    args, pytest_args = parser.parse_known_args(argv)
    if args.suite == 'unit':
        return run_unit(args.source.resolve(), pytest_args)
    return run(args.source.resolve(), args.broker, args.clients, pytest_args)


if __name__ == '__main__':
    sys.exit(main())
