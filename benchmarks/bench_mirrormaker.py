"""MirrorMaker 2 against ``kafka-kip mirror``, each copying the same topics between two Apache Kafka clusters.

Both replicators run as their own processes next to two Apache Kafka clusters (:mod:`kafka_kip_reference.external.apache_kafka`,
one broker each; three for the truncation scenario's source): MirrorMaker 2 in dedicated mode
(``org.apache.kafka.connect.mirror.MirrorMaker`` from ``connect-mirror``, resolved by Maven;
``IdentityReplicationPolicy`` so target topics keep their names; group offset sync on, checkpoints and syncs every
second; otherwise its defaults) and ``python -m kafka_kip mirror`` at its defaults (``--offset-mode auto``,
``--group-sync``). Every replicator run gets a fresh target cluster.

Scenarios (``--scenarios``):

* ``throughput``: N records of 100 bytes over 8 partitions, loaded once; each replicator copies them ``--rounds``
  times, interleaved. The target's end offsets are polled every 0.1 s; the rate is N over the time from the last
  poll that found the target empty to the one that found all N (the process start to that poll is shown too); CPU seconds are the replicator process's (all threads, start-up included).
* ``offsets``: a source with gaps -- DeleteRecords at the start, committed and aborted transactions, a compacted
  topic -- plus a plain topic, and a consumer group ``app`` that committed half of each partition. After the copy:
  records whose target offset differs from the source offset, records missing, duplicated or aborted-but-copied,
  and where ``app`` resumes on the target (records read again / skipped) with the offsets each replicator synced.
* ``crash``: ``kill -9`` of the replicator once a third of a topic is on the target, then a restart: duplicates
  and losses on the target.
* ``truncation``: a real unclean election on a 3-broker source (its own cluster, started for this scenario; topic of
  2 partitions x 3 replicas). Partition 0 gets 100 records, then 20 more acknowledged (acks=all) while one follower
  is stopped; that follower is elected uncleanly (``ApacheKafkaCluster.elect_uncleanly``), so the source loses
  offsets 100..119, and 30 new records follow on each partition (partition 0: at 100..129, a divergent history).
  Three cases per replicator: the lost records were copied and the replicator runs through the election; copied,
  then the replicator stopped (SIGTERM) before the election and started after the new records; or never copied
  (stopped before they were written). Reported: what the replicator said (``kafka-kip mirror --json`` incidents;
  MirrorMaker 2's log, whose consumer logs the truncation at INFO), its exit codes after SIGTERM, and on the target,
  record by record (values name topic, partition, phase and index): lost records kept, source records missing, at
  another offset than on the source, duplicated. ``--replicators kafka-kip:closest`` runs ``--on-truncation
  closest`` (``kafka-kip`` is its default, ``stop``).

    python -m benchmarks.bench_mirrormaker [--records 1000000] [--rounds 3] [--scenarios throughput,offsets,crash]
    python -m benchmarks.bench_mirrormaker --scenarios truncation --replicators mm2,kafka-kip,kafka-kip:closest

Prints tables (results, never asserts); progress on stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.bench_cluster import BenchmarkError
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
SOURCE_CONFIG = {'log.cleaner.backoff.ms': '200'}
GROUP = 'app'
SCENARIOS = ('throughput', 'offsets', 'crash', 'truncation')
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
                 source_replication: int = 1) -> None:
        if tasks != 1:
            self.name = f'MirrorMaker 2 (tasks.max={tasks})'
        super().__init__(workdir, source, target, topics)
        self.tasks = tasks
        self.source_replication = source_replication  # of the topics it keeps on the source

    def argv(self) -> list[str]:
        config = self.workdir / 'mm2.properties'
        config.write_text(''.join(f'{k}={v}\n' for k, v in {
            'clusters': 'A, B', 'A.bootstrap.servers': self.source, 'B.bootstrap.servers': self.target,
            'A->B.enabled': 'true', 'B->A.enabled': 'false', 'A->B.topics': self.topics, 'A->B.groups': GROUP,
            'replication.policy.class': 'org.apache.kafka.connect.mirror.IdentityReplicationPolicy',
            'sync.group.offsets.enabled': 'true', 'sync.group.offsets.interval.seconds': '1',
            'emit.checkpoints.interval.seconds': '1', 'refresh.topics.interval.seconds': '1',
            'refresh.groups.interval.seconds': '1', 'tasks.max': self.tasks,
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
    default) or ``mm2:<tasks.max>``."""
    if key.startswith('mm2'):
        return MirrorMaker2(workdir, source, target, topics, tasks=int(key.partition(':')[2] or 1),
                            source_replication=source_replication)
    return KafkaKipMirror(workdir, source, target, topics, on_truncation=key.partition(':')[2] or None,
                          json_events=json_events)


