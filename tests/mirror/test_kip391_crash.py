"""Translated mode survives ``kill -9`` between its map write and the produce it covers: no duplicate, no loss.

The target is the reference cluster without its extensions (a stock broker). A control holds one produce
of data to the target: by then the mirror has written that produce's offset map records (the map is
written ahead). The mirror process is killed (SIGKILL) while the produce is held; then the produce either
lands after the mirror died (its answer lost) or never lands (dropped). A restarted mirror copies the rest
exactly and translates every committed group offset to the first record at or after it.
"""
from __future__ import annotations

import kafka
import pytest
from kafka.structs import TopicPartition

from kafka_kip.mirror import Run
from kafka_kip.mirror.translate import OffsetTranslator
from kafka_kip_reference import ReferenceCluster
from tests.mirror.helpers import commit_groups, committed_offsets, killed_then_restarted, write_at

pytestmark = pytest.mark.kip391

TP = TopicPartition('orders', 0)


def gapped_source(source: ReferenceCluster) -> list[tuple[int, bytes]]:
    """Batches of 10 at 50..99 and 110..149 (the log starts at 50; 100..109 never existed)."""
    source.create_topic('orders', partitions=1, replication_factor=1)
    for base, count in ((0, 50), (50, 10), (60, 10), (70, 10), (80, 10), (90, 10), (110, 10), (120, 10), (130, 10),
                        (140, 10)):
        write_at(source, TP, base, [b'v-%d' % (base + i) for i in range(count)])
    admin = kafka.KafkaAdminClient(bootstrap_servers=source.bootstrap_servers)
    try:
        admin.delete_records({TP: 50})
    finally:
        admin.close()
    return [(r.offset, r.value) for r in source.records(TP)]


def target_log(cluster: ReferenceCluster) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in cluster.records(TP)]


@pytest.mark.parametrize('held_produce', ['lands after the crash', 'never lands'])
def test_kill_9_between_map_write_and_produce_answer_loses_nothing_duplicates_nothing(held_produce: str) -> None:
    groups = {f'app-{offset}': offset for offset in (0, 50, 57, 99, 100, 104, 110, 135, 149, 150, 400)}
    with ReferenceCluster(brokers=1) as source, ReferenceCluster(brokers=1, features=()) as target:
        expected = gapped_source(source)
        commit_groups(source.bootstrap_servers, {group: {TP: offset} for group, offset in groups.items()})

        def map_ahead() -> None:
            with OffsetTranslator(target.bootstrap_servers) as translator:
                ahead = translator.maps[TP].runs
            assert sum(run.count for run in ahead) > 20  # the held batch (at least) is in the map already

        clusters = ('--source', source.bootstrap_servers, '--target', target.bootstrap_servers, '--topics', 'orders',
                    '--offset-mode', 'translated')
        before_restart, summary = killed_then_restarted(
            target, TP, clusters, (*clusters, '--group-sync', 'app-.*'), held=3,
            lands=held_produce == 'lands after the crash', ready=lambda: len(target.records(TP)) == 20,
            landed=lambda: len(target.records(TP)) == 30, while_held=map_ahead)
        assert (summary['records'], summary['incidents'], summary['groups']['failed']) == \
            (90 - before_restart, [], {})

        # every source record exactly once, in order, at consecutive target offsets
        assert target_log(target) == [(i, value) for i, (_, value) in enumerate(expected)]
        with OffsetTranslator(target.bootstrap_servers) as translator:
            assert translator.maps[TP].runs == [Run(50, 0, 50), Run(110, 50, 40)]
        # a group failing over reads exactly the record after its committed source offset
        committed = committed_offsets(target.bootstrap_servers, groups, TP)
        target_records = dict(target_log(target))
        for group, offset in groups.items():
            next_on_source = next((value for o, value in expected if o >= offset), None)
            next_on_target = next((target_records[o] for o in sorted(target_records) if o >= committed[group]), None)
            assert next_on_target == next_on_source, (group, committed[group])
        assert committed == {'app-0': 0, 'app-50': 0, 'app-57': 7, 'app-99': 49, 'app-100': 50, 'app-104': 50,
                             'app-110': 50, 'app-135': 75, 'app-149': 89, 'app-150': 90, 'app-400': 90}
