"""The replicators the MirrorMaker 2 comparison runs, each as its own process: MirrorMaker 2 in dedicated mode
(the launcher: jars from Maven, its properties, its log configuration) and ``python -m kafka_kip mirror``."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from benchmarks.harness import BenchmarkError
from kafka_kip_reference.external import maven
from kafka_kip_reference.external.apache_kafka import (
    _LOG4J2_XML,
    LOG4J_VERSION,
    SLF4J_VERSION,
    ApacheKafkaCluster,
)

#: connect-mirror 4.4.0 is not served by Maven Central here; 4.3.1 is the newest that is (a 4.x client of 4.4 brokers).
MM2_VERSION = os.environ.get('MM2_VERSION') or '4.3.1'
#: What bin/connect-mirror-maker.sh gives the JVM (KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS defaults).
MM2_JVM_OPTIONS = ('-Xms256m', '-Xmx1g', '-server', '-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20',
                   '-XX:InitiatingHeapOccupancyPercent=35', '-XX:+ExplicitGCInvokesConcurrent',
                   '-Djava.awt.headless=true')
GROUP = 'app'
TIMEOUT_S = 600.0
_POLL_S = 0.1
_TICKS = os.sysconf('SC_CLK_TCK')


def mm2_jars() -> Path:
    return maven.resolve(f'connect-mirror-{MM2_VERSION}', [
        f'org.apache.kafka:connect-mirror:{MM2_VERSION}', f'org.slf4j:slf4j-api:{SLF4J_VERSION}',
        f'org.apache.logging.log4j:log4j-slf4j2-impl:{LOG4J_VERSION}',
        f'org.apache.logging.log4j:log4j-core:{LOG4J_VERSION}'])


# -- the replicators ----------------------------------------------------------------------------------------

class Replicator:
    """One replicator process between ``source`` and ``target``, copying topics matching ``topics`` (a regex)."""

    name = ''
    #: Whether it writes in transactions: the target's end offsets then count markers too, so copies are counted by
    #: reading (read_committed) once the end offsets reach the expected count.
    transactional = False

    def __init__(self, workdir: Path, source: str, target: str, topics: str) -> None:
        self.workdir, self.source, self.target, self.topics = workdir, source, target, topics
        self.popen: subprocess.Popen[bytes] | None = None
        self.log = workdir / f'{self.name.replace(" ", "-")}.log'
        self.started_at = 0.0

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        with open(self.log, 'ab') as out:
            self.started_at = time.perf_counter()
            self.popen = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True)

    def check_alive(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            raise BenchmarkError(f'{self.name} exited:\n{self.log.read_text(errors="replace")[-3000:]}')

    def cpu_seconds(self) -> float:
        """User + system CPU of the running process, every thread."""
        assert self.popen is not None
        fields = Path(f'/proc/{self.popen.pid}/stat').read_text().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS

    def kill(self) -> None:
        """``kill -9``."""
        if self.popen is not None:
            self.popen.kill()
            self.popen.wait()
            self.popen = None

    def stop(self) -> int | None:
        """SIGTERM (``kill -9`` after 120 s); returns the exit code (None when it was not running)."""
        if self.popen is None:
            return None
        self.popen.send_signal(signal.SIGTERM)
        try:
            code = self.popen.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            code = self.popen.wait()
        self.popen = None
        return code

    def log_size(self) -> int:
        """Bytes in the log so far: :meth:`reports` from here on only look past it."""
        return self.log.stat().st_size if self.log.exists() else 0

    def reports(self, since: int = 0) -> list[str]:
        """What the replicator said about a truncation in its log past byte ``since`` (one line each)."""
        raise NotImplementedError

    def stopped_partitions(self, since: int = 0) -> set[str]:
        """``topic-partition`` names the replicator stopped copying (and said so) past byte ``since``."""
        return set()

    def _log_lines(self, since: int) -> list[str]:
        with open(self.log, 'rb') as log:
            log.seek(since)
            return log.read().decode(errors='replace').splitlines()


#: The Java consumer's truncation line ("Truncation detected for partition t-0 at offset FetchPosition{offset=120,
#: ...}, resetting offset to the first offset known to diverge FetchPosition{offset=100, ...}") is logged at INFO by
#: SubscriptionState, which the brokers' log configuration silences with the rest of org.apache.kafka.clients; MM2's
#: own distribution logs it (its root logger is at INFO), so MM2 runs keep it.
MM2_LOG4J2_XML = _LOG4J2_XML.replace('  </Loggers>', '    <Logger name="org.apache.kafka.clients.consumer.internals.'
                                                     'SubscriptionState" level="info"/>\n  </Loggers>')
_JAVA_TRUNCATION = re.compile(r'Truncation detected for partition (\S+) at offset .*?offset=(\d+).*'
                              r'diverge .*?offset=(\d+)')


class MirrorMaker2(Replicator):
    name = 'MirrorMaker 2'

    def __init__(self, workdir: Path, source: str, target: str, topics: str, tasks: int = 1,
                 source_replication: int = 1, exactly_once: bool = False) -> None:
        options = ([f'tasks.max={tasks}'] if tasks != 1 else []) + (['exactly-once'] if exactly_once else [])
        if options:
            self.name = f'MirrorMaker 2 ({", ".join(options)})'
        super().__init__(workdir, source, target, topics)
        self.tasks = tasks
        self.source_replication = source_replication  # of the topics it keeps on the source
        # KIP-618 in dedicated mode, as Kafka's docs enable it: for the cluster written to; its writes are transactions
        self.transactional = exactly_once

    def argv(self) -> list[str]:
        config = self.workdir / 'mm2.properties'
        config.write_text(''.join(f'{k}={v}\n' for k, v in {
            'clusters': 'A, B', 'A.bootstrap.servers': self.source, 'B.bootstrap.servers': self.target,
            'A->B.enabled': 'true', 'B->A.enabled': 'false', 'A->B.topics': self.topics, 'A->B.groups': GROUP,
            'replication.policy.class': 'org.apache.kafka.connect.mirror.IdentityReplicationPolicy',
            'sync.group.offsets.enabled': 'true', 'sync.group.offsets.interval.seconds': '1',
            'emit.checkpoints.interval.seconds': '1', 'refresh.topics.interval.seconds': '1',
            'refresh.groups.interval.seconds': '1', 'tasks.max': self.tasks,
            **({'B.exactly.once.source.support': 'enabled'} if self.transactional else {}),
            # a single-broker target: every topic there with one replica
            'replication.factor': '1', 'checkpoints.topic.replication.factor': '1',
            'heartbeats.topic.replication.factor': '1', 'offset-syncs.topic.replication.factor': '1',
            # on the source, as many as it has brokers: its offset syncs (A->B), the heartbeats of the reverse flow
            # (emitted even though B->A is disabled) and the internal topics of the herder whose target is A
            'A->B.offset-syncs.topic.replication.factor': self.source_replication,
            'B->A.heartbeats.topic.replication.factor': self.source_replication,
            **{f'{cluster}.{store}.storage.replication.factor': replicas
               for cluster, replicas in (('A', self.source_replication), ('B', 1))
               for store in ('config', 'offset', 'status')},
        }.items()))
        log4j = self.workdir / 'log4j2.xml'
        log4j.write_text(MM2_LOG4J2_XML)
        return [maven.require_tool('java'), *MM2_JVM_OPTIONS, f'-Dlog4j2.configurationFile={log4j}',
                '-cp', f'{mm2_jars()}/*', 'org.apache.kafka.connect.mirror.MirrorMaker', str(config)]

    def reports(self, since: int = 0) -> list[str]:
        """The Java consumer's truncation lines: where its position was and where it reset it to."""
        return [f'log INFO, partition {m[1].rpartition("-")[2]}: truncation detected at offset {m[2]}, position '
                f'reset to {m[3]}' for m in map(_JAVA_TRUNCATION.search, self._log_lines(since)) if m]