def check_replicator_key(key: str) -> None:
    if not re.fullmatch(r'mm2(:[1-9]\d*)?|kafka-kip(:(stop|closest))?', key):
        raise ValueError(f'unknown replicator {key!r}: kafka-kip, kafka-kip:stop, kafka-kip:closest, mm2 or '
                         'mm2:<tasks.max>')


# -- reading and writing the clusters (confluent-kafka, in this process) ----------------------------------

@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    value: bytes | None


def read_all(bootstrap: str, topics: dict[str, int], isolation: str = 'read_committed') -> list[Record]:
    """Every record of ``topics`` (name -> partitions) from each partition's start to its end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'bench-reader', 'enable.auto.commit': False,
                         'enable.partition.eof': True, 'isolation.level': isolation})
    try:
        assigned = [TopicPartition(t, p, OFFSET_BEGINNING) for t, n in topics.items() for p in range(n)]
        consumer.assign(assigned)
        pending = {(tp.topic, tp.partition) for tp in assigned}
        found: list[Record] = []
        deadline = time.monotonic() + 120
        while pending:
            if time.monotonic() > deadline:
                raise BenchmarkError(f'reading {sorted(pending)} from {bootstrap} did not reach their ends')
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    pending.discard((message.topic(), message.partition()))
                elif error is not None:
                    if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        continue
                    raise BenchmarkError(f'reading {bootstrap}: {error}')
                else:
                    found.append(Record(message.topic(), message.partition(), message.offset(), message.value()))
        return found
    finally:
        consumer.close()


def has_topics(bootstrap: str, topics: dict[str, int]) -> bool:
    """Whether ``bootstrap`` has every partition of ``topics``."""
    from confluent_kafka.admin import AdminClient

    listed = AdminClient({'bootstrap.servers': bootstrap}).list_topics(timeout=5).topics
    return all(t in listed and len(listed[t].partitions) >= n and listed[t].error is None
               for t, n in topics.items())


def end_offsets_sum(consumer: object, topics: dict[str, int]) -> int:
    """The sum of the end offsets of ``topics`` (0 for a partition the cluster does not have yet)."""
    from confluent_kafka import KafkaException, TopicPartition

    total = 0
    for topic, partitions in topics.items():
        for p in range(partitions):
            try:
                total += consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=2, cached=False)[1]
            except KafkaException:
                pass
    return total


@contextmanager
def watermark_reader(bootstrap: str) -> Iterator[object]:
    from confluent_kafka import Consumer

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'bench-watermarks',
                         'topic.metadata.refresh.interval.ms': 200})
    try:
        yield consumer
    finally:
        consumer.close()


def value_of(topic: str, index: int, size: int = 0) -> bytes:
    return f'{topic}-{index:09d}'.encode().ljust(size, b'.')


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1, size: int = 0, keys: int = 0,
            first: int = 0) -> None:
    """``count`` records round-robin over ``partitions``, values unique (``value_of``), keys ``k<i % keys>``."""
    from confluent_kafka import Producer

    producer = Producer({'bootstrap.servers': bootstrap, 'queue.buffering.max.messages': 1_000_000,
                         'linger.ms': 5})
    for i in range(first, first + count):
        key = f'k{i % keys}'.encode() if keys else None
        while True:
            try:
                producer.produce(topic, value_of(topic, i, size), key, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if not i % 10_000:
            producer.poll(0)
    if producer.flush(60):
        raise BenchmarkError(f'{topic}: records left undelivered')


def produce_transactions(bootstrap: str, topic: str, transactions: int, per_transaction: int) -> list[bytes]:
    """``transactions`` transactions of ``per_transaction`` records; every third is aborted. Returns the aborted
    values."""
    from confluent_kafka import Producer

    producer = Producer({'bootstrap.servers': bootstrap, 'transactional.id': 'bench-txn', 'linger.ms': 5})
    producer.init_transactions(30)
    aborted: list[bytes] = []
    index = 0
    for t in range(transactions):
        producer.begin_transaction()
        values = [value_of(topic, index + i) for i in range(per_transaction)]
        index += per_transaction
        for value in values:
            producer.produce(topic, value, partition=0)
        if t % 3 == 2:
            producer.flush(30)
            producer.abort_transaction(30)
            aborted.extend(values)
        else:
            producer.commit_transaction(30)
    return aborted


def commit(bootstrap: str, offsets: dict[tuple[str, int], int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': GROUP, 'enable.auto.commit': False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Group ``app``'s committed offsets on ``bootstrap`` (only those it has)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': GROUP, 'enable.auto.commit': False})
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
    except KafkaException:
        return {}
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}


def wait_for(predicate: Callable[[], bool], what: str, replicator: Replicator, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        replicator.check_alive()
        if time.monotonic() > deadline:
            raise BenchmarkError(f'{replicator.name}: {what} not reached within {timeout:.0f}s')
        time.sleep(_POLL_S)


# -- scenario: throughput -----------------------------------------------------------------------------------

@dataclass
class Throughput:
    replicator: str
    records: int
    total_s: float  # process start -> every record on the target
    copy_s: float  # the last poll that found no record on the target -> every record on the target
    cpu_s: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.copy_s


def run_throughput(replicator: Replicator, topics: dict[str, int], count: int) -> Throughput:
    with watermark_reader(replicator.target) as reader:
        replicator.start()
        empty_until = [replicator.started_at]  # the last poll that found the target without a record

        def copied() -> bool:
            polled_at = time.perf_counter()
            total = end_offsets_sum(reader, topics)
            if not total:
                empty_until[0] = polled_at
            return total >= count

        wait_for(copied, f'{count:,} records on the target', replicator)
        done = time.perf_counter()
        cpu = replicator.cpu_seconds()
        replicator.stop()
        on_target = end_offsets_sum(reader, topics)
    if on_target != count:
        raise BenchmarkError(f'{replicator.name}: {on_target:,} records on the target, expected {count:,}')
    return Throughput(replicator.name, count, done - replicator.started_at, done - empty_until[0], cpu)


# -- scenario: offsets (gaps, failover) and crash -----------------------------------------------------------

@dataclass
class Correctness:
    replicator: str
    records: int = 0  # readable records on the source
    mismatched: int = 0  # on the target at another offset than on the source
    missing: int = 0
    duplicated: int = 0
    aborted_copied: int = 0
    rereads: int = 0  # group app on the target: records read again
    skips: int = 0  # ... and records never read
    unsynced: list[str] = field(default_factory=list)  # partitions without a committed offset on the target
    by_topic: dict[str, int] = field(default_factory=dict)  # mismatches per topic
    on_target_at_kill: int = 0  # crash: records on the target right after the kill -9


@dataclass
class GapsSource:
    topics: dict[str, int]
    records: list[Record]  # readable (read_committed)
    aborted: set[bytes]
    group: dict[tuple[str, int], int]  # app's committed offsets on the source


GAP_TOPICS = {'gaps.deleted': 1, 'gaps.txn': 1, 'gaps.compacted': 1, 'gaps.plain': 2}


def prepare_gaps(kafka: ApacheKafkaCluster) -> GapsSource:
    """The gap topics, compaction finished, and group ``app`` committed at half of every partition."""
    from kafka.structs import TopicPartition as KTopicPartition

    bootstrap = kafka.bootstrap_servers
    for topic, partitions in GAP_TOPICS.items():
        config = ({'cleanup.policy': 'compact', 'segment.ms': 100, 'min.cleanable.dirty.ratio': 0.01}
                  if topic == 'gaps.compacted' else None)
        kafka.create_topic(topic, partitions, config=config)
    produce(bootstrap, 'gaps.deleted', 1000)
    with kafka.admin() as admin:
        admin.delete_records({KTopicPartition('gaps.deleted', 0): 300})
    aborted = set(produce_transactions(bootstrap, 'gaps.txn', 30, 20))
    produce(bootstrap, 'gaps.compacted', 1000, keys=50)
    produce(bootstrap, 'gaps.plain', 1000, partitions=2)
    compacted = {'gaps.compacted': 1}
    deadline, rollers = time.monotonic() + 120, 0
    while len(read_all(bootstrap, compacted)) > 1000 - 500:  # keys repeat 20 times: compaction drops most
        if time.monotonic() > deadline:
            raise BenchmarkError('gaps.compacted was not compacted within 120s')
        produce(bootstrap, 'gaps.compacted', 1, keys=10**9, first=1000 + rollers)  # a unique key rolls the segment
        rollers += 1
        time.sleep(0.5)
    records = read_all(bootstrap, GAP_TOPICS)
    group: dict[tuple[str, int], int] = {}
    for topic, partitions in GAP_TOPICS.items():
        for p in range(partitions):
            mine = [r for r in records if (r.topic, r.partition) == (topic, p)]
            group[(topic, p)] = mine[len(mine) // 2].offset
    commit(bootstrap, group)
    return GapsSource(dict(GAP_TOPICS), records, aborted, group)


def compare(name: str, source: GapsSource, target_records: list[Record],
            target_group: dict[tuple[str, int], int]) -> Correctness:
    result = Correctness(name, records=len(source.records))
    where = {r.value: r for r in target_records}
    counts = Counter(r.value for r in target_records if r.value is not None)
    result.duplicated = sum(n - 1 for n in counts.values())
    result.aborted_copied = sum(1 for value in counts if value in source.aborted)
    for record in source.records:
        copy = where.get(record.value)
        if copy is None:
            result.missing += 1
        elif copy.offset != record.offset:
            result.mismatched += 1
            result.by_topic[record.topic] = result.by_topic.get(record.topic, 0) + 1
    for (topic, p), offset in source.group.items():
        expected = next(r for r in source.records if (r.topic, r.partition, r.offset) == (topic, p, offset))
        on_target = [r for r in target_records if (r.topic, r.partition) == (topic, p)]
        if (topic, p) not in target_group:
            result.unsynced.append(f'{topic}-{p}')
            continue
        resume = next((i for i, r in enumerate(on_target) if r.offset >= target_group[(topic, p)]), len(on_target))
        wanted = next(i for i, r in enumerate(on_target) if r.value == expected.value)
        result.rereads += max(0, wanted - resume)
        result.skips += max(0, resume - wanted)
    return result


def run_offsets(replicator: Replicator, source: GapsSource) -> Correctness:
    wanted = {r.value for r in source.records}
    partitions = list(source.group)
    replicator.start()

    def copied() -> bool:
        return (has_topics(replicator.target, source.topics)
                and wanted <= {r.value for r in read_all(replicator.target, source.topics)})

    wait_for(copied, 'every readable source record on the target', replicator)
    # group offsets: wait until every partition has one and they stay put for 3 s (syncs run every second)
    last: list[dict[tuple[str, int], int]] = [{}]
    stable_since = [time.monotonic()]

    def synced() -> bool:
        now = committed(replicator.target, partitions)
        if now != last[0]:
            last[0], stable_since[0] = now, time.monotonic()
        return len(now) == len(partitions) and time.monotonic() - stable_since[0] >= 3.0

    try:
        wait_for(synced, 'group offsets synced for every partition', replicator, timeout=60)
    except BenchmarkError as exc:
        print(f'  {exc}', file=sys.stderr)
    replicator.stop()
    return compare(replicator.name, source, read_all(replicator.target, source.topics), last[0])


CRASH_TOPIC = {'crash': 8}


def run_crash(replicator: Replicator, count: int) -> Correctness:
    with watermark_reader(replicator.target) as reader:
        replicator.start()
        wait_for(lambda: end_offsets_sum(reader, CRASH_TOPIC) >= count // 3, 'a third on the target', replicator)
        replicator.kill()
        at_kill = end_offsets_sum(reader, CRASH_TOPIC)
        replicator.start()
        wait_for(lambda: end_offsets_sum(reader, CRASH_TOPIC) >= count, 'every record on the target', replicator)
    expected = {value_of('crash', i, 100) for i in range(count)}

    def complete() -> bool:
        return expected <= {r.value for r in read_all(replicator.target, CRASH_TOPIC)}

    wait_for(complete, 'every record on the target after the restart', replicator)
    replicator.stop()
    target = read_all(replicator.target, CRASH_TOPIC)
    counts = Counter(r.value for r in target)
    return Correctness(replicator.name, records=count, missing=len(expected - set(counts)),
                       duplicated=sum(n - 1 for n in counts.values()), on_target_at_kill=at_kill)


# -- scenario: truncation (a real unclean election on the source) --------------------------------------------

TRUNCATION_BROKER_CONFIG = {'auto.leader.rebalance.enable': 'false'}  # no preferred election in the middle
TRUNCATION_PARTITIONS = 2  # partition 0 is truncated; partition 1 is the control
FIRST, DOOMED, AFTER = 100, 20, 30  # records per phase (DOOMED on partition 0 only)
#: When the replicator runs: throughout (it copies the doomed records and is running at the election), stopped
#: after copying them and started after the new records, or stopped before they are written (never copies them).
TRUNCATION_CASES = ('copied, running', 'copied, restarted', 'not copied')
_SETTLED_QUIET_S = 3.0


def phase_value(topic: str, partition: int, phase: str, index: int) -> bytes:
    """A value naming where the record was written: ``<topic>/<partition>/<phase>/<index>``."""
    return f'{topic}/{partition}/{phase}/{index:04d}'.encode()


def produce_phase(bootstrap: str, topic: str, partition: int, phase: str, count: int) -> None:
    """``count`` records of ``phase`` to ``partition`` with acks=all, each acknowledged."""
    from confluent_kafka import Producer

    failures: list[object] = []
    producer = Producer({'bootstrap.servers': bootstrap, 'acks': 'all', 'linger.ms': 5})
    for i in range(count):
        producer.produce(topic, phase_value(topic, partition, phase, i), partition=partition,
                         on_delivery=lambda error, _: error is not None and failures.append(error))
    if producer.flush(60) or failures:
        raise BenchmarkError(f'{topic}-{partition}: {phase} records not acknowledged: {failures[:3]}')


def partition_ends(reader: object, topic: str) -> list[int]:
    """The end offset of every partition of ``topic`` (0 where the cluster does not have it yet)."""
    from confluent_kafka import KafkaException, TopicPartition

    ends = []
    for p in range(TRUNCATION_PARTITIONS):
        try:
            ends.append(reader.get_watermark_offsets(TopicPartition(topic, p), timeout=2, cached=False)[1])
        except KafkaException:
            ends.append(0)
    return ends


@dataclass
class Truncation:
    """One replicator's run through the unclean election: what it said and what the target holds."""

    replicator: str
    case: str
    lost: list[Record] = field(repr=False)  # partition 0's records the source had before the election and lost
    reports: list[str]  # what the replicator said about it (incidents, log lines)
    exit_codes: list[int | None]  # of each process run, after SIGTERM
    settled: str  # how the run ended: caught up, a partition stopped, timed out
    kept_lost: int  # lost records that are on the target (divergence)
    missing: int  # source records (after the election) not on the target
    elsewhere: int  # source records on the target at another offset than on the source
    duplicated: int
    new_on_target: str  # where partition 0's new records (written after the election) landed on the target


