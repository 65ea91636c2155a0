"""``kafka-kip demo`` (what ``make demo`` runs): two mirrors through three faults, scored from the logs.

Two embedded reference clusters (a 3-broker source, a 1-broker target). Keyed records go to the source,
some at chosen offsets (KIP-391) so the source has offset gaps. Two replicators copy them side by side:

* a naive consume->produce loop on unmodified kafka-python, as people write it (auto-commit,
  ``auto_offset_reset='earliest'``), into ``naive.orders``;
* the kafka_kip mirror (:class:`kafka_kip.mirror.Mirror`, ``on_truncation='closest'``, syncing the
  consumer group ``app``), into ``orders``.

Then, one after another: stale metadata on the source (a broker keeps serving its old metadata and its
old leadership while the partition moves), an unclean leader election on the source (the new leader lacks
records both mirrors already copied), and a crash and restart of both replicators. The scoreboard compares
the final logs of both clusters (``ReferenceCluster.records``): records lost without a report,
duplicated records, records at a different offset than on the source, and rewinds (places where the
target log goes back in source offsets). Nothing is taken from counters kept by the mirrors.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

import kafka
from kafka.net.selector import NetworkSelector
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

from kafka_kip.mirror import CLOSEST, Incident, Mirror, wire
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.testing import ReferenceCluster

TOPIC = 'orders'
NAIVE_TOPIC = 'naive.orders'
PARTITIONS = 3
APP_GROUP = 'app'
_METADATA_MAX_AGE_MS = 500  # both replicators refresh metadata this often
_CATCH_UP_S = 8.0
_NAIVE_SETTLE_S = 3.0  # a naive loop that lost records never catches up: do not wait for it long


@dataclass
class Score:
    """One replicator's result, computed from the final logs."""

    name: str
    lost: int = 0  # source records missing on the target, not covered by a report
    duplicated: int = 0  # extra copies of a record on the target
    offset_mismatches: int = 0  # records on the target at another offset than on the source
    rewinds: int = 0  # places where the target log goes back in source offsets
    divergent_kept: int = 0  # target records the source no longer has (lost by the source)
    reported: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.offset_mismatches or self.rewinds)


@dataclass
class GroupCheck:
    """Where consumer group ``app`` resumes on the target vs the source, per partition."""

    partition: int
    source_offset: int
    target_offset: int
    same_record: bool


@dataclass
class DemoResult:
    naive: Score
    kip: Score
    incidents: list[Incident]
    truncation: tuple[int, int, int]  # (partition, first lost offset, end of the lost range)
    groups: list[GroupCheck]
    seconds: float


class _Writer:
    """Writes keyed records to the source's true leader at chosen offsets (KIP-391); the test harness."""

    def __init__(self, cluster: ReferenceCluster) -> None:
        self.cluster = cluster
        self.client = ClusterClient('demo-writer', cluster.bootstrap_servers, NetworkSelector())
        self.client.bootstrap()
        self.written: dict[bytes, int] = {}  # value -> the offset it was written at

    def write(self, partition: int, count: int, tag: str, gap: int = 0) -> tuple[int, int]:
        """``count`` records at the leader's end + ``gap``; returns their offset range [first, end)."""
        tp = TopicPartition(TOPIC, partition)
        for _ in range(50):
            base = self.cluster.log_end_offset(tp) + gap
            builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**30)
            values = [f'{tag}-p{partition}-{base + i}'.encode() for i in range(count)]
            now = int(time.time() * 1000)
            for i, value in enumerate(values):
                builder.append(i, now, f'customer-{(base + i) % 17}'.encode(), value, [])
            batch = builder.build()
            batch[0:8] = base.to_bytes(8, 'big')
            request = wire.produce({TOPIC: [(partition, batch)]}, acks=-1, timeout_ms=10000, use_offset=True)
            try:
                answer = self.client.request(request, self.cluster.leader(tp)).responses[0].partition_responses[0]
            except kafka.errors.KafkaError:
                answer = None
            if answer is not None and answer.error_code == 0:
                self.written.update((value, base + i) for i, value in enumerate(values))
                return base, base + count
            self.client.cluster.request_update()
            time.sleep(0.05)
        raise RuntimeError(f'the demo could not write to {tp}')

    def close(self) -> None:
        self.client.close()
        self.client.net.close()


