"""Scenario ``crash``: ``kill -9`` of the replicator once a third of a topic is on the target, then a restart:
duplicates and losses on the target, and the time from the restart until every record is there. The count at the
kill is what a read_committed consumer reads there (end offsets for a replicator that writes no transactions)."""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import Column, Table, progress
from benchmarks.mirrormaker.clusters import (
    committed_records,
    end_offsets_sum,
    produce,
    read_all,
    value_of,
    watermark_reader,
)
from benchmarks.mirrormaker.offsets import Correctness
from benchmarks.mirrormaker.replicators import Replicator, make, target_cluster, wait_for
from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster

CRASH_TOPIC = {'crash': 8}


def run_crash(replicator: Replicator, count: int) -> Correctness:
    with watermark_reader(replicator.target) as reader:
        replicator.start()
        wait_for(lambda: end_offsets_sum(reader, CRASH_TOPIC) >= count // 3, 'a third on the target', replicator)
        replicator.kill()
        at_kill = committed_records(replicator, reader, CRASH_TOPIC)
        replicator.start()
        wait_for(lambda: end_offsets_sum(reader, CRASH_TOPIC) >= count, 'every record on the target', replicator)
    expected = {value_of('crash', i, 100) for i in range(count)}

    def complete() -> bool:
        return expected <= {r.value for r in read_all(replicator.target, CRASH_TOPIC)}

    wait_for(complete, 'every record on the target after the restart', replicator)
    restart_s = time.perf_counter() - replicator.started_at
    replicator.stop()
    target = read_all(replicator.target, CRASH_TOPIC)
    counts = Counter(r.value for r in target)
    return Correctness(replicator.name, records=count, missing=len(expected - set(counts)),
                       duplicated=sum(n - 1 for n in counts.values()), on_target_at_kill=at_kill,
                       restart_s=restart_s)



def run(source: ApacheKafkaCluster, keys: Sequence[str], workdir: Path, records: int) -> Table:
    source.create_topic('crash', 8)
    produce(source.bootstrap_servers, 'crash', records, partitions=8, size=100)
    table = Table([Column('replicator', left=True), Column('on the target at the kill', ','),
                   Column('duplicates on the target', ','), Column('records lost', ','),
                   Column('restart to the last record (s)', '.1f')],
                  title=f'kill -9 once a third of {records:,} records (8 partitions) is on the target, then a restart\n')
    for key in keys:
        with target_cluster() as target:
            r = run_crash(make(key, workdir, source.bootstrap_servers, target.bootstrap_servers, 'crash'), records)
        progress(f'crash: {r}')
        table.add(r.replicator, r.on_target_at_kill, r.duplicated, r.missing, r.restart_s)
    return table
