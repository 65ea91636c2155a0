"""kafka-python's own integration suite (``test/integration`` of a kafka-python source tree) against a broker.

    python -m integration.kafka_python_suite KAFKA_PYTHON_SRC [--broker apache-kafka] [pytest arguments ...]

``KAFKA_PYTHON_SRC`` is a checkout of dpkp/kafka-python (never committed here), ideally at the tag of the
installed release. The suite is pointed at a running broker through its own ``KAFKA_URI`` / ``KAFKA_VERSION``
settings and run with the installed kafka-python; the last line is pytest's summary. Brokers: ``apache-kafka``
(one broker of :class:`kafka_kip.testing.apache_kafka.ApacheKafkaCluster`, configured as the suite's own
broker fixture configures it: ``num.partitions=4``, the standard authorizer allowing everyone).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from kafka_kip.testing.apache_kafka import ApacheKafkaCluster, kafka_jars

#: What the suite's own KafkaFixture writes into server.properties, where a client can see it.
SUITE_BROKER_CONFIG = {'num.partitions': '4', 'auto.create.topics.enable': 'true',
                       'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
                       'allow.everyone.if.no.acl.found': 'true'}


def run(source: Path, broker: str, pytest_args: list[str]) -> int:
    """Start ``broker``, run the suite against it in a subprocess, return pytest's exit status."""
    if not (source / 'test' / 'integration').is_dir():
        raise SystemExit(f'{source} has no test/integration: pass a kafka-python source tree')
    if broker != 'apache-kafka':
        raise SystemExit(f'unknown broker {broker!r}; accepted: apache-kafka')
    with ApacheKafkaCluster(brokers=1, broker_config=SUITE_BROKER_CONFIG) as cluster:
        # KAFKA_ROOT: the suite's fixtures insist on a Kafka directory even for an external broker.
        env = {**os.environ, 'KAFKA_URI': f'tcp://{cluster.bootstrap_servers}', 'KAFKA_VERSION': cluster.version,
               'KAFKA_ROOT': str(kafka_jars(cluster.version))}
        env.pop('PYTHONPATH', None)  # the suite imports its own test package and the installed kafka-python
        # Stock kafka-python only and the suite's own fixtures: kafka_kip's pytest plugin stays out (and
        # hypothesis's, which trips over the suite's modules on CPython 3.11.7).
        command = [sys.executable, '-m', 'pytest', 'test/integration', '-q', '-p', 'no:kafka_kip', '-p',
                   'no:hypothesispytest', '-p', 'no:cacheprovider', '-o', 'log_level=WARNING',
                   '-o', 'addopts=--timeout=120', '-rfE', *pytest_args]
        return subprocess.run(command, cwd=source, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('source', type=Path)
    parser.add_argument('--broker', default='apache-kafka')
    args, pytest_args = parser.parse_known_args(argv)
    return run(args.source.resolve(), args.broker, pytest_args)


if __name__ == '__main__':
    sys.exit(main())
