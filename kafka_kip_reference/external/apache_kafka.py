"""Apache Kafka itself, run from Maven Central's jars: a KRaft controller and 1-3 brokers on loopback ports.

::

    from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster

    with ApacheKafkaCluster(brokers=3, broker_config={'auto.create.topics.enable': 'false'}) as kafka:
        kafka.create_topic('t', partitions=2)           # replication factor min(3, brokers)
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        kafka.kill_broker(1)                            # kill -9; stop_broker(1) shuts down cleanly
        kafka.start_broker(1)                           # same port and log dir; returns once it is listed
        kafka.elect_leader(TopicPartition('t', 0), 2)   # Kafka's own reassignment + ElectLeaders
        print(kafka.logs())                             # every process's output

The release is ``KAFKA_VERSION`` (default :data:`DEFAULT_VERSION`); its jars are resolved with Maven into
``~/.cache/kafka-kip`` (:mod:`kafka_kip_reference.external.maven`) on first use. The controller runs in its own process,
so brokers can stop and start without losing the quorum; every process gets a small heap, a temporary
log directory and its own log file. Eligible leader replicas (KIP-966) are switched off at format time, as
Kafka's own unclean-election tests do, so :meth:`ApacheKafkaCluster.elect_uncleanly` can elect a stale
replica. :class:`~kafka_kip_reference.external.maven.JavaUnavailable` (raised by ``start()``) says in one line why
Kafka cannot run here (no Java, no Maven, Maven Central unreachable).
"""
from __future__ import annotations

import base64
import enum
import os
import random
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import KafkaError, TopicAlreadyExistsError
from kafka.protocol.metadata import MetadataResponse
from kafka.structs import TopicPartition

from kafka_kip.protocol.requests import metadata_request
from kafka_kip_reference.external import maven
from kafka_kip_reference.external.probe import kafka_request, metadata_brokers

__all__ = ['DEFAULT_VERSION', 'ApacheKafkaCluster', 'BrokerState', 'JavaUnavailable', 'KafkaStartError',
           'kafka_version']

#: The newest Apache Kafka release that Maven Central serves here and that runs on Java 17.
DEFAULT_VERSION = '4.4.0'
LOG4J_VERSION = '2.24.3'
SLF4J_VERSION = '2.0.16'
CONTROLLER_ID = 1000
JVM_OPTIONS = ('-Xms32m', '-Xmx320m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-Xss512k',
               '-XX:+ExitOnOutOfMemoryError', '-Djava.net.preferIPv4Stack=true', '-Djava.awt.headless=true')

JavaUnavailable = maven.JavaUnavailable

#: Broker settings that keep a test cluster small and quick; ``broker_config`` overrides any of them.
TEST_BROKER_CONFIG: dict[str, str] = {
    'group.initial.rebalance.delay.ms': '0',
    'group.min.session.timeout.ms': '1000',  # Kafka's 6000 refuses the short sessions tests use
    # KIP-848 groups: members learn of partitions released by others at their next heartbeat (Kafka's 5000 ms)
    'group.consumer.min.heartbeat.interval.ms': '500',
    'group.consumer.heartbeat.interval.ms': '500',
    'offsets.topic.num.partitions': '5',
    'transaction.state.log.num.partitions': '5',
    'num.network.threads': '2',
    'num.io.threads': '2',
    'background.threads': '2',
    'num.recovery.threads.per.data.dir': '1',
    'num.replica.fetchers': '1',
    'log.cleaner.threads': '1',
    'log.cleaner.dedupe.buffer.size': str(2 * 1024 * 1024),
    'log.segment.bytes': str(16 * 1024 * 1024),
    'log.index.size.max.bytes': str(1024 * 1024),
    'broker.heartbeat.interval.ms': '500',
    'broker.session.timeout.ms': '6000',
    'controlled.shutdown.enable': 'true',
    'replica.fetch.wait.max.ms': '100',
    'replica.lag.time.max.ms': '10000',
    'share.coordinator.state.topic.num.partitions': '1',
}

#: Prefixes of ``broker_config`` keys that the controller needs too (it fences brokers and keeps the ACLs).
_CONTROLLER_KEYS = ('broker.session', 'broker.heartbeat', 'authorizer.', 'allow.everyone.if.no.acl.found',
                    'super.users')
