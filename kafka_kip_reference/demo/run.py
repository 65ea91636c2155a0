"""``kafka-kip demo`` (what ``make demo`` runs): replicators through three faults, scored from the logs.

Two scenes, each on embedded reference clusters: a 3-broker source and a 1-broker target that supports
KIP-391, then the same with a *stock* target (the reference cluster without its extensions, as Apache
Kafka or any managed Kafka). Keyed records go to the source, some at chosen offsets (KIP-391) so the
source has offset gaps. Replicators copy them side by side:

* a naive consume->produce loop on unmodified kafka-python, as people write it (auto-commit,
  ``auto_offset_reset='earliest'``), into ``naive.orders``; it runs in a fresh process that never
  imports kafka_kip (:mod:`kafka_kip_reference.demo.naive_loop`), so its row is stock kafka-python's;
* the kafka_kip mirror (:class:`kafka_kip.mirror.Mirror`, ``auto`` offsets, ``on_truncation='closest'``,
  syncing the consumer group ``app``), into ``orders``: same offsets on the KIP-391 target (but for the
  truncated partition's new history, which follows the records the source lost: translated from there),
  translated offsets on the stock one.

Then, one after another: stale metadata on the source (a broker keeps serving its old metadata and its
old leadership while the partition moves), an unclean leader election on the source (the new leader lacks
records both replicators already copied), and a crash and restart of both replicators. The scoreboard
compares the final logs of both clusters (``ReferenceCluster.records``): records lost without a report,
duplicated records, records at a wrong offset (the source's; where the mirror translates offsets, where
its offset map says), rewinds (places where the target log goes back in source offsets), and where consumer group
``app`` resumes when it fails over to the target: records it reads again, records it skips. The
naive loop's group resumes at the same offset number; MirrorMaker 2's translation (an offset sync every
100 records, a committed offset translated to the last sync at or below it, +1 past it) is applied to
the kafka_kip mirror's copy. Nothing is taken from counters kept by the replicators (they only pace the
scene: before each next step, each replicator has read the source to its end and had its writes answered).

A scene (:mod:`kafka_kip_reference.demo.consistency`, KIP-1243) creates and grows a topic while a broker lags, and
counts what a consumer and a producer of another process bootstrapped on that broker see and do: unmodified
kafka-python against kafka_kip's clients sharing the admin's consistency context.

A last scene (:mod:`kafka_kip_reference.demo.expansion`, KIP-253) grows a topic 2 -> 4 -> 6 while a keyed producer writes
and groups of three consumers read, and counts per-key order inversions, lost and misplaced records:
unmodified kafka-python against kafka_kip's classic and consumer-protocol groups.
"""
from __future__ import annotations

import bisect
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import kafka
from kafka.net.selector import NetworkSelector
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

from kafka_kip.mirror import CLOSEST, TRANSLATED, Incident, Mirror
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.translate import OffsetTranslator
from kafka_kip.protocol import requests
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.demo import consistency as demo_consistency
from kafka_kip_reference.demo import expansion as demo_expansion
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.fresh import FreshProcess

TOPIC = 'orders'
NAIVE_TOPIC = 'naive.orders'
PARTITIONS = 3
APP_GROUP = 'app'
MM2_OFFSET_LAG_MAX = 100  # MirrorMaker 2's offset.lag.max: an offset sync every this many records
_METADATA_MAX_AGE_MS = 500  # both replicators refresh metadata this often
_SETTLE_TIMEOUT_S = 120.0  # only bounds a replicator that hangs (the demo then fails naming it)
_NAIVE_LOOP = Path(__file__).with_name('naive_loop.py')


@dataclass
class Score:
    """One replicator's result, computed from the final logs (None: does not apply)."""

    name: str
    lost: int | None = 0  # source records missing on the target, not covered by a report
    duplicated: int | None = 0  # extra copies of a record on the target
    offset_mismatches: int | None = 0  # records on the target at another offset than the source's (or the map's)
    rewinds: int | None = 0  # places where the target log goes back in source offsets (not at a reported truncation)
    re_read: int = 0  # records group app reads again after failing over to the target
    skipped: int = 0  # records group app never reads after failing over to the target
    divergent_kept: int = 0  # target records the source no longer has (lost by the source)
    reported: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not any((self.lost, self.duplicated, self.offset_mismatches, self.rewinds, self.re_read, self.skipped))


