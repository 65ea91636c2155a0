"""Scenario ``offsets``: a source with gaps -- DeleteRecords at the start, committed and aborted transactions, a
compacted topic -- plus a plain topic, and a consumer group ``app`` that committed half of each partition. After the
copy: records whose target offset differs from the source offset, records missing, duplicated or
aborted-but-copied, and where ``app`` resumes on the target (records read again / skipped) with the offsets each
replicator synced. :class:`Correctness` is the crash scenario's row too."""
from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness import BenchmarkError, Column, Table, progress
from benchmarks.mirrormaker.clusters import (
    Record,
    commit,
    committed,
    has_topics,
    produce,
    produce_transactions,
    read_all,
)
from benchmarks.mirrormaker.replicators import GROUP, Replicator, make, target_cluster, wait_for
from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster


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
    restart_s: float = 0.0  # crash: from the restart to every record on the target


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



def run(source: ApacheKafkaCluster, keys: Sequence[str], workdir: Path) -> Table:
    gaps = prepare_gaps(source)
    progress(f'gap topics ready: {len(gaps.records)} readable records, group {GROUP} at {gaps.group}')
    table = Table([Column('replicator', left=True), Column('readable source records', ','),
                   Column('at another offset on the target (by topic)'), Column('missing'), Column('duplicated'),
                   Column('aborted records copied'), Column('group app on the target: re-read / skipped'),
                   Column('partitions without a synced offset')],
                  title='Offsets and failover: ' + ', '.join(f'{t} ({n} partition{"s" * (n > 1)})'
                                                             for t, n in GAP_TOPICS.items()) + '\n')
    for key in keys:
        with target_cluster() as target:
            r = run_offsets(make(key, workdir, source.bootstrap_servers, target.bootstrap_servers, r'gaps\..*'), gaps)
        progress(f'offsets: {r}')
        topics = ', '.join(f'{t.removeprefix("gaps.")} {n}' for t, n in sorted(r.by_topic.items()))
        table.add(r.replicator, r.records, f'{r.mismatched:,}' + (f' ({topics})' if topics else ''), r.missing,
                  r.duplicated, r.aborted_copied, f'{r.rereads} / {r.skips}', ', '.join(r.unsynced) or 'none')
    return table