#: The JAAS login module of each SASL mechanism a cluster's SASL_PLAINTEXT listener can offer.
_SASL_LISTENER_JAAS = {
    'OAUTHBEARER': 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                   'unsecuredLoginStringClaim_sub="broker";',
}
_START_ATTEMPTS = 3
_STOP_TIMEOUT = 30.0
_POLL = 0.05
_BIND_FAILURE = re.compile(r'BindException|Address already in use')
_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="[%d{HH:mm:ss,SSS}] %p %m (%c)%n"/></Console>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="out"/></Root>
    <Logger name="kafka.server.KafkaConfig" level="warn"/>
    <Logger name="org.apache.kafka.common.config.AbstractConfig" level="warn"/>
    <Logger name="org.apache.kafka.clients" level="warn"/>
    <Logger name="org.apache.kafka.common.metrics" level="warn"/>
    <Logger name="org.apache.kafka.common.utils.AppInfoParser" level="warn"/>
    <Logger name="state.change.logger" level="warn"/>
  </Loggers>
</Configuration>
"""


class KafkaStartError(RuntimeError):
    """A Kafka process exited or did not become ready; the message ends with the tail of its log."""


class BrokerState(enum.Enum):
    """What the launcher last did to a broker process."""

    RUNNING = 'running'
    STOPPED = 'stopped'  # SIGTERM: controlled shutdown, leadership moved away first
    KILLED = 'killed'  # SIGKILL: the controller fences it after broker.session.timeout.ms


def kafka_version() -> str:
    """``$KAFKA_VERSION`` or :data:`DEFAULT_VERSION`."""
    return os.environ.get('KAFKA_VERSION') or DEFAULT_VERSION


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r'\d+', version)[:3])


def kafka_jars(version: str | None = None) -> Path:
    """The directory holding Kafka ``version``'s broker jars plus a log4j2 binding (resolved once)."""
    version = version or kafka_version()
    return maven.resolve(f'kafka-{version}', [
        f'org.apache.kafka:kafka_2.13:{version}',
        f'org.apache.kafka:kafka-tools:{version}',
        f'org.slf4j:slf4j-api:{SLF4J_VERSION}',
        f'org.apache.logging.log4j:log4j-slf4j2-impl:{LOG4J_VERSION}',
        f'org.apache.logging.log4j:log4j-core:{LOG4J_VERSION}',
    ])


def random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (what ``random-uuid`` prints)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip('=')
        if not text.startswith('-'):  # Kafka refuses ids that would read as a command-line flag
            return text


#: Where ``kafka-storage format`` puts a controller's bootstrap snapshot in its log directory.
_BOOTSTRAP_SNAPSHOT = Path('__cluster_metadata-0') / '00000000000000000000-0000000000.checkpoint'
_bootstrap_snapshots: dict[tuple[str, ...], bytes] = {}
_bootstrap_lock = threading.Lock()