@dataclass
class GroupCheck:
    """Where consumer group ``app`` resumes on the target vs the source, per partition."""

    partition: int
    source_offset: int
    target_offset: int
    same_record: bool  # the next record read on the target is the next one on the source


@dataclass
class Scene:
    """One scene: a target kind, its scores and what the kafka_kip mirror reported."""

    title: str
    stock: bool
    scores: list[Score]  # naive loop, kafka_kip mirror; on the stock target also MirrorMaker 2's translation
    incidents: list[Incident]
    truncation: tuple[int, int, int]  # (partition, first lost offset, end of the lost range)
    groups: list[GroupCheck]
    modes: list[str]  # the kafka_kip mirror's offset mode per partition
    seconds: float

    @property
    def kip(self) -> Score:
        return next(s for s in self.scores if s.name == 'kafka_kip mirror')


@dataclass
class DemoResult:
    scenes: list[Scene]
    lagging: demo_consistency.LaggingScene
    expansion: demo_expansion.ExpansionScene


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
            request = requests.produce({TOPIC: [(partition, batch)]}, acks=-1, timeout_ms=10000, use_offset=True)
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
    """The naive loop (:mod:`kafka_kip_reference.demo.naive_loop`) in a fresh process that never imports kafka_kip."""

    def __init__(self, source: str, target: str) -> None:
        self.source, self.target = source, target
        self._process: FreshProcess | None = None

    def start(self) -> None:
        self._process = FreshProcess(_NAIVE_LOOP)
        self._process.call('start', self.source, self.target, TOPIC, NAIVE_TOPIC, _METADATA_MAX_AGE_MS)

    def stop(self, crash: bool = False) -> None:
        self._process.call('stop', crash)
        self._process.close()  # fails if the process imported kafka_kip after all

    def settled(self, ends: dict[int, int]) -> bool:
        """The loop read every partition up to ``ends`` (source partition -> offset) and the target answered
        every record it sent (or the loop died): the target has all it will get of those records."""
        progress = self._process.call('progress')
        read_to = dict(progress['read_to'])
        return not progress['runs'] or (progress['unanswered'] == 0
                                        and all(read_to.get(p, -1) >= end for p, end in ends.items()))


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
        self._thread = threading.Thread(target=self._run, name='kafka-kip-mirror', daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.summary = self._mirror.run()

    def stop(self, crash: bool = False) -> None:
        self._mirror.stop(flush=not crash)
        self._thread.join()
        self._mirror.close()

    def settled(self, ends: dict[int, int]) -> bool:
        """The mirror copied (or reported) every source offset below ``ends`` (source partition -> offset), or
        stopped running."""
        copier = self._mirror.copier
        if not self._thread.is_alive():
            return True
        return copier is not None and all(copier.copied_to(TopicPartition(TOPIC, p)) >= end
                                          for p, end in ends.items())


def _reported(incidents: list[Incident], partition: int, offset: int) -> bool:
    """Whether a source offset the target lacks is covered by an incident (ranges in source offsets)."""
    for incident in incidents:
        if incident.source.partition != partition:
            continue
        if incident.lost and incident.lost[0] <= offset < incident.lost[1]:
            return True
        if incident.stopped and incident.truncated_at is not None and offset >= incident.truncated_at:
            return True
    return False


def score(name: str, source: ReferenceCluster, target: ReferenceCluster, target_topic: str,
          written: dict[bytes, int], incidents: list[Incident], *, offsets_kept: bool = True,
          offset_maps: dict[TopicPartition, object] | None = None) -> Score:
    """Compare the final logs: ``written`` maps every value ever written to the offset it was written at.

    Offsets are checked against ``offset_maps`` (the target's offset map, by target partition) where a
    partition has one, else against the source's where they are kept (``offsets_kept``), else not at all.
    """
    result = Score(name, offset_mismatches=0 if offsets_kept or offset_maps else None)
    for partition in range(PARTITIONS):
        src = source.records(TopicPartition(TOPIC, partition))
        tgt = target.records(TopicPartition(target_topic, partition))
        source_offsets = {r.value: r.offset for r in src}
        copies = Counter(r.value for r in tgt)
        result.duplicated += sum(n - 1 for n in copies.values() if n > 1)
        m = (offset_maps or {}).get(TopicPartition(target_topic, partition))
        if m is None and offsets_kept:
            result.offset_mismatches += len({r.value for r in tgt
                                             if r.value in source_offsets and r.offset != source_offsets[r.value]})
        elif m is not None:
            result.offset_mismatches += sum(1 for r in tgt if r.value in source_offsets and r.offset != m.translate(
                source_offsets[r.value], copied_to=source_offsets[r.value], target_end=r.offset + 1))
        result.lost += sum(1 for r in src if r.value not in copies and not _reported(incidents, partition, r.offset))
        restarts = {i.truncated_at for i in incidents if i.source.partition == partition and i.truncated_at is not None}
        # a step back in source offsets counts, unless it leaves the records the source lost for its new ones at
        # a reported truncation point (translated offsets with on_truncation='closest' copy those after them)
        result.rewinds += sum(1 for a, b in zip(tgt, tgt[1:], strict=False) if written[b.value] < written[a.value]
                              and not (a.value not in source_offsets and written[b.value] in restarts))
        result.divergent_kept += sum(1 for value in copies if value not in source_offsets)
    for incident in incidents:
        ranges = [f'{kind} {low}..{high - 1}' for kind, r in (('lost', incident.lost),
                                                               ('divergent', incident.divergent)) if r
                  for low, high in [r]]
        result.reported.append(f'{incident.kind} {incident.source.topic}-{incident.source.partition}'
                               + (f' ({", ".join(ranges)})' if ranges else ''))
    return result


def failover(source: list, target: list, source_offset: int, target_offset: int) -> tuple[int, int]:
    """(records read again, records skipped) by a group committed at ``source_offset`` on the source that
    resumes at ``target_offset`` on the target; ``source`` / ``target`` are the logs' records."""
    consumed = {r.value for r in source if r.offset < source_offset}
    unread = {r.value for r in source if r.offset >= source_offset}
    read_on_target = {r.value for r in target if r.offset >= target_offset}
    re_read = sum(1 for r in target if r.offset >= target_offset and r.value in consumed)
    skipped = sum(1 for r in target if r.offset < target_offset and r.value in unread
                  and r.value not in read_on_target)
    return re_read, skipped


def mm2_translation(target: list, written: dict[bytes, int]) -> Callable[[int], int]:
    """MirrorMaker 2's translation on a copy: an offset sync (source, target) for the first record and then
    every ``MM2_OFFSET_LAG_MAX`` source offsets; a committed offset goes to the last sync at or below it,
    +1 when past it (so a failed-over group re-reads up to that many records, never skips)."""
    syncs: list[tuple[int, int]] = []
    for r in target:
        upstream = written[r.value]
        if not syncs or upstream - syncs[-1][0] >= MM2_OFFSET_LAG_MAX:
            syncs.append((upstream, r.offset))

    def translate(offset: int) -> int:
        index = bisect.bisect_right([u for u, _ in syncs], offset) - 1
        if index < 0:
            return 0
        upstream, downstream = syncs[index]
        return downstream if upstream == offset else downstream + 1

    return translate


def _committed(cluster: ReferenceCluster, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=APP_GROUP,
                                   enable_auto_commit=False, auto_offset_reset='none')
    try:
        return {tp: -1 if consumer.committed(tp) is None else consumer.committed(tp) for tp in tps}
    finally:
        consumer.close(autocommit=False)


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


def run_scene(stock: bool, say: Callable[[str], None] = lambda line: None) -> Scene:
    """Run one scene (a KIP-391 target, or a stock one) and score it; ``say`` gets a line per step."""
    started = time.monotonic()
    incidents: list[Incident] = []
    with _quiet(), ReferenceCluster(brokers=3) as source, \
            ReferenceCluster(brokers=1, features=() if stock else None) as target:
        source.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        target.create_topic(NAIVE_TOPIC, partitions=PARTITIONS, replication_factor=1)
        writer = _Writer(source)
        try:
            say('source: 3 brokers, topic orders (3 partitions, replication 3); target: 1 broker, '
                + ('stock (no KIP-391)' if stock else 'with KIP-391'))
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

            def settle() -> None:
                """Until each replicator has copied what the source has now, as far as it ever will: read up to
                the source's end and answered by the target (a replicator that lost records never catches up)."""
                ends = {p: source.log_end_offset(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
                wait_until(lambda: kip.settled(ends), f'the kafka_kip mirror to copy the source up to {ends}',
                           timeout=_SETTLE_TIMEOUT_S)
                wait_until(lambda: naive.settled(ends), f'the naive loop to copy the source up to {ends}',
                           timeout=_SETTLE_TIMEOUT_S)

            settle()
            say('both replicators started and caught up')

            # 1. stale metadata: the leader of orders-0 keeps its old metadata and leadership (a zombie)
            tp0 = TopicPartition(TOPIC, 0)
            zombie = source.leader(tp0)
            source.delay_metadata(zombie)
            source.elect_leader(tp0, next(b for b in source.isr(tp0) if b != zombie))
            # A fault of a duration, not a wait: for 4 s (8 metadata refreshes of each replicator, each of which
            # may ask the zombie) records keep coming while the zombie answers with its old view
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
            time.sleep(0.05)  # a moment into copying them: the crash comes mid-stream, not at a state
            naive.stop(crash=True)
            kip.stop(crash=True)
            for p in range(PARTITIONS):
                writer.write(p, 50, 'while-down')
            naive.start()
            kip.start()
            for p in range(PARTITIONS):
                writer.write(p, 50, 'after-restart')
            settle()
            say('fault 3: both replicators crashed mid-stream and restarted')

            naive.stop()
            kip.stop()
            scores, groups = _score_scene(source, target, writer.written, incidents, stock)
            modes = [p.mode for p in kip.summary.partitions]
        finally:
            writer.close()
    title = 'stock target (no KIP-391)' if stock else 'KIP-391 target'
    return Scene(title, stock, scores, incidents, (1, first_lost, end_lost), groups, modes,
                 time.monotonic() - started)


def _score_scene(source: ReferenceCluster, target: ReferenceCluster, written: dict[bytes, int],
                 incidents: list[Incident], stock: bool) -> tuple[list[Score], list[GroupCheck]]:
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    source_committed = _committed(source, tps)
    target_committed = _committed(target, tps)
    with OffsetTranslator(target.bootstrap_servers) as translator:  # the partitions with translated offsets
        maps = {tp: m for tp, m in translator.maps.items() if m.mode == TRANSLATED}
    naive = score('naive loop (kafka-python)', source, target, NAIVE_TOPIC, written, [], offsets_kept=not stock)
    kip = score('kafka_kip mirror', source, target, TOPIC, written, incidents, offsets_kept=not stock,
                offset_maps=maps)
    mm2 = Score('MirrorMaker 2 translation', None, None, None, None) if stock else None
    groups = []
    for tp in tps:
        src = source.records(tp)
        copy, naive_copy = target.records(tp), target.records(TopicPartition(NAIVE_TOPIC, tp.partition))
        offset = source_committed[tp]
        for row, log_, at in ((kip, copy, target_committed[tp]), (naive, naive_copy, offset)) + (
                ((mm2, copy, mm2_translation(copy, written)(offset)),) if mm2 else ()):
            re_read, skipped = failover(src, log_, offset, at)
            row.re_read += re_read
            row.skipped += skipped
        next_source = next((r.value for r in src if r.offset >= offset), None)
        next_target = next((r.value for r in copy if r.offset >= target_committed[tp]), None)
        groups.append(GroupCheck(tp.partition, offset, target_committed[tp], next_source == next_target))
    return [naive] + ([mm2] if mm2 else []) + [kip], groups


def run_scenario(say: Callable[[str], None] = lambda line: None) -> DemoResult:
    """The mirror scenes (a target with KIP-391, then a stock one), the lagging-broker scene, the expansion scene."""
    mirrors = [run_scene(False, say), run_scene(True, say)]
    with _quiet():
        return DemoResult(mirrors, demo_consistency.run_scene(say), demo_expansion.run_scene(say))


def _cell(value: int | None, width: int) -> str:
    return f'{"-" if value is None else f"{value:,}":>{width}}'


def render_scoreboard(scene: Scene) -> str:
    """One scene's scoreboard table and what the kafka_kip mirror reported."""
    offsets = 'wrong offsets (map)' if scene.stock else 'offset mismatches'
    header = (f'{"":<28}{"lost (unreported)":>19}{"duplicated":>12}{offsets:>21}{"rewinds":>9}'
              f'{"failover re-reads":>19}{"skips":>7}')
    lines = [f'{scene.title}:', header, '-' * len(header)]
    for row in scene.scores:
        lines.append(f'{row.name:<28}{_cell(row.lost, 19)}{_cell(row.duplicated, 12)}'
                     f'{_cell(row.offset_mismatches, 21)}{_cell(row.rewinds, 9)}{_cell(row.re_read, 19)}'
                     f'{_cell(row.skipped, 7)}')
    lines.append('')
    for row in scene.scores:
        if row.lost is None:
            continue
        reported = '; '.join(row.reported) if row.reported else 'nothing'
        lines.append(f'{row.name}: reported {reported}; target keeps {row.divergent_kept} records the source '
                     'lost')
    lines.append(f'kafka_kip mirror offsets: {", ".join(f"orders-{p} {m}" for p, m in enumerate(scene.modes))}')
    for check in scene.groups:
        verdict = 'same next record' if check.same_record else 'DIFFERENT next record'
        lines.append(f'group {APP_GROUP} on orders-{check.partition}: source {check.source_offset}, '
                     f'target {check.target_offset}: {verdict}')
    return '\n'.join(lines)


def report(result: DemoResult, out: TextIO) -> int:
    """Print the scoreboards to ``out``; 0 when every kafka_kip row is clean and group ``app`` resumes right."""
    ok = True
    for scene in result.scenes:
        print('', file=out)
        print(render_scoreboard(scene), file=out)
        print(f'\n(scored from the final logs of both clusters; {scene.seconds:.1f} s)', file=out, flush=True)
        ok = ok and scene.kip.clean and all(c.same_record for c in scene.groups)
    print('', file=out)
    print(demo_consistency.render(result.lagging), file=out)
    print(f'\n(counted from the clients\' metadata views and where their records landed; '
          f'{result.lagging.seconds:.1f} s)', file=out, flush=True)
    print('', file=out)
    print(demo_expansion.render(result.expansion), file=out)
    print(f'\n(counted from what the producer sent and the order the group\'s polls returned; '
          f'{result.expansion.seconds:.1f} s)', file=out, flush=True)
    return 0 if ok and result.lagging.kip.clean and result.expansion.clean else 1


def run_demo(out: TextIO) -> int:
    """Run the demo and print the scoreboards to ``out`` (``kafka-kip demo``, ``make demo``)."""
    def say(line: str) -> None:
        print(line, file=out, flush=True)

    say('kafka-kip demo: a naive kafka-python replicator vs the kafka_kip mirror, through three faults, '
        'on a KIP-391 target and on a stock one; then kafka-python vs kafka_kip clients through a lagging broker '
        'and through partition expansions\n')
    return report(run_scenario(say), out)