def settle(replicator: Replicator, target: str, topic: str, source: list[Record], since: int,
           timeout: float = TIMEOUT_S) -> str:
    """Wait until, for every partition, the source's last record is on the target or the replicator stopped the
    partition, and the target then stays unchanged for a few seconds; how it ended (never raises on a timeout)."""
    last = {p: max((r for r in source if r.partition == p), key=lambda r: r.offset).value
            for p in range(TRUNCATION_PARTITIONS)}
    deadline = time.monotonic() + timeout
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        if replicator.popen is None or replicator.popen.poll() is not None:
            return 'exited by itself'
        on_target = read_all(target, {topic: TRUNCATION_PARTITIONS})
        values = {r.value for r in on_target}
        stopped = replicator.stopped_partitions(since)
        if len(on_target) != seen:
            seen, quiet_since = len(on_target), time.monotonic()
        if all(last[p] in values or f'{topic}-{p}' in stopped for p in last) and \
                time.monotonic() - quiet_since >= _SETTLED_QUIET_S:
            numbers = sorted(name.rpartition('-')[2] for name in stopped)
            return f'partition {", ".join(numbers)} stopped' if stopped else 'caught up'
        time.sleep(0.5)
    return f'not settled within {timeout:.0f} s'


def run_truncation(key: str, case: str, source: ApacheKafkaCluster, topic: str, workdir: Path) -> Truncation:
    """One replicator through an unclean election on ``source`` (3 brokers) that loses ``DOOMED`` records of
    partition 0, new records then written at their offsets; compared with the source record by record."""
    from kafka.structs import TopicPartition as KTopicPartition

    src, tp0 = source.bootstrap_servers, KTopicPartition(topic, 0)
    topics = {topic: TRUNCATION_PARTITIONS}
    source.create_topic(topic, TRUNCATION_PARTITIONS, replication_factor=3)
    for p in range(TRUNCATION_PARTITIONS):
        produce_phase(src, topic, p, 'first', FIRST)
    codes: list[int | None] = []
    with target_cluster() as target, watermark_reader(target.bootstrap_servers) as reader:
        replicator = make(key, workdir, src, target.bootstrap_servers, re.escape(topic), source_replication=3,
                          json_events=True)
        replicator.start()
        wait_for(lambda: min(partition_ends(reader, topic)) >= FIRST, 'the first records on the target', replicator)
        mark = replicator.log_size()
        if case == 'not copied':
            codes.append(replicator.stop())
        stale = next(b for b in source.isr(tp0) if b != source.leader(tp0))
        source.stop_broker(stale)  # controlled shutdown: out of the ISR; the doomed records never reach it
        produce_phase(src, topic, 0, 'doomed', DOOMED)
        if case != 'not copied':
            wait_for(lambda: partition_ends(reader, topic)[0] >= FIRST + DOOMED, 'the doomed records on the target',
                     replicator)
        if case == 'copied, restarted':
            codes.append(replicator.stop())
        before = read_all(src, topics)
        source.elect_uncleanly(tp0, stale)
        for p in range(TRUNCATION_PARTITIONS):
            produce_phase(src, topic, p, 'after', AFTER)
        after = read_all(src, topics)
        if replicator.popen is None:
            replicator.start()
        settled = settle(replicator, target.bootstrap_servers, topic, after, mark)
        reports = replicator.reports(mark)
        codes.append(replicator.stop() if replicator.popen is not None else None)
        on_target = read_all(target.bootstrap_servers, topics)
    return compare_truncation(replicator.name, case, before, after, on_target, reports, codes, settled)


