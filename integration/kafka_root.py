"""A ``KAFKA_ROOT`` for kafka-python's suite whose ``bin/`` scripts start a reference broker.

kafka-python's ``KafkaFixture`` (``test/integration/fixtures.py``; its SSL tests) starts its own broker from
``KAFKA_ROOT``: ``bin/kafka-storage.sh format ...`` (nothing to do: a reference broker keeps no log directories),
then ``bin/kafka-run-class.sh kafka.Kafka kafka.properties``, and waits for Kafka's start line on stdout.
:func:`make_kafka_root` writes those two scripts (and ``kafka-server-start.sh``); they run this module, which
starts ``kafka-kip broker --brokers 1 --config-file`` with the properties the fixture wrote, less the keys of a
JVM KRaft deployment that mean nothing to a one-process reference broker (:data:`DEPLOYMENT_KEYS`, and the
``CONTROLLER`` listener), prints Kafka's start line once the broker answers, and stops it on SIGTERM.
Every other key goes to the broker, which refuses what it does not support, naming the key.
"""
from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from kafka_kip.settings.properties import parse_properties

#: A KRaft broker's process, thread, socket-buffer, replication and log-directory settings: no meaning for a
#: reference broker (one asyncio process, every replica in memory).
DEPLOYMENT_KEYS = frozenset((
    'process.roles', 'node.id', 'controller.quorum.bootstrap.servers', 'controller.quorum.voters',
    'controller.listener.names', 'inter.broker.listener.name', 'advertised.listeners',
    'listener.security.protocol.map', 'num.network.threads', 'num.io.threads', 'socket.send.buffer.bytes',
    'socket.receive.buffer.bytes', 'log.dirs', 'log.dir', 'replica.lag.time.max.ms', 'replica.socket.timeout.ms',
    'num.recovery.threads.per.data.dir', 'share.coordinator.state.topic.replication.factor',
    'share.coordinator.state.topic.min.isr', 'transaction.state.log.min.isr', 'log.cleaner.enable',
    'offsets.commit.timeout.ms',
))
#: Apache Kafka's start line (``KafkaRaftServer``), which the fixture waits for.
STARTED_LINE = '[KafkaRaftServer nodeId={node_id}] Kafka Server started'
_SCRIPT = '#!/bin/sh\n# {name}: see {module}\nexec {python} -m integration.kafka_root {command} "$@"\n'
SCRIPTS = {'kafka-storage.sh': 'storage', 'kafka-run-class.sh': 'run-class', 'kafka-server-start.sh': 'server-start'}


def make_kafka_root(directory: Path) -> Path:
    """Write the ``bin/`` scripts into ``directory``; returns it."""
    checkout = Path(__file__).resolve().parents[1]
    bin_dir = directory / 'bin'
    bin_dir.mkdir(parents=True, exist_ok=True)
    python = f'env PYTHONPATH={shlex.quote(str(checkout))} {shlex.quote(sys.executable)}'
    for name, command in SCRIPTS.items():
        script = bin_dir / name
        script.write_text(_SCRIPT.format(name=name, module=__name__, python=python, command=command))
        script.chmod(0o755)
    return directory


def broker_properties(properties: dict[str, str]) -> dict[str, str]:
    """The fixture's properties as ``kafka-kip broker`` takes them: without :data:`DEPLOYMENT_KEYS` and the
    ``CONTROLLER`` listener."""
    kept = {name: value for name, value in properties.items() if name not in DEPLOYMENT_KEYS}
    if 'listeners' in kept:
        kept['listeners'] = ','.join(entry for entry in kept['listeners'].split(',')
                                     if not entry.strip().upper().startswith('CONTROLLER:'))
    return kept


def serve(properties_file: str) -> int:
    """Run a reference broker from ``properties_file`` until SIGTERM; Kafka's start line once it listens."""
    properties = parse_properties(Path(properties_file).read_text())
    with tempfile.NamedTemporaryFile('w', suffix='.properties', prefix='kafka-kip-') as handle:
        handle.write(''.join(f'{name}={value}\n' for name, value in broker_properties(properties).items()))
        handle.flush()
        broker = subprocess.Popen([sys.executable, '-m', 'kafka_kip', 'broker', '--brokers', '1',
                                   '--config-file', handle.name], stdout=subprocess.PIPE, text=True)
        signal.signal(signal.SIGTERM, lambda *_: broker.terminate())
        first = broker.stdout.readline()  # the bootstrap servers, once the broker listens
        if first:
            print(first.rstrip(), flush=True)
            print(STARTED_LINE.format(node_id=properties.get('node.id', '0')), flush=True)
            for line in broker.stdout:
                print(line.rstrip(), flush=True)
        return broker.wait()


def main(argv: list[str]) -> int:
    command, *args = argv
    if command == 'storage':
        return 0 if args[:1] == ['format'] else _refuse('kafka-storage.sh', args)
    if command == 'run-class' and args[:1] == ['kafka.Kafka'] and len(args) == 2:
        return serve(args[1])
    if command == 'server-start' and len(args) == 1:
        return serve(args[0])
    return _refuse(f'{command} script', args)


def _refuse(script: str, args: list[str]) -> int:
    print(f'{__name__}: {script} {" ".join(args)!r} is not supported; the reference KAFKA_ROOT runs '
          f'kafka-storage.sh format, kafka-run-class.sh kafka.Kafka PROPS and kafka-server-start.sh PROPS', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