def _bootstrap_snapshot(java: str, classpath: str, controller_config: Path, features: tuple[str, ...]) -> bytes:
    """The bootstrap snapshot ``kafka-storage format`` writes for a controller of ``controller_config`` with
    ``features``: formatted once per process for each release (``classpath``), feature set and controller
    settings other than its address and log directory, which the snapshot does not hold."""
    settings = tuple(line for line in controller_config.read_text().splitlines()
                     if not line.startswith(('listeners=', 'controller.quorum.voters=', 'log.dirs=')))
    key = (classpath, *features, *settings)
    with _bootstrap_lock:
        if key not in _bootstrap_snapshots:
            with tempfile.TemporaryDirectory(prefix='apache-kafka-format-') as scratch:
                config = Path(scratch) / 'controller.properties'
                port = free_port()
                config.write_text(''.join(f'{line}\n' for line in settings) + f'log.dirs={scratch}/controller\n'
                                  f'listeners=CONTROLLER://127.0.0.1:{port}\n'
                                  f'controller.quorum.voters={CONTROLLER_ID}@127.0.0.1:{port}\n')
                run = subprocess.run(
                    [java, '-Xmx128m', '-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', '-cp', classpath,
                     'kafka.tools.StorageTool', 'format', '-t', random_cluster_id(), '-c', str(config), *features],
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
                if run.returncode != 0:
                    raise KafkaStartError(f'formatting the storage of a controller failed:\n'
                                          f'{run.stdout.decode(errors="replace")[-3000:]}')
                _bootstrap_snapshots[key] = (Path(scratch) / 'controller' / _BOOTSTRAP_SNAPSHOT).read_bytes()
        return _bootstrap_snapshots[key]


_ports_handed_out: set[int] = set()
_ports_lock = threading.Lock()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path('/proc/sys/net/ipv4/ip_local_port_range').read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A loopback port that is free now, below the kernel's ephemeral range and never handed out before
    in this process: outgoing connections and ``bind(0)`` servers take their ports from that range, so a
    stopped broker finds its port still free when it starts again."""
    low = _ephemeral_range()[0]
    candidates = list(range(max(1024, low - 12000), low))
    random.shuffle(candidates)
    with _ports_lock:
        for port in candidates:
            if port in _ports_handed_out:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind(('127.0.0.1', port))
                except OSError:
                    continue
            _ports_handed_out.add(port)
            return port
    raise OSError('no free loopback port below the ephemeral range')


def _properties(values: Mapping[str, object]) -> str:
    return ''.join(f'{key}={value}\n' for key, value in values.items())


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        text = path.read_text(errors='replace')
    except FileNotFoundError:
        return ''
    return text[-chars:]


class _Process:
    """One Kafka JVM (controller or broker): its config file, log file and current process."""

    def __init__(self, name: str, config: Path, log: Path) -> None:
        self.name = name
        self.config = config
        self.log = log
        self.popen: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    def spawn(self, java: str, classpath: str, log4j: Path) -> None:
        with open(self.log, 'ab') as out:
            out.write(f'--- {time.strftime("%H:%M:%S")} starting {self.name}\n'.encode())
            out.flush()
            self.popen = subprocess.Popen(
                [java, *JVM_OPTIONS, f'-Dlog4j2.configurationFile={log4j}', '-cp', classpath, 'kafka.Kafka',
                 str(self.config)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        # Runs at interpreter exit too, so a forgotten cluster leaves no JVM behind.
        self._finalizer = weakref.finalize(self, _kill, self.popen)

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, signum: int, timeout: float) -> None:
        """Send ``signum`` and wait for the exit (SIGKILL after ``timeout`` s)."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.popen.send_signal(signum)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        if self._finalizer is not None:
            self._finalizer.detach()
        self.popen = self._finalizer = None

    def tail(self, chars: int = 4000) -> str:
        return _tail(self.log, chars)


def _kill(popen: subprocess.Popen[bytes]) -> None:
    if popen.poll() is None:
        popen.kill()
        popen.wait()


class ApacheKafkaCluster:
    """A KRaft Apache Kafka cluster: one controller process and ``brokers`` broker processes (ids 0..n-1).

    ``broker_config`` entries are written to every broker's server.properties (after the test settings of
    :data:`TEST_BROKER_CONFIG`, so they win). ``version`` defaults to :func:`kafka_version`. A context manager;
    :meth:`start` returns once every broker is listed in Metadata.

    ``sasl_mechanisms`` (only ``'OAUTHBEARER'`` so far) gives every broker a second listener, SASL_PLAINTEXT on a
    port of its own (:attr:`sasl_bootstrap_servers`), with those mechanisms enabled: OAUTHBEARER with Kafka's
    default server callback, the unsecured JWS validator. The brokers and the controller talk over PLAINTEXT.
    """

    def __init__(self, brokers: int = 1, broker_config: Mapping[str, object] | None = None,
                 version: str | None = None, ready_timeout: float = 90.0,
                 sasl_mechanisms: Iterable[str] = ()) -> None:
        if brokers < 1:
            raise ValueError(f'brokers must be at least 1, not {brokers}')
        if isinstance(sasl_mechanisms, str):
            raise TypeError(f'sasl_mechanisms must be a collection of mechanism names, got the string '
                            f'{sasl_mechanisms!r}')
        self.sasl_mechanisms = tuple(sasl_mechanisms)
        unsupported = [m for m in self.sasl_mechanisms if m not in _SASL_LISTENER_JAAS]
        if unsupported:
            raise ValueError(f'SASL mechanism {unsupported[0]!r} is not set up by this launcher; it sets up: '
                             f'{", ".join(_SASL_LISTENER_JAAS)}')
        self.sasl_ports: dict[int, int] = {}
        self.broker_count = brokers
        self.broker_config = {key: str(value) for key, value in (broker_config or {}).items()}
        self.version = version or kafka_version()
        self.ready_timeout = ready_timeout
        self.cluster_id = random_cluster_id()
        self.ports: dict[int, int] = {}
        self.controller_port = 0
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._classpath = ''
        self._java = ''
        self._controller: _Process | None = None
        self._brokers: dict[int, _Process] = {}
        self._states: dict[int, BrokerState] = {}
        self._lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------------

    @property
    def broker_ids(self) -> list[int]:
        return list(range(self.broker_count))

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's address, comma-separated (fixed for the life of the cluster)."""
        return ','.join(self.broker_address(b) for b in self.broker_ids)

    def broker_address(self, broker_id: int) -> str:
        return f'127.0.0.1:{self.ports[broker_id]}'

    @property
    def sasl_bootstrap_servers(self) -> str:
        """Every broker's SASL_PLAINTEXT address, comma-separated (only with ``sasl_mechanisms``)."""
        if not self.sasl_mechanisms:
            raise ValueError('this cluster has no SASL listener: give sasl_mechanisms')
        return ','.join(f'127.0.0.1:{self.sasl_ports[b]}' for b in self.broker_ids)

    def start(self) -> ApacheKafkaCluster:
        """Resolve the jars, format storage, start the controller and the brokers; wait until all are listed.

        Raises :class:`JavaUnavailable` when Java or the jars cannot be had, :class:`KafkaStartError` when a
        process fails.
        """
        self._java = maven.require_tool('java')
        self._classpath = str(kafka_jars(self.version) / '*')
        for attempt in range(_START_ATTEMPTS):
            self._dir = tempfile.TemporaryDirectory(prefix='apache-kafka-')
            try:
                self._layout(Path(self._dir.name))
                self._format()
                for process in [self._controller, *self._brokers.values()]:
                    process.spawn(self._java, self._classpath, self._root / 'log4j2.xml')
                self._states = {b: BrokerState.RUNNING for b in self.broker_ids}
                self.wait_for_brokers(self.broker_ids, timeout=self.ready_timeout)
                return self
            except KafkaStartError as exc:
                bind_failure = any(_BIND_FAILURE.search(p.tail()) for p in self._processes())
                self.close()
                if not bind_failure or attempt == _START_ATTEMPTS - 1:
                    raise
                exc.__traceback__ = None  # ports were taken between probing and binding: new ports
        raise AssertionError('unreachable')

    def close(self) -> None:
        """Kill every process and delete the log directories. Idempotent."""
        for process in self._processes():
            process.signal(signal.SIGKILL, timeout=_STOP_TIMEOUT)
        self._brokers, self._controller, self._states = {}, None, {}
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> ApacheKafkaCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f'<ApacheKafkaCluster {self.version} {self.broker_count} brokers {self.ports or "not started"}>'

    @property
    def _root(self) -> Path:
        assert self._dir is not None, 'the cluster is not started'
        return Path(self._dir.name)

    def _processes(self) -> list[_Process]:
        return [p for p in [self._controller, *self._brokers.values()] if p is not None]

    def _layout(self, root: Path) -> None:
        (root / 'log4j2.xml').write_text(_LOG4J2_XML)
        self.controller_port = free_port()
        self.ports = {b: free_port() for b in self.broker_ids}
        self.sasl_ports = {b: free_port() for b in self.broker_ids} if self.sasl_mechanisms else {}
        voters = f'{CONTROLLER_ID}@127.0.0.1:{self.controller_port}'
        common = {'controller.quorum.voters': voters, 'controller.listener.names': 'CONTROLLER',
                  'listener.security.protocol.map': 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT'}
        controller = root / 'controller.properties'
        controller.write_text(_properties({
            'process.roles': 'controller', 'node.id': CONTROLLER_ID, **common,
            'listeners': f'CONTROLLER://127.0.0.1:{self.controller_port}', 'log.dirs': root / 'controller',
            **{k: v for k, v in {**TEST_BROKER_CONFIG, **self.broker_config}.items() if k.startswith(_CONTROLLER_KEYS)},
        }))
        self._controller = _Process('controller', controller, root / 'controller.log')
        replication = min(3, self.broker_count)
        for broker_id in self.broker_ids:
            address = self.broker_address(broker_id)
            listeners = f'PLAINTEXT://{address}'
            sasl = {}
            if self.sasl_mechanisms:
                listeners += f',SASL_PLAINTEXT://127.0.0.1:{self.sasl_ports[broker_id]}'
                sasl = {'listener.security.protocol.map': f'{common["listener.security.protocol.map"]},'
                                                          'SASL_PLAINTEXT:SASL_PLAINTEXT',
                        'sasl.enabled.mechanisms': ','.join(self.sasl_mechanisms),
                        **{f'listener.name.sasl_plaintext.{m.lower()}.sasl.jaas.config': _SASL_LISTENER_JAAS[m]
                           for m in self.sasl_mechanisms}}
            config = root / f'broker-{broker_id}.properties'
            config.write_text(_properties({
                'process.roles': 'broker', 'node.id': broker_id, **common, **sasl,
                'listeners': listeners, 'advertised.listeners': listeners,
                'inter.broker.listener.name': 'PLAINTEXT', 'log.dirs': root / f'broker-{broker_id}',
                'offsets.topic.replication.factor': replication,
                'transaction.state.log.replication.factor': replication,
                'transaction.state.log.min.isr': 1,
                'share.coordinator.state.topic.replication.factor': replication,
                **TEST_BROKER_CONFIG, **self.broker_config,
            }))
            self._brokers[broker_id] = _Process(f'broker {broker_id}', config, root / f'broker-{broker_id}.log')

    def _format(self) -> None:
        """Every process's storage as ``kafka-storage format`` leaves it: a ``meta.properties`` in each log
        directory, and the controller's bootstrap snapshot (the finalized feature levels). The snapshot does not
        depend on the cluster or node ids, so the format tool (seconds of JVM start-up per run) runs once per
        process for each release, feature set and controller settings (:func:`_bootstrap_snapshot`)."""
        features: tuple[str, ...] = ()
        if _version_tuple(self.version) >= (4, 0):
            # KIP-966: with eligible leader replicas on (the default from 4.1) a stale replica is never elected.
            features = ('--feature', 'eligible.leader.replicas.version=0')
        controller = self._controller
        assert controller is not None
        snapshot = _bootstrap_snapshot(self._java, self._classpath, controller.config, features)
        directories = {CONTROLLER_ID: self._root / 'controller',
                       **{b: self._root / f'broker-{b}' for b in self.broker_ids}}
        for node_id, directory in directories.items():
            directory.mkdir()
            (directory / 'meta.properties').write_text(_properties({
                'node.id': node_id, 'directory.id': random_cluster_id(), 'version': 1, 'cluster.id': self.cluster_id}))
        (directories[CONTROLLER_ID] / _BOOTSTRAP_SNAPSHOT).parent.mkdir()
        (directories[CONTROLLER_ID] / _BOOTSTRAP_SNAPSHOT).write_bytes(snapshot)

    # -- brokers ------------------------------------------------------------------------------------

    def broker_state(self, broker_id: int) -> BrokerState:
        return self._states[broker_id]

    def running_brokers(self) -> list[int]:
        return [b for b in self.broker_ids if self._states.get(b) is BrokerState.RUNNING]

    def stop_broker(self, broker_id: int, wait: bool = True) -> None:
        """Shut broker ``broker_id`` down cleanly (SIGTERM: controlled shutdown moves its leaderships and
        takes it out of every ISR first). With ``wait``, return once the others no longer list it."""
        self._check_id(broker_id)
        self._brokers[broker_id].signal(signal.SIGTERM, timeout=_STOP_TIMEOUT)
        self._states[broker_id] = BrokerState.STOPPED
        if wait and self.running_brokers():
            self.wait_for_brokers(self.running_brokers())

    def kill_broker(self, broker_id: int) -> None:
        """``kill -9`` broker ``broker_id``: no controlled shutdown; the controller notices after
        ``broker.session.timeout.ms``."""
        self._check_id(broker_id)
        self._brokers[broker_id].signal(signal.SIGKILL, timeout=_STOP_TIMEOUT)
        self._states[broker_id] = BrokerState.KILLED

    def start_broker(self, broker_id: int, wait: bool = True) -> None:
        """Start broker ``broker_id`` again on its port and log directory; with ``wait``, return once the
        running brokers' Metadata lists it."""
        self._check_id(broker_id)
        process = self._brokers[broker_id]
        if process.alive:
            raise ValueError(f'broker {broker_id} is already running')
        process.spawn(self._java, self._classpath, self._root / 'log4j2.xml')
        self._states[broker_id] = BrokerState.RUNNING
        if wait:
            self.wait_for_brokers(self.running_brokers())

    def start_stopped_brokers(self) -> None:
        """Start every broker that was stopped or killed; returns once all are listed."""
        stopped = [b for b in self.broker_ids if self._states.get(b) is not BrokerState.RUNNING]
        for broker_id in stopped:
            self.start_broker(broker_id, wait=False)
        if stopped:
            self.wait_for_brokers(self.broker_ids)

    def restart_broker(self, broker_id: int, kill: bool = False) -> None:
        """Stop (or kill) broker ``broker_id`` and start it again; returns once it is listed."""
        (self.kill_broker if kill else self.stop_broker)(broker_id)
        self.start_broker(broker_id)

    def _check_id(self, broker_id: int) -> None:
        if broker_id not in self._brokers:
            raise ValueError(f'no broker {broker_id}; brokers are {self.broker_ids}')

    def wait_for_brokers(self, broker_ids: Iterable[int], timeout: float = 60.0) -> None:
        """Wait until the Metadata of every broker in ``broker_ids`` lists exactly ``broker_ids``.

        Raises :class:`KafkaStartError` with the log tail when a process exits or the time runs out.
        """
        expected = set(broker_ids)
        self.wait_until(lambda: all(set(self._listed(b)) == expected for b in expected), timeout,
                        f'brokers {sorted(expected)} listed by each other')

    def _listed(self, broker_id: int) -> dict[int, str]:
        """The brokers that broker ``broker_id`` lists, if it answers as a member of this cluster."""
        try:
            cluster_id, brokers = metadata_brokers(self.broker_address(broker_id), timeout=2.0)
        except (OSError, ValueError):
            return {}
        return brokers if cluster_id == self.cluster_id else {}

    def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``predicate`` until it holds; :class:`KafkaStartError` (with the logs of processes that
        should run but exited) when a process died or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while not predicate():
            dead = [p for p in self._expected_running() if not p.alive]
            if dead or time.monotonic() >= deadline:
                culprits = dead or self._expected_running()
                reason = 'exited' if dead else f'not ready within {timeout:.0f}s'
                raise KafkaStartError(f'waiting for {what}: {", ".join(p.name for p in culprits)} {reason}\n'
                                      + '\n'.join(f'--- {p.name} log tail:\n{p.tail()}' for p in culprits))
            time.sleep(_POLL)

    def _expected_running(self) -> list[_Process]:
        running = [self._brokers[b] for b in self.running_brokers()]
        return ([self._controller] if self._controller else []) + running

    def logs(self, tail_chars: int | None = None) -> str:
        """Every process's output (controller first), each under a header line; with ``tail_chars``, only
        the last ``tail_chars`` characters of each."""
        return '\n'.join(f'===== {p.name} ({p.log.name})\n{_tail(p.log, tail_chars or 10**12)}'
                         for p in self._processes())

    # -- topics and leadership (Kafka's own admin APIs) ----------------------------------------------

    def admin(self, **config: Any) -> KafkaAdminClient:
        """A stock kafka-python admin client on the running brokers (the caller closes it)."""
        bootstrap = ','.join(self.broker_address(b) for b in self.running_brokers())
        return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000, **config)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     config: Mapping[str, object] | None = None,
                     replica_assignment: Mapping[int, list[int]] | None = None) -> None:
        """Create ``name`` (replication factor ``min(3, brokers)`` unless given, or the replicas of each
        partition in ``replica_assignment``); returns once every running broker's Metadata has a leader for
        each partition."""
        if replica_assignment:
            partitions = len(replica_assignment)
            spec: dict[str, Any] = {'assignments': {p: list(r) for p, r in replica_assignment.items()}}
        else:
            spec = {'num_partitions': partitions, 'replication_factor': replication_factor or min(3, self.broker_count)}
        if config:
            spec['configs'] = {k: str(v) for k, v in config.items()}
        with self._admin() as admin:
            admin.create_topics({name: spec})
        self.wait_until(lambda: all(self._leaders_known(b, name, partitions) for b in self.running_brokers()),
                        30.0, f'leaders of {name} on every broker')

    def delete_topic(self, name: str) -> None:
        """Delete ``name``; returns once no running broker's Metadata has it any more."""
        with self._admin() as admin:
            admin.delete_topics([name])
        self.wait_until(lambda: all(self._topic_gone(b, name) for b in self.running_brokers()), 30.0,
                        f'{name} gone from every broker')

    def recreate_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None) -> None:
        """Delete ``name`` and create it again (a new topic id, an empty log)."""
        self.delete_topic(name)
        deadline = time.monotonic() + 30.0
        while True:
            try:
                return self.create_topic(name, partitions, replication_factor)
            except TopicAlreadyExistsError:  # the deletion is still being applied on the controller
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    def _topic_metadata(self, name: str, broker_id: int | None) -> Any:
        broker_id = self.running_brokers()[0] if broker_id is None else broker_id
        response = kafka_request(self.broker_address(broker_id), metadata_request([name]), MetadataResponse)
        return next((topic for topic in response.topics if topic.name == name and not topic.error_code), None)

    def partition(self, tp: TopicPartition, broker_id: int | None = None) -> Any:
        """``tp``'s Metadata (v12) entry as broker ``broker_id`` (default: the first running) sees it:
        ``leader_id``, ``leader_epoch``, ``replica_nodes``, ``isr_nodes``, ...; ``None`` if it lacks it."""
        topic = self._topic_metadata(tp.topic, broker_id)
        partitions = [] if topic is None else topic.partitions
        return next((partition for partition in partitions if partition.partition_index == tp.partition), None)

    def topic_id(self, name: str, broker_id: int | None = None) -> uuid.UUID | None:
        """The topic id (KIP-516) of ``name`` as broker ``broker_id`` (default: the first running) sees it."""
        topic = self._topic_metadata(name, broker_id)
        return None if topic is None else topic.topic_id

    def leader(self, tp: TopicPartition) -> int:
        """The leader of ``tp`` (-1 when it has none)."""
        return self.partition(tp).leader_id

    def isr(self, tp: TopicPartition) -> list[int]:
        return list(self.partition(tp).isr_nodes)

    def replicas(self, tp: TopicPartition) -> list[int]:
        return list(self.partition(tp).replica_nodes)

    def elect_leader(self, tp: TopicPartition, broker_id: int) -> int:
        """Make in-sync ``broker_id`` the leader of ``tp`` the way an operator does: a reassignment that puts
        it first among the replicas, then a preferred-leader election. Returns the new leader epoch."""
        replicas = self.replicas(tp)
        if broker_id not in replicas:
            raise ValueError(f'broker {broker_id} is not a replica of {tp} (replicas {replicas})')
        with self._admin() as admin:
            errors = admin.alter_partition_reassignments(
                {tp: [broker_id] + [r for r in replicas if r != broker_id]})
            if errors.get(tp) is not None:
                raise errors[tp](f'reassignment of {tp}')
            self.wait_until(lambda: self.replicas(tp)[0] == broker_id, 30.0, f'{broker_id} first replica of {tp}')
            admin.elect_leaders(0, {tp.topic: [tp.partition]})
        return self.wait_for_leader(tp, [broker_id])[1]

    def elect_uncleanly(self, tp: TopicPartition, broker_id: int) -> int:
        """Make the out-of-sync (stopped) replica ``broker_id`` the leader of ``tp``, losing what it lacks.

        Every other running replica of ``tp`` is stopped, ``broker_id`` is started and elected with an
        unclean ElectLeaders, then the others start again and truncate their logs to the new leader's.
        Returns the new leader epoch.
        """
        others = [r for r in self.replicas(tp) if r != broker_id and self._states[r] is BrokerState.RUNNING]
        if self._states[broker_id] is BrokerState.RUNNING:
            raise ValueError(f'broker {broker_id} is running; stop it before it can be elected uncleanly')
        if others:  # their controlled shutdowns at once, not one after the other
            with ThreadPoolExecutor(len(others)) as pool:
                list(pool.map(lambda other: self.stop_broker(other, wait=False), others))
        self.start_broker(broker_id)
        with self._admin() as admin:
            admin.elect_leaders(1, {tp.topic: [tp.partition]})
        epoch = self.wait_for_leader(tp, [broker_id])[1]
        for other in others:
            self.start_broker(other, wait=False)
        self.wait_for_brokers(self.running_brokers())
        self.wait_until(lambda: set(self.isr(tp)) >= {broker_id, *others}, 60.0,
                        f'the old replicas of {tp} back in sync')
        return epoch

    def wait_for_leader(self, tp: TopicPartition, among: Iterable[int] | None = None,
                        timeout: float = 60.0) -> tuple[int, int]:
        """Wait until every running broker names the same leader of ``tp`` (one of ``among``, if given) with
        the same leader epoch; returns ``(leader, epoch)``."""
        wanted = set(self.broker_ids if among is None else among)
        seen: dict[int, tuple[int, int]] = {}

        def agreed() -> bool:
            for b in self.running_brokers():
                partition = self._try_partition(tp, b)
                if partition is None or partition.leader_id not in wanted:
                    return False
                seen[b] = (partition.leader_id, partition.leader_epoch)
            return len(set(seen.values())) == 1

        self.wait_until(agreed, timeout, f'a leader of {tp} among {sorted(wanted)} on every running broker')
        return next(iter(seen.values()))

    def _try_partition(self, tp: TopicPartition, broker_id: int) -> Any:
        try:
            return self.partition(tp, broker_id)
        except (OSError, ValueError):
            return None

    def _leaders_known(self, broker_id: int, topic: str, partitions: int) -> bool:
        found = [self._try_partition(TopicPartition(topic, p), broker_id) for p in range(partitions)]
        return all(p is not None and p.leader_id >= 0 for p in found)

    def _topic_gone(self, broker_id: int, topic: str) -> bool:
        try:
            return self.partition(TopicPartition(topic, 0), broker_id) is None
        except (OSError, ValueError):
            return False

    def _admin(self) -> KafkaAdminClient:
        try:
            return self.admin()
        except KafkaError as exc:
            raise KafkaStartError(f'no admin connection to {self.running_brokers()}: {exc!r}') from exc