class KafkaKipMirror(Replicator):
    name = 'kafka-kip mirror'

    def __init__(self, workdir: Path, source: str, target: str, topics: str, on_truncation: str | None = None,
                 json_events: bool = False) -> None:
        if on_truncation:
            self.name = f'kafka-kip mirror --on-truncation {on_truncation}'
        super().__init__(workdir, source, target, topics)
        self.on_truncation = on_truncation
        self.json_events = json_events  # --json: incidents on stderr as JSON lines, for reports()

    def argv(self) -> list[str]:
        options = ['--on-truncation', self.on_truncation] if self.on_truncation else []
        return [sys.executable, '-m', 'kafka_kip', 'mirror', '--source', self.source, '--target', self.target,
                '--topics', self.topics, '--group-sync', GROUP, *options, *(['--json'] if self.json_events else [])]

    def incidents(self, since: int = 0) -> list[dict]:
        """The ``--json`` incident events in the log past byte ``since``."""
        found = []
        for line in self._log_lines(since):
            try:
                event = json.loads(line)
            except ValueError:
                continue  # the summary on stdout spans lines
            if isinstance(event, dict) and event.get('event') == 'incident':
                found.append(event)
        return found

    def reports(self, since: int = 0) -> list[str]:
        return [f'{e["kind"]} incident, partition {e["source"].rpartition("-")[2]}: truncated at '
                f'{e["truncated_at"]}, lost {_span(e["lost"])}, target keeps {_span(e["divergent"])}, '
                + ('partition stopped' if e['stopped'] else f'continued at target offset {e.get("continued_at")}')
                for e in self.incidents(since)]

    def stopped_partitions(self, since: int = 0) -> set[str]:
        return {e['source'] for e in self.incidents(since) if e['stopped']}