def compare_truncation(name: str, case: str, before: list[Record], after: list[Record], on_target: list[Record],
                       reports: list[str], codes: list[int | None], settled: str) -> Truncation:
    """The target against the source's records before and after the election, matched by their unique values."""
    kept = {r.value for r in after}
    lost = [r for r in before if r.value not in kept]
    counts = Counter(r.value for r in on_target)
    where = {r.value: r.offset for r in on_target}
    new = sorted(where[r.value] for r in after if r.partition == 0 and b'/after/' in (r.value or b'')
                 and r.value in where)
    return Truncation(
        name, case, lost, reports, codes, settled,
        kept_lost=sum(1 for r in lost if r.value in counts),
        missing=sum(1 for r in after if r.value not in counts),
        elsewhere=sum(1 for r in after if r.value in where and where[r.value] != r.offset),
        duplicated=sum(n - 1 for n in counts.values()),
        new_on_target=f'{len(new)} of {AFTER} at {_ranges(new)}' if new else f'0 of {AFTER}')


def _ranges(offsets: list[int]) -> str:
    """Sorted offsets as ``a..b`` runs: ``[1, 2, 3, 7]`` -> ``1..3, 7``."""
    runs: list[list[int]] = []
    for o in offsets:
        if runs and o == runs[-1][1] + 1:
            runs[-1][1] = o
        else:
            runs.append([o, o])
    return ', '.join(f'{a}..{b}' if a != b else f'{a}' for a, b in runs)


