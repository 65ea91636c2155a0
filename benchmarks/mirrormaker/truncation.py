"""Scenario ``truncation``: a real unclean election on a 3-broker source (its own cluster, started for this
scenario; topic of 2 partitions x 3 replicas). Partition 0 gets 100 records, then 20 more acknowledged (acks=all)
while one follower is stopped; that follower is elected uncleanly (``ApacheKafkaCluster.elect_uncleanly``), so the
source loses offsets 100..119, and 30 new records follow on each partition (partition 0: at 100..129, a divergent
history). Three cases per replicator: the lost records were copied and the replicator runs through the election;
copied, then the replicator stopped (SIGTERM) before the election and started after the new records; or never
copied (stopped before they were written). Reported: what the replicator said (``kafka-kip mirror --json``
incidents; MirrorMaker 2's log, whose consumer logs the truncation at INFO), its exit codes after SIGTERM, and on the
target, record by record (values name topic, partition, phase and index): lost records kept, source records
missing, at another offset than on the source, duplicated."""
from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness import BenchmarkError, Column, Table, progress
from benchmarks.mirrormaker.clusters import Record, read_all, watermark_reader
from benchmarks.mirrormaker.replicators import TIMEOUT_S, Replicator, make, target_cluster, wait_for
from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster

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



def run(keys: Sequence[str], workdir: Path) -> Table:
    """Every case with every replicator on one 3-broker source."""
    truncations = []
    with ApacheKafkaCluster(brokers=3, broker_config=TRUNCATION_BROKER_CONFIG) as source:
        for n, (case, key) in enumerate((c, k) for c in TRUNCATION_CASES for k in keys):
            truncations.append(run_truncation(key, case, source, f'trunc{n}', workdir))
            progress(f'truncation: {truncations[-1]}')
    lost = truncations[0].lost
    lost_text = f'offsets {_ranges([r.offset for r in lost])}' if lost else 'none'
    table = Table([Column('replicator', left=True), Column('replicator during the election'),
                   Column('what it reported'), Column('exit code(s) after SIGTERM'),
                   Column('lost records kept on the target'), Column('source records missing on the target'),
                   Column('at another offset than on the source'), Column('duplicated'),
                   Column("partition 0's new records on the target"), Column('run ended')],
                  title=f'Truncation: a 3-broker source, topic of {TRUNCATION_PARTITIONS} partitions x 3 replicas; '
                        f'partition 0 gets {FIRST} records, then {DOOMED} more acknowledged (acks=all) while a '
                        f'follower is stopped; that follower is elected uncleanly (the source loses {lost_text}), '
                        f'then {AFTER} new records go to each partition (partition 0: at the lost offsets and on); '
                        'partition 1 is never truncated\n')
    for r in truncations:
        table.add(r.replicator, r.case, '; '.join(r.reports) or 'nothing',
                  ', '.join('-' if c is None else str(c) for c in r.exit_codes), f'{r.kept_lost} of {len(r.lost)}',
                  r.missing, r.elsewhere, r.duplicated, r.new_on_target, r.settled)
    return table
