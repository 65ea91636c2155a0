"""Scenario ``throughput``: N records of 100 bytes over 8 partitions, loaded once; each replicator copies them
``--rounds`` times, interleaved (rotated), each run onto a fresh target cluster. The target's end offsets are polled
every 0.1 s; the rate is N over the time from the last poll that found the target empty to the one that found all N (for a
transactional replicator, once the end offsets reach N, by counting the records a read_committed consumer reads);
CPU seconds are the replicator process's (all threads, start-up included)."""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import BenchmarkError, Column, Rate, Samples, Table, progress, rotated
from benchmarks.mirrormaker.clusters import committed_records, end_offsets_sum, produce, watermark_reader
from benchmarks.mirrormaker.replicators import MM2_VERSION, Replicator, make, target_cluster, wait_for
from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster

TOPICS = {'tput': 8}


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
            return total >= count and committed_records(replicator, reader, topics) >= count

        wait_for(copied, f'{count:,} records on the target', replicator)
        done = time.perf_counter()
        cpu = replicator.cpu_seconds()
        replicator.stop()
        on_target = committed_records(replicator, reader, topics)
    if on_target != count:
        raise BenchmarkError(f'{replicator.name}: {on_target:,} records on the target, expected {count:,}')
    return Throughput(replicator.name, count, done - replicator.started_at, done - empty_until[0], cpu)



def run(source: ApacheKafkaCluster, keys: Sequence[str], workdir: Path, records: int, rounds: int) -> Table:
    """Load the source, run every replicator ``rounds`` times; the table of medians and per-round ratios."""
    src = source.bootstrap_servers
    source.create_topic('tput', 8)
    produce(src, 'tput', records, partitions=8, size=100)
    progress(f'loaded {records:,} records into tput (8 partitions)')
    runs: dict[str, list[Throughput]] = {key: [] for key in keys}
    samples = Samples()
    for round_ in range(rounds):
        for key in rotated(keys, round_):
            with target_cluster() as target:
                result = run_throughput(make(key, workdir, src, target.bootstrap_servers, 'tput'), TOPICS, records)
            runs[key].append(result)
            samples.add(key, Rate(result.records_per_s, result.records / result.cpu_s))
            progress(f'round {round_ + 1}: {result.replicator}: {result.records_per_s:,.0f} records/s '
                     f'(total {result.total_s:.1f} s, CPU {result.cpu_s:.1f} s)')
    table = Table([Column('replicator', left=True), Column('records/s (target empty to complete)', ',.0f'),
                   Column("vs MirrorMaker 2 (median of the rounds' ratios)", '.2f', 'x'),
                   Column('process start to last record (s)', '.1f'), Column('CPU s of the replicator', '.1f'),
                   Column('all rounds, records/s')],
                  title=f'Throughput: {records:,} records x 100 bytes, 8 partitions, median of {rounds} interleaved '
                        f'rounds (MirrorMaker 2 {MM2_VERSION})\n')
    for key, results in runs.items():
        median = sorted(results, key=lambda r: r.copy_s)[len(results) // 2]
        table.add(median.replicator, median.records_per_s, samples.ratio(key, 'mm2'), median.total_s, median.cpu_s,
                  ', '.join(f'{x.records_per_s / 1000:,.0f}k' for x in results))
    return table