# -- the run ------------------------------------------------------------------------------------------------

@contextmanager
def target_cluster() -> Iterator[ApacheKafkaCluster]:
    with ApacheKafkaCluster(brokers=1) as target:
        yield target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_mirrormaker', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--records', type=int, default=1_000_000, help='throughput records (default 1,000,000)')
    parser.add_argument('--crash-records', type=int, default=200_000, help='crash scenario records (default 200,000)')
    parser.add_argument('--rounds', type=int, default=3, help='interleaved throughput rounds, medians (default 3)')
    parser.add_argument('--scenarios', default=','.join(SCENARIOS),
                        help=f'comma-separated, of {",".join(SCENARIOS)} (default: all)')
    parser.add_argument('--replicators', default='mm2,kafka-kip',
                        help='comma-separated: kafka-kip, kafka-kip:<on-truncation> (stop, closest), mm2 '
                             '(tasks.max=1, its default), mm2:<tasks.max>')
    args = parser.parse_args(argv)
    keys = args.replicators.split(',')
    scenarios = args.scenarios.split(',')
    for key in keys:
        try:
            check_replicator_key(key)
        except ValueError as exc:
            parser.error(f'--replicators: {exc}')
    for bad in set(scenarios) - set(SCENARIOS):
        parser.error(f'--scenarios: unknown {bad!r}; choose from {",".join(SCENARIOS)}')
    say = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    say(f'MirrorMaker 2 {MM2_VERSION} jars: {mm2_jars()}')
    throughput: dict[str, list[Throughput]] = {k: [] for k in keys}
    offsets: list[Correctness] = []
    crashes: list[Correctness] = []
    truncations: list[Truncation] = []
    with tempfile.TemporaryDirectory(prefix='bench-mm2-') as work, ExitStack() as clusters:
        workdir = Path(work)
        if set(scenarios) & {'throughput', 'offsets', 'crash'}:
            source = clusters.enter_context(ApacheKafkaCluster(brokers=1, broker_config=SOURCE_CONFIG))
            src = source.bootstrap_servers
        if 'throughput' in scenarios:
            source.create_topic('tput', 8)
            produce(src, 'tput', args.records, partitions=8, size=100)
            say(f'loaded {args.records:,} records into tput (8 partitions)')
            for round_ in range(args.rounds):
                for key in keys[round_ % len(keys):] + keys[:round_ % len(keys)]:
                    with target_cluster() as target:
                        replicator = make(key, workdir, src, target.bootstrap_servers, 'tput')
                        result = run_throughput(replicator, {'tput': 8}, args.records)
                    throughput[key].append(result)
                    say(f'round {round_ + 1}: {result.replicator}: {result.records_per_s:,.0f} records/s '
                        f'(total {result.total_s:.1f} s, CPU {result.cpu_s:.1f} s)')
        if 'offsets' in scenarios:
            gaps = prepare_gaps(source)
            say(f'gap topics ready: {len(gaps.records)} readable records, group {GROUP} at {gaps.group}')
            for key in keys:
                with target_cluster() as target:
                    replicator = make(key, workdir, src, target.bootstrap_servers, r'gaps\..*')
                    offsets.append(run_offsets(replicator, gaps))
                say(f'offsets: {offsets[-1]}')
        if 'crash' in scenarios:
            source.create_topic('crash', 8)
            produce(src, 'crash', args.crash_records, partitions=8, size=100)
            for key in keys:
                with target_cluster() as target:
                    replicator = make(key, workdir, src, target.bootstrap_servers, 'crash')
                    crashes.append(run_crash(replicator, args.crash_records))
                say(f'crash: {crashes[-1]}')
        if 'truncation' in scenarios:
            with ApacheKafkaCluster(brokers=3, broker_config=TRUNCATION_BROKER_CONFIG) as source:
                for n, (case, key) in enumerate((c, k) for c in TRUNCATION_CASES for k in keys):
                    truncations.append(run_truncation(key, case, source, f'trunc{n}', workdir))
                    say(f'truncation: {truncations[-1]}')
    print(format_tables(throughput, offsets, crashes, args, truncations))
    return 0