def _span(offsets: Sequence[int] | None) -> str:
    """``[100, 120)`` as ``100..119``; ``none`` for None."""
    return 'none' if not offsets else f'{offsets[0]}..{offsets[1] - 1}'


def make(key: str, workdir: Path, source: str, target: str, topics: str, source_replication: int = 1,
         json_events: bool = False) -> Replicator:
    """The replicator named ``key``: ``kafka-kip``, ``kafka-kip:<on-truncation>``, ``mm2`` (tasks.max=1, its
    default), ``mm2:<tasks.max>`` or ``mm2:eos`` (tasks.max=1, ``exactly.once.source.support=enabled``)."""
    if key.startswith('mm2'):
        option = key.partition(':')[2]
        return MirrorMaker2(workdir, source, target, topics, tasks=1 if option in ('', 'eos') else int(option),
                            source_replication=source_replication, exactly_once=option == 'eos')
    return KafkaKipMirror(workdir, source, target, topics, on_truncation=key.partition(':')[2] or None,
                          json_events=json_events)


def check_replicator_key(key: str) -> None:
    if not re.fullmatch(r'mm2(:([1-9]\d*|eos))?|kafka-kip(:(stop|closest))?', key):
        raise ValueError(f'unknown replicator {key!r}: kafka-kip, kafka-kip:stop, kafka-kip:closest, mm2, '
                         'mm2:<tasks.max> or mm2:eos')


def wait_for(predicate: Callable[[], bool], what: str, replicator: Replicator, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        replicator.check_alive()
        if time.monotonic() > deadline:
            raise BenchmarkError(f'{replicator.name}: {what} not reached within {timeout:.0f}s')
        time.sleep(_POLL_S)



@contextmanager
def target_cluster() -> Iterator[ApacheKafkaCluster]:
    with ApacheKafkaCluster(brokers=1) as target:
        yield target

