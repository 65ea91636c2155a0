"""``closest`` after a real unclean election: the source's new history follows the target's end, exactly.

The source (reference cluster, 3 brokers) has offsets 0..99, then 100..119 that only the leader has; the mirror
copies all 120; a lagging follower is elected uncleanly, so the source loses 100..119, and 30 new records land at
100..129. The target keeps its copies of the lost records at 100..119; the new records follow at 120..149, the
partition going on in translated mode with the offset map saying so, and group sync translates a source offset of
the new history to its target offset. On a KIP-391 target (``broker`` mode until then) and a stock one
(``checked``); with the mirror running through the election, restarted after it, and killed mid-way.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.mirror import Mirror, Run
from kafka_kip.mirror.translate import OffsetTranslator
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.mirror.helpers import (
    commit_groups,
    committed_offsets,
    first_record_of_group,
    incident_fields,
    killed_then_restarted,
    write_at,
)

pytestmark = pytest.mark.kip320

TP = TopicPartition('orders', 0)
PRODUCE = ApiKey.Produce
FIRST = [(o, b'first-%d' % o) for o in range(100)]
LOST = [(o, b'lost-%d' % o) for o in range(100, 120)]
NEW = [(o, b'new-%d' % o) for o in range(100, 130)]
#: the target afterwards: what it had, lost records included, then the new history after its end
EXPECTED = [*FIRST, *LOST, *((o + 20, value) for o, value in NEW)]
RUNS = [Run(0, 0, 100), Run(100, 120, 30)]
MESSAGE = ('orders-0: the source truncated its log at offset 100 (found by {found_by}): records 100..119 that were '
           'read are gone from the source; the target keeps its copies at offsets 100..119, where the source now '
           "has other records or none; continuing from the truncation point in translated mode: the source's "
           "records from 100 on follow at target offset 120, their offsets in the offset map (the partition's "
           "offsets cannot equal the source's again)")


@pytest.fixture(params=['broker', 'checked'])
def clusters(request: pytest.FixtureRequest) -> Iterator[tuple[ReferenceCluster, ReferenceCluster, str]]:
    """A 3-broker source with ``orders`` (first records written), a target with KIP-391 or without, its mode."""
    features = {} if request.param == 'broker' else {'features': ()}
    with ReferenceCluster(brokers=3) as source, ReferenceCluster(brokers=1, **features) as target:
        source.create_topic('orders', partitions=1, replication_factor=3)
        write_values(source, FIRST)
        yield source, target, request.param
        assert source.internal_errors == [] and target.internal_errors == []


def write_values(cluster: ReferenceCluster, records: list[tuple[int, bytes]], batch: int = 10) -> None:
    """``records`` (consecutive offsets) at their offsets, in batches of ``batch``."""
    for i in range(0, len(records), batch):
        chunk = records[i:i + batch]
        write_at(cluster, TP, chunk[0][0], [value for _, value in chunk])


def lose_the_last_20(source: ReferenceCluster) -> int:
    """Pause a follower and write 100..119 (only the leader has them); returns the follower."""
    lagging = next(b for b in source.replicas(TP) if b != source.leader(TP))
    source.pause_replication(TP, lagging)
    write_values(source, LOST)
    return lagging


def elect_and_write_the_new_history(source: ReferenceCluster, lagging: int) -> None:
    """The unclean election (the source loses 100..119), 30 new records at 100..129, group ``app`` at 110."""
    source.elect_leader(TP, lagging, unclean=True)
    write_values(source, NEW)
    commit_groups(source.bootstrap_servers, {'app': {TP: 110}})


def target_log(cluster: ReferenceCluster) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in cluster.records(TP)]


def assert_new_history_after_the_lost_records(target: ReferenceCluster) -> None:
    assert target_log(target) == EXPECTED
    with OffsetTranslator(target.bootstrap_servers) as translator:
        assert (translator.maps[TP].mode, translator.maps[TP].runs) == ('translated', RUNS)
        assert [translator.translate(TP, o)[1] for o in (0, 99, 100, 110, 129, 130)] == [0, 99, 120, 130, 149, 150]
    # the group committed source offset 110 of the new history: on the target it reads that record next
    assert committed_offsets(target.bootstrap_servers, ['app'], TP) == {'app': 130}
    assert first_record_of_group(target.bootstrap_servers, 'app', TP) == (130, b'new-110')


def test_closest_with_the_mirror_running_through_the_election(clusters) -> None:
    source, target, mode = clusters
    incidents: list = []
    mirror = Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', groups='app',
                    on_truncation='closest', group_sync_interval_ms=100, on_incident=incidents.append)
    runner = threading.Thread(target=lambda: setattr(mirror, 'result', mirror.run()))
    runner.start()
    try:
        wait_until(lambda: target.topic_id('orders') is not None and len(target.records(TP)) == 100,
                   'the first 100 records copied')
        wait_until(lambda: mirror.latest and [p.mode for p in mirror.latest.partitions] == [mode],
                   f'the partition in {mode} mode')
        lagging = lose_the_last_20(source)
        wait_until(lambda: len(target.records(TP)) == 120, 'the records the source loses copied')
        elect_and_write_the_new_history(source, lagging)
        wait_until(lambda: len(target.records(TP)) == 150 and
                   committed_offsets(target.bootstrap_servers, ['app'], TP) == {'app': 130},
                   'the new history copied and the group synced')
    finally:
        mirror.stop()
        runner.join(30)
        mirror.close()
    summary = mirror.result
    [incident] = incidents
    assert incident_fields(incident) == ('truncation', False, (100, 120), (100, 120), 100, 120)
    assert incident.message in {MESSAGE.format(found_by=how) for how in
                                ('OffsetForLeaderEpoch', 'the fetch response (diverging epoch)')}
    [partition] = summary.partitions
    assert (partition.mode, partition.state, partition.copied_to, partition.target_end, partition.records) == \
        ('translated', 'copying', 130, 150, 150)
    assert (summary.exit_code, summary.incidents) == (0, [incident])
    assert_new_history_after_the_lost_records(target)


def test_closest_with_the_mirror_restarted_after_the_election(clusters) -> None:
    source, target, mode = clusters
    lagging = lose_the_last_20(source)
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders') as mirror:
        first = mirror.run(stop_at_end=True)
    assert (first.partitions[0].mode, first.records, target_log(target)) == (mode, 120, FIRST + LOST)
    elect_and_write_the_new_history(source, lagging)
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', groups='app',
                on_truncation='closest') as mirror:
        summary = mirror.run(stop_at_end=True)
    [incident] = summary.incidents
    assert incident_fields(incident) == ('truncation', False, (100, 120), (100, 120), 100, 120)
    assert incident.message == MESSAGE.format(found_by='comparing the target with the source on resume')
    [partition] = summary.partitions
    assert (partition.mode, partition.state, partition.copied_to, partition.target_end, partition.records) == \
        ('translated', 'done', 130, 150, 30)
    assert {tp: c.offset for tp, c in summary.groups.committed['app'].items()} == {TP: 130}
    assert summary.exit_code == 0
    assert_new_history_after_the_lost_records(target)
    # a later run goes on in translated mode: nothing found again, nothing copied twice
    write_values(source, [(130, b'new-130')])
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', on_truncation='closest') as mirror:
        later = mirror.run(stop_at_end=True)
    assert (later.partitions[0].mode, later.records, later.incidents) == ('translated', 1, [])
    assert target_log(target) == [*EXPECTED, (150, b'new-130')]


@pytest.mark.parametrize('held_produce', ['lands after the crash', 'never lands'])
def test_a_mirror_killed_while_copying_the_new_history_restarts_without_a_duplicate_or_a_loss(reference_cluster_factory,
        held_produce: str) -> None:
    source = reference_cluster_factory(brokers=3)
    target = reference_cluster_factory(brokers=1, features=())
    source.create_topic('orders', partitions=1, replication_factor=3)
    write_values(source, FIRST)
    lagging = lose_the_last_20(source)
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders') as mirror:
        assert mirror.run(stop_at_end=True).records == 120
    elect_and_write_the_new_history(source, lagging)  # three batches of 10: three produces to the target

    def map_ahead() -> None:
        # the map said so before the records: translated mode, the new history mapped past what landed
        with OffsetTranslator(target.bootstrap_servers) as translator:
            ahead = translator.maps[TP]
        assert ahead.mode == 'translated' and ahead.runs[0] == Run(0, 0, 100)
        assert ahead.runs[1].source == 100 and ahead.runs[1].target == 120 and ahead.runs[1].count >= 20

    clusters = ('--source', source.bootstrap_servers, '--target', target.bootstrap_servers, '--topics', 'orders',
                '--on-truncation', 'closest')
    before_restart, summary = killed_then_restarted(
        target, TP, clusters, (*clusters, '--group-sync', 'app'), held=2,
        lands=held_produce == 'lands after the crash', ready=lambda: len(target.records(TP)) == 130,
        landed=lambda: len(target.records(TP)) == 140, while_held=map_ahead)
    assert (summary['records'], summary['incidents'], summary['groups']['failed']) == (150 - before_restart, [], {})
    assert [(p['mode'], p['copied_to'], p['target_end']) for p in summary['partitions']] == \
        [('translated', 130, 150)]
    assert_new_history_after_the_lost_records(target)