# -- clusters shared by a whole test session ---------------------------------------------------------

_Key = tuple[str, int, tuple[tuple[str, str], ...], tuple[str, ...]]
_shared: dict[_Key, ApacheKafkaCluster] = {}
_shared_failure: list[JavaUnavailable] = []
_shared_lock = threading.Lock()  # guards the three dicts; each cluster's start holds its own lock
_starting: dict[_Key, threading.Lock] = {}


def shared_cluster(name: str = 'default', brokers: int = 3, broker_config: Mapping[str, object] | None = None,
                   sasl_mechanisms: Iterable[str] = ()) -> ApacheKafkaCluster:
    """A cluster started once per process for ``(name, brokers, broker_config, sasl_mechanisms)`` and reused by
    every caller.

    Callers that stop or kill brokers start them again before they return, so the next user finds every
    broker running. Callers of one cluster wait for its start; other clusters' starts do not hold them up. After
    one :class:`JavaUnavailable`, every later call raises it again at once. The clusters stop at
    :func:`close_shared_clusters` (the pytest plugin calls it when the session ends) or at interpreter exit.
    """
    key = (name, brokers, tuple(sorted((k, str(v)) for k, v in (broker_config or {}).items())),
           tuple(sasl_mechanisms))
    with _shared_lock:
        start_lock = _starting.setdefault(key, threading.Lock())
    with start_lock:
        with _shared_lock:
            if _shared_failure:
                raise _shared_failure[0]
            cluster = _shared.get(key)
        if cluster is None:
            try:
                cluster = ApacheKafkaCluster(brokers, broker_config, sasl_mechanisms=key[3]).start()
            except JavaUnavailable as exc:
                with _shared_lock:
                    _shared_failure.append(exc)
                raise
            with _shared_lock:
                _shared[key] = cluster
        return cluster


def close_shared_clusters() -> None:
    """Stop every cluster :func:`shared_cluster` started."""
    with _shared_lock:
        for cluster in _shared.values():
            cluster.close()
        _shared.clear()