class _NaiveMirror:
    """A consume->produce loop on unmodified kafka-python: the way a replicator is usually written."""

    def __init__(self, source: str, target: str) -> None:
        self.source, self.target = source, target
        self._running = threading.Event()
        self._crashing = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._crashing = False
        self._running.set()
        self._thread = threading.Thread(target=self._loop, name='naive-mirror', daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        consumer = kafka.KafkaConsumer(TOPIC, bootstrap_servers=self.source, group_id='naive-mirror',
                                       auto_offset_reset='earliest', metadata_max_age_ms=_METADATA_MAX_AGE_MS)
        producer = kafka.KafkaProducer(bootstrap_servers=self.target, linger_ms=5)
        try:
            while self._running.is_set():
                for records in consumer.poll(timeout_ms=100).values():
                    for r in records:
                        producer.send(NAIVE_TOPIC, key=r.key, value=r.value, partition=r.partition,
                                      timestamp_ms=r.timestamp, headers=list(r.headers))
        finally:
            if self._crashing:
                producer.close(timeout=0)  # buffered records go nowhere, offsets stay uncommitted
                consumer.close(autocommit=False)
            else:
                producer.flush()
                producer.close()
                consumer.close()

    def stop(self, crash: bool = False) -> None:
        self._crashing = crash
        self._running.clear()
        if self._thread is not None:
            self._thread.join()


class _KipMirror:
    """The kafka_kip mirror in a thread, restartable."""

    def __init__(self, source: str, target: str, incidents: list[Incident]) -> None:
        self.source, self.target = source, target
        self.incidents = incidents
        self._mirror: Mirror | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._mirror = Mirror(self.source, self.target, TOPIC, groups=APP_GROUP, on_truncation=CLOSEST,
                              group_sync_interval_ms=1000, on_incident=self.incidents.append,
                              source_configs={'metadata_max_age_ms': _METADATA_MAX_AGE_MS})
        self._thread = threading.Thread(target=self._mirror.run, name='kafka-kip-mirror', daemon=True)
        self._thread.start()

    def stop(self, crash: bool = False) -> None:
        self._mirror.stop(flush=not crash)
        self._thread.join()
        self._mirror.close()


def _wait(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _reported(incidents: list[Incident], partition: int, offset: int) -> bool:
    for incident in incidents:
        if incident.source.partition != partition:
            continue
        for low, high in (incident.lost or (0, 0), incident.divergent or (0, 0)):
            if low <= offset < high:
                return True
        if incident.stopped and incident.truncated_at is not None and offset >= incident.truncated_at:
            return True
    return False


def score(name: str, source: ReferenceCluster, target: ReferenceCluster, target_topic: str,
          written: dict[bytes, int], incidents: list[Incident]) -> Score:
    """Compare the final logs: ``written`` maps every value ever written to the offset it was written at."""
    result = Score(name)
    for partition in range(PARTITIONS):
        src = source.records(TopicPartition(TOPIC, partition))
        tgt = target.records(TopicPartition(target_topic, partition))
        source_offsets = {r.value: r.offset for r in src}
        copies = Counter(r.value for r in tgt)
        result.duplicated += sum(n - 1 for n in copies.values() if n > 1)
        result.offset_mismatches += len({r.value for r in tgt
                                         if r.value in source_offsets and r.offset != source_offsets[r.value]})
        result.lost += sum(1 for r in src if r.value not in copies and not _reported(incidents, partition, r.offset))
        result.rewinds += sum(1 for a, b in zip(tgt, tgt[1:], strict=False) if written[b.value] < written[a.value])
        result.divergent_kept += sum(1 for value in copies if value not in source_offsets)
    for incident in incidents:
        ranges = [f'{kind} {low}..{high - 1}' for kind, r in (('lost', incident.lost),
                                                               ('divergent', incident.divergent)) if r
                  for low, high in [r]]
        result.reported.append(f'{incident.kind} {incident.source.topic}-{incident.source.partition}'
                               + (f' ({", ".join(ranges)})' if ranges else ''))
    return result


def _caught_up(source: ReferenceCluster, target: ReferenceCluster, target_topic: str,
               incidents: list[Incident]) -> bool:
    for partition in range(PARTITIONS):
        try:
            have = {r.value for r in target.records(TopicPartition(target_topic, partition))}
        except ValueError:  # the target topic does not exist yet
            return False
        if any(r.value not in have and not _reported(incidents, partition, r.offset)
               for r in source.records(TopicPartition(TOPIC, partition))):
            return False
    return True


def _group_check(source: ReferenceCluster, target: ReferenceCluster) -> list[GroupCheck]:
    """Where group ``app`` resumes on each cluster, and whether the next record is the same."""
    checks = []
    consumers = {name: kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=APP_GROUP,
                                           enable_auto_commit=False, auto_offset_reset='none')
                 for name, cluster in (('source', source), ('target', target))}
    try:
        for partition in range(PARTITIONS):
            tp = TopicPartition(TOPIC, partition)
            source_offset = consumers['source'].committed(tp)
            target_offset = consumers['target'].committed(tp)
            src = {r.offset: r.value for r in source.records(tp)}
            tgt = {r.offset: r.value for r in target.records(tp)}
            same = target_offset is not None and src.get(target_offset) == tgt.get(target_offset)
            checks.append(GroupCheck(partition, -1 if source_offset is None else source_offset,
                                     -1 if target_offset is None else target_offset, same))
    finally:
        for consumer in consumers.values():
            consumer.close()
    return checks


def _commit_app_group(source: ReferenceCluster, per_partition: int) -> dict[TopicPartition, kafka.OffsetAndMetadata]:
    """An application (group ``app``) consumes part of every partition on the source and commits."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=source.bootstrap_servers, group_id=APP_GROUP,
                                   enable_auto_commit=False, auto_offset_reset='earliest')
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    offsets = {}
    deadline = time.monotonic() + 10
    while len(offsets) < PARTITIONS and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=200, max_records=per_partition).items():
            if tp not in offsets and records:
                offsets[tp] = kafka.OffsetAndMetadata(records[-1].offset + 1, '', records[-1].leader_epoch)
                consumer.pause(tp)
    consumer.commit(offsets)
    consumer.close(autocommit=False)
    return offsets


@contextmanager
def _quiet() -> Iterator[None]:
    """kafka-python logs every refused connection of a fault at ERROR; the demo reports outcomes instead."""
    logger = logging.getLogger('kafka')
    own_logger = logging.getLogger('kafka_kip')
    levels = logger.level, own_logger.level
    logger.setLevel(logging.CRITICAL)
    own_logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(levels[0])
        own_logger.setLevel(levels[1])


def run_scenario(say: Callable[[str], None] = lambda line: None) -> DemoResult:
    """Run the whole scenario and score it; ``say`` gets a line per step."""
    started = time.monotonic()
    incidents: list[Incident] = []
    with _quiet(), ReferenceCluster(brokers=3) as source, ReferenceCluster(brokers=1) as target:
        source.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        target.create_topic(NAIVE_TOPIC, partitions=PARTITIONS, replication_factor=1)
        writer = _Writer(source)
        try:
            say('source: 3 brokers, topic orders (3 partitions, replication 3); target: 1 broker')
            for p in range(PARTITIONS):
                writer.write(p, 120, 'first')
                writer.write(p, 60, 'gapped', gap=25)  # offsets 120..144 never exist: a KIP-391 gap
                writer.write(p, 60, 'more')
            committed = _commit_app_group(source, per_partition=150)
            say('wrote 240 keyed records per partition, with an offset gap of 25; group app committed at '
                + ', '.join(f'orders-{tp.partition}@{offset.offset}' for tp, offset in sorted(committed.items())))

            naive = _NaiveMirror(source.bootstrap_servers, target.bootstrap_servers)
            kip = _KipMirror(source.bootstrap_servers, target.bootstrap_servers, incidents)
            naive.start()
            kip.start()

            def settle(naive_s: float = _NAIVE_SETTLE_S) -> None:
                """Until the kafka_kip mirror has everything, and the naive loop too (or ``naive_s`` passed)."""
                _wait(lambda: _caught_up(source, target, TOPIC, incidents), _CATCH_UP_S)
                _wait(lambda: _caught_up(source, target, NAIVE_TOPIC, []), naive_s)

            settle()
            say('both replicators started and caught up')

            # 1. stale metadata: the leader of orders-0 keeps its old metadata and leadership (a zombie)
            tp0 = TopicPartition(TOPIC, 0)
            zombie = source.leader(tp0)
            source.delay_metadata(zombie)
            source.elect_leader(tp0, next(b for b in source.isr(tp0) if b != zombie))
            for _ in range(16):
                for p in range(PARTITIONS):
                    writer.write(p, 5, 'stale')
                time.sleep(0.25)
            source.release_metadata(zombie)
            settle()
            say(f'fault 1: broker {zombie} served stale metadata (and its old leadership of orders-0) for 4 s')

            # 2. unclean election: the new leader of orders-1 misses records both mirrors copied
            tp1 = TopicPartition(TOPIC, 1)
            leader = source.leader(tp1)
            lagging = next(b for b in source.replicas(tp1) if b != leader)
            source.pause_replication(tp1, lagging)
            first_lost, end_lost = writer.write(1, 40, 'doomed')
            settle()
            source.elect_leader(tp1, lagging, unclean=True)
            writer.write(1, 70, 'after-election')
            settle()
            say(f'fault 2: unclean election on orders-1: the source lost offsets {first_lost}..{end_lost - 1} '
                'and wrote new records there')

            # 3. both replicators crash while records keep coming, then restart
            for p in range(PARTITIONS):
                writer.write(p, 50, 'pre-crash')
            time.sleep(0.05)
            naive.stop(crash=True)
            kip.stop(crash=True)
            for p in range(PARTITIONS):
                writer.write(p, 50, 'while-down')
            naive.start()
            kip.start()
            for p in range(PARTITIONS):
                writer.write(p, 50, 'after-restart')
            settle(naive_s=_CATCH_UP_S)
            say('fault 3: both replicators crashed mid-stream and restarted')

            naive.stop()
            kip.stop()
            groups = _group_check(source, target)
            naive_score = score('naive loop (kafka-python)', source, target, NAIVE_TOPIC, writer.written, [])
            kip_score = score('kafka_kip mirror', source, target, TOPIC, writer.written, incidents)
        finally:
            writer.close()
    return DemoResult(naive_score, kip_score, incidents, (1, first_lost, end_lost), groups,
                      time.monotonic() - started)


def render_scoreboard(result: DemoResult) -> str:
    """The scoreboard table and what the kafka_kip mirror reported."""
    header = f'{"":<28}{"lost (unreported)":>19}{"duplicated":>12}{"offset mismatches":>19}{"rewinds":>9}'
    lines = [header, '-' * len(header)]
    for row in (result.naive, result.kip):
        lines.append(f'{row.name:<28}{row.lost:>19,}{row.duplicated:>12,}{row.offset_mismatches:>19,}'
                     f'{row.rewinds:>9,}')
    lines.append('')
    for row in (result.naive, result.kip):
        reported = '; '.join(row.reported) if row.reported else 'nothing'
        lines.append(f'{row.name}: reported {reported}; target keeps {row.divergent_kept} records the source '
                     'lost')
    for check in result.groups:
        verdict = 'same offset, same next record' if (check.source_offset == check.target_offset
                                                      and check.same_record) else 'DIFFERENT'
        lines.append(f'group {APP_GROUP} on orders-{check.partition}: source {check.source_offset}, '
                     f'target {check.target_offset}: {verdict}')
    return '\n'.join(lines)


def report(result: DemoResult, out: TextIO) -> int:
    """Print the scoreboard to ``out``; 0 when the kafka_kip row is clean and group ``app`` resumes right."""
    print('', file=out)
    print(render_scoreboard(result), file=out)
    print(f'\n(scored from the final logs of both clusters; {result.seconds:.1f} s)', file=out, flush=True)
    groups_ok = all(c.source_offset == c.target_offset and c.same_record for c in result.groups)
    return 0 if result.kip.clean and groups_ok else 1


def run_demo(out: TextIO) -> int:
    """Run the demo and print the scoreboard to ``out`` (``kafka-kip demo``, ``make demo``)."""
    def say(line: str) -> None:
        print(line, file=out, flush=True)

    say('kafka-kip demo: a naive kafka-python replicator vs the kafka_kip mirror, through three faults\n')
    return report(run_scenario(say), out)