def _median(results: list[Throughput]) -> Throughput:
    return sorted(results, key=lambda r: r.copy_s)[len(results) // 2]


def format_tables(throughput: dict[str, list[Throughput]], offsets: list[Correctness], crashes: list[Correctness],
                  args: argparse.Namespace, truncations: Sequence[Truncation] = ()) -> str:
    lines = []
    medians = {k: _median(v) for k, v in throughput.items() if v}
    if medians:
        lines += [f'Throughput: {args.records:,} records x 100 bytes, 8 partitions, median of {args.rounds} '
                  f'interleaved rounds (MirrorMaker 2 {MM2_VERSION})', '',
                  '| replicator | records/s (target empty to complete) | vs MirrorMaker 2 (median of the rounds\' '
                  'ratios) | process start to last record (s) | CPU s of the replicator | all rounds, records/s |',
                  '|---|---|---|---|---|---|']
        base = throughput.get('mm2')
        for key, r in medians.items():
            ratio = '-'
            if base:
                ratios = [x.records_per_s / b.records_per_s for x, b in zip(throughput[key], base, strict=True)]
                ratio = f'{statistics.median(ratios):.2f}x'
            rounds = ', '.join(f'{x.records_per_s / 1000:,.0f}k' for x in throughput[key])
            lines.append(f'| {r.replicator} | {r.records_per_s:,.0f} | {ratio} | {r.total_s:.1f} | {r.cpu_s:.1f} | '
                         f'{rounds} |')
        lines.append('')
    if offsets:
        lines += ['Offsets and failover: ' + ', '.join(f'{t} ({n} partition{"s" * (n > 1)})'
                                                        for t, n in GAP_TOPICS.items()), '',
                  '| replicator | readable source records | at another offset on the target (by topic) | missing | '
                  'duplicated | aborted records copied | group app on the target: re-read / skipped | '
                  'partitions without a synced offset |',
                  '|---|---|---|---|---|---|---|---|']
        for r in offsets:
            topics = ', '.join(f'{t.removeprefix("gaps.")} {n}' for t, n in sorted(r.by_topic.items()))
            lines.append(f'| {r.replicator} | {r.records:,} | {r.mismatched:,}{f" ({topics})" if topics else ""} | '
                         f'{r.missing} | {r.duplicated} | {r.aborted_copied} | {r.rereads} / {r.skips} | '
                         f'{", ".join(r.unsynced) or "none"} |')
        lines.append('')
    if crashes:
        lines += [f'kill -9 once a third of {args.crash_records:,} records (8 partitions) is on the target, then a '
                  'restart', '', '| replicator | on the target at the kill | duplicates on the target | records lost |',
                  '|---|---|---|---|']
        lines += [f'| {r.replicator} | {r.on_target_at_kill:,} | {r.duplicated:,} | {r.missing:,} |' for r in crashes]
        lines.append('')
    if truncations:
        lines += format_truncations(truncations)
    return '\n'.join(lines)


def format_truncations(truncations: Sequence[Truncation]) -> list[str]:
    lost = truncations[0].lost
    lost_text = f'offsets {_ranges([r.offset for r in lost])}' if lost else 'none'
    lines = [f'Truncation: a 3-broker source, topic of {TRUNCATION_PARTITIONS} partitions x 3 replicas; partition 0 '
             f'gets {FIRST} records, then {DOOMED} more acknowledged (acks=all) while a follower is stopped; that '
             f'follower is elected uncleanly (the source loses {lost_text}), then {AFTER} new records go to each '
             'partition (partition 0: at the lost offsets and on); partition 1 is never truncated', '',
             '| replicator | replicator during the election | what it reported | exit code(s) after SIGTERM | '
             'lost records kept on the target | source records missing on the target | at another offset than on '
             "the source | duplicated | partition 0's new records on the target | run ended |",
             '|---|---|---|---|---|---|---|---|---|---|']
    for r in truncations:
        codes = ', '.join('-' if c is None else str(c) for c in r.exit_codes)
        lines.append(f'| {r.replicator} | {r.case} | {"; ".join(r.reports) or "nothing"} | {codes} | '
                     f'{r.kept_lost} of {len(r.lost)} | {r.missing} | {r.elsewhere} | {r.duplicated} | '
                     f'{r.new_on_target} | {r.settled} |')
    return lines


if __name__ == '__main__':
    sys.exit(main())
