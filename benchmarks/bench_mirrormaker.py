"""MirrorMaker 2 against ``kafka-kip mirror``, each copying the same topics between two Apache Kafka clusters.

Both replicators run as their own processes next to two Apache Kafka clusters (:mod:`kafka_kip_reference.external.apache_kafka`,
one broker each; three for the truncation scenario's source): MirrorMaker 2 in dedicated mode
(``org.apache.kafka.connect.mirror.MirrorMaker`` from ``connect-mirror``, resolved by Maven;
``IdentityReplicationPolicy`` so target topics keep their names; group offset sync on, checkpoints and syncs every
second; otherwise its defaults) and ``python -m kafka_kip mirror`` at its defaults (``--offset-mode auto``,
``--group-sync``). Every replicator run gets a fresh target cluster.

Scenarios (``--scenarios``; one module each in benchmarks/mirrormaker/):

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

import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from benchmarks.harness import Table, parser, progress, render, subset
from benchmarks.mirrormaker import crash, offsets, throughput, truncation
from benchmarks.mirrormaker.replicators import MM2_VERSION, check_replicator_key, mm2_jars
from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster

SOURCE_CONFIG = {'log.cleaner.backoff.ms': '200'}
SCENARIOS = ('throughput', 'offsets', 'crash', 'truncation')


def main(argv: Sequence[str] | None = None) -> int:
    args_parser = parser('bench_mirrormaker', __doc__)
    args_parser.add_argument('--records', type=int, default=1_000_000, help='throughput records (default 1,000,000)')
    args_parser.add_argument('--crash-records', type=int, default=200_000,
                             help='crash scenario records (default 200,000)')
    args_parser.add_argument('--rounds', type=int, default=3, help='interleaved throughput rounds, medians (default 3)')
    args_parser.add_argument('--scenarios', default=','.join(SCENARIOS),
                             help=f'comma-separated, of {",".join(SCENARIOS)} (default: all)')
    args_parser.add_argument('--replicators', default='mm2,kafka-kip',
                             help='comma-separated: kafka-kip, kafka-kip:<on-truncation> (stop, closest), mm2 '
                                  '(tasks.max=1, its default), mm2:<tasks.max>, mm2:eos (exactly.once.source.support=enabled)')
    args = args_parser.parse_args(argv)
    keys = args.replicators.split(',')
    for key in keys:
        try:
            check_replicator_key(key)
        except ValueError as exc:
            args_parser.error(f'--replicators: {exc}')
    scenarios = subset(args_parser, '--scenarios', args.scenarios, SCENARIOS)
    progress(f'MirrorMaker 2 {MM2_VERSION} jars: {mm2_jars()}')
    tables: list[Table] = []
    with tempfile.TemporaryDirectory(prefix='bench-mm2-') as work, ExitStack() as clusters:
        workdir = Path(work)
        if set(scenarios) & {'throughput', 'offsets', 'crash'}:
            source = clusters.enter_context(ApacheKafkaCluster(brokers=1, broker_config=SOURCE_CONFIG))
        if 'throughput' in scenarios:
            tables.append(throughput.run(source, keys, workdir, args.records, args.rounds))
        if 'offsets' in scenarios:
            tables.append(offsets.run(source, keys, workdir))
        if 'crash' in scenarios:
            tables.append(crash.run(source, keys, workdir, args.crash_records))
        if 'truncation' in scenarios:
            tables.append(truncation.run(keys, workdir))
    print(render(tables, as_json=args.json, markdown=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
