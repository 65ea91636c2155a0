"""A translated partition restarted after its source truncated while no mirror ran: found on start, not skipped.

The source (reference cluster, 3 brokers) has offsets 0..49 and 60..99 (a gap at 50..59, so a stock target copies
the partition in translated mode), then 100..119 that only the leader has; the mirror copies all 110 records
(target 0..109) and ends. A lagging follower is elected uncleanly, so the source loses 100..119, and 30 new records
land at 100..129. On restart the mirror compares the last record the offset map maps (target 109, source 119) with
the source's, finds the truncation at 100 and reports it: ``stop`` stops the partition; ``closest`` copies the new
history after the target's end (110..139), the offset map saying so. Before, a translated partition resumed at
source 120 from its map: the new records at 100..119 were never copied and nothing was reported.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.mirror import PartitionMap, Run
from kafka_kip.mirror.translate import OffsetTranslator
from kafka_kip_reference import ReferenceCluster
from tests.mirror.helpers import (
    commit_groups,
    committed_offsets,
    first_record_of_group,
    incident_fields,
    mirror_once,
    write_at,
)

TP = TopicPartition('orders', 0)
FETCH = ApiKey.Fetch
FIRST = [(o, b'first-%d' % o) for o in (*range(50), *range(60, 100))]
LOST = [(o, b'lost-%d' % o) for o in range(100, 120)]
NEW = [(o, b'new-%d' % o) for o in range(100, 130)]
COPIED = [*FIRST, *LOST]  # the source records on the target after the first run, at target offsets 0..109
FIRST_RUNS = [Run(0, 0, 50), Run(60, 50, 60)]
STOP_MESSAGE = ('orders-0: the source truncated its log at offset 100 (found by comparing the target with the source '
                'on resume): records 100..119 that were read are gone from the source; the target keeps its copies at '
                'target offsets 90..109; partition stopped')
CLOSEST_MESSAGE = ('orders-0: the source truncated its log at offset 100 (found by comparing the target with the '
                   'source on resume): records 100..119 that were read are gone from the source; the target keeps its '
                   'copies at target offsets 90..109; continuing from the truncation point: its records follow at '
                   'target offset 110')


def write_values(cluster: ReferenceCluster, records: list[tuple[int, bytes]], batch: int = 10) -> None:
    """``records`` at their offsets, in batches of up to ``batch`` consecutive offsets."""
    chunk: list[tuple[int, bytes]] = []
    for offset, value in records:
        if chunk and (len(chunk) == batch or chunk[-1][0] + 1 != offset):
            write_at(cluster, TP, chunk[0][0], [v for _, v in chunk])
            chunk = []
        chunk.append((offset, value))
    if chunk:
        write_at(cluster, TP, chunk[0][0], [v for _, v in chunk])


def target_log(cluster: ReferenceCluster) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in cluster.records(TP)]


def on_target(records: list[tuple[int, bytes]], at: int = 0) -> list[tuple[int, bytes]]:
    """Source ``records`` as a translated copy holds them: one after the other from target offset ``at``."""
    return [(at + i, value) for i, (_, value) in enumerate(records)]


def offset_map(target: ReferenceCluster) -> tuple[str, list[Run]]:
    with OffsetTranslator(target.bootstrap_servers) as translator:
        return translator.maps[TP].mode, translator.maps[TP].runs


def translated(target: ReferenceCluster, offsets: tuple[int, ...]) -> list[int]:
    with OffsetTranslator(target.bootstrap_servers) as translator:
        return [translator.translate(TP, o)[1] for o in offsets]


@pytest.fixture
def clusters() -> Iterator[tuple[ReferenceCluster, ReferenceCluster]]:
    """A 3-broker source with ``orders`` (``FIRST`` written), a stock target (no KIP-391)."""
    with ReferenceCluster(brokers=3) as source, ReferenceCluster(brokers=1, features=()) as target:
        source.create_topic('orders', partitions=1, replication_factor=3)
        write_values(source, FIRST)
        yield source, target
        assert source.internal_errors == [] and target.internal_errors == []


def copied_then_truncated(source: ReferenceCluster, target: ReferenceCluster) -> int:
    """``LOST`` written on the leader alone and copied in translated mode; then the unclean election, ``NEW``
    written, group ``app`` committed at source offset 110 (the new history's). Returns a follower that does not
    have ``NEW`` (its replication paused)."""
    lagging = next(b for b in source.replicas(TP) if b != source.leader(TP))
    source.pause_replication(TP, lagging)
    write_values(source, LOST)
    first = mirror_once(source, target, 'orders')
    assert (first.partitions[0].mode, first.records, first.incidents) == ('translated', 110, [])
    assert (target_log(target), offset_map(target)) == (on_target(COPIED), ('translated', FIRST_RUNS))
    source.elect_leader(TP, lagging, unclean=True)  # the other replicas truncate to its log at once
    behind = next(b for b in source.replicas(TP) if b != lagging)
    source.pause_replication(TP, behind)
    write_values(source, NEW)
    assert [(r.offset, r.value) for r in source.records(TP)] == [*FIRST, *NEW]
    commit_groups(source.bootstrap_servers, {'app': {TP: 110}})
    assert [(r.offset, r.value) for r in source.records(TP, behind)] == FIRST
    return behind


def test_stop_reports_a_truncation_found_on_restart_and_stops_the_partition(clusters) -> None:
    source, target = clusters
    copied_then_truncated(source, target)
    summary = mirror_once(source, target, 'orders', groups='app')
    [incident] = summary.incidents
    assert incident_fields(incident) == ('truncation', True, (100, 120), (90, 110), 100, None)
    assert incident.message == STOP_MESSAGE
    [partition] = summary.partitions
    assert (partition.mode, partition.state, partition.copied_to, partition.target_end, partition.records) == \
        ('translated', 'stopped', 100, 110, 0)
    assert (summary.exit_code, summary.groups.committed) == (2, {})
    # nothing written: the target and its map as the first run left them, no group offset synced
    assert (target_log(target), offset_map(target)) == (on_target(COPIED), ('translated', FIRST_RUNS))
    assert committed_offsets(target.bootstrap_servers, ['app'], TP) == {'app': None}


def test_closest_copies_the_new_history_found_on_restart_after_the_target_s_end(clusters) -> None:
    source, target = clusters
    copied_then_truncated(source, target)
    summary = mirror_once(source, target, 'orders', groups='app', on_truncation='closest')
    [incident] = summary.incidents
    assert incident_fields(incident) == ('truncation', False, (100, 120), (90, 110), 100, 110)
    assert incident.message == CLOSEST_MESSAGE
    [partition] = summary.partitions
    assert (partition.mode, partition.state, partition.copied_to, partition.target_end, partition.records) == \
        ('translated', 'done', 130, 140, 30)
    assert summary.exit_code == 0
    # the lost records stay at 90..109; the new history follows at 110..139, the map extended to say so
    assert target_log(target) == [*on_target(COPIED), *on_target(NEW, 110)]
    assert offset_map(target) == ('translated', [Run(0, 0, 50), Run(60, 50, 40), Run(100, 110, 30)])
    assert translated(target, (49, 50, 99, 100, 110, 129, 130)) == [49, 50, 89, 110, 120, 139, 140]
    # group app committed source offset 110 of the new history: on the target it reads that record next
    assert {tp: c.offset for tp, c in summary.groups.committed['app'].items()} == {TP: 120}
    assert first_record_of_group(target.bootstrap_servers, 'app', TP) == (120, b'new-110')
    # a later run goes on from the new history: nothing found again, nothing copied twice
    write_values(source, [(130, b'new-130')])
    later = mirror_once(source, target, 'orders', on_truncation='closest')
    assert (later.partitions[0].mode, later.records, later.incidents) == ('translated', 1, [])
    assert target_log(target) == [*on_target(COPIED), *on_target(NEW, 110), (140, b'new-130')]


def test_a_second_truncation_is_found_past_the_copies_of_records_lost_in_the_first(clusters) -> None:
    """After ``closest`` the target keeps copies of the first lost records (90..109) that the map does not name;
    the source then loses the whole new history: the check passes over them to the record both still share."""
    source, target = clusters
    behind = copied_then_truncated(source, target)
    first = mirror_once(source, target, 'orders', on_truncation='closest')
    assert (incident_fields(first.incidents[0]), first.records) == \
        (('truncation', False, (100, 120), (90, 110), 100, 110), 30)
    source.elect_leader(TP, behind, unclean=True)  # the source loses 100..129, the new history copied
    newer = [(o, b'newer-%d' % o) for o in range(100, 105)]
    write_values(source, newer)
    assert [(r.offset, r.value) for r in source.records(TP)] == [*FIRST, *newer]
    summary = mirror_once(source, target, 'orders', on_truncation='closest')
    [incident] = summary.incidents
    assert incident_fields(incident) == ('truncation', False, (100, 130), (110, 140), 100, 140)
    assert incident.message == (
        'orders-0: the source truncated its log at offset 100 (found by comparing the target with the source on '
        'resume): records 100..129 that were read are gone from the source; the target keeps its copies at target '
        'offsets 110..139; continuing from the truncation point: its records follow at target offset 140')
    assert (summary.records, summary.partitions[0].copied_to, summary.exit_code) == (5, 105, 0)
    assert target_log(target) == [*on_target(COPIED), *on_target(NEW, 110), *on_target(newer, 140)]
    assert offset_map(target) == ('translated', [Run(0, 0, 50), Run(60, 50, 40), Run(100, 140, 5)])


def test_a_clean_restart_of_a_translated_partition_copies_on_without_an_incident(clusters) -> None:
    source, target = clusters
    first = mirror_once(source, target, 'orders')
    assert (first.partitions[0].mode, first.records, first.incidents) == ('translated', 90, [])
    more = [(o, b'more-%d' % o) for o in range(100, 120)]
    write_values(source, more)
    commit_groups(source.bootstrap_servers, {'app': {TP: 105}})
    summary = mirror_once(source, target, 'orders', groups='app')
    assert (summary.records, summary.incidents, summary.exit_code) == (20, [], 0)
    [partition] = summary.partitions
    assert (partition.mode, partition.state, partition.copied_to, partition.target_end) == \
        ('translated', 'done', 120, 110)
    assert target_log(target) == on_target([*FIRST, *more])  # every record once, in order
    assert offset_map(target) == ('translated', [Run(0, 0, 50), Run(60, 50, 60)])
    assert first_record_of_group(target.bootstrap_servers, 'app', TP) == (95, b'more-105')


def test_the_offset_map_names_the_source_offset_of_each_copy_it_maps() -> None:
    """What the check compares: after ``closest``, the copies of lost records (target 90..109) are no source's."""
    after_closest = PartitionMap(TP, None, 'translated', [Run(0, 0, 50), Run(60, 50, 40), Run(100, 110, 30)])
    source_of = after_closest.source_offsets()
    assert [source_of(t) for t in (0, 49, 50, 89, 90, 109, 110, 139, 140)] == \
        [0, 49, 60, 99, None, None, 100, 129, None]
    assert after_closest.copied() == range(0, 140)
    # a new map (an empty origin) or one whose new history is still to come
    assert not PartitionMap(TP, None, 'translated', [Run(30, 0, 0)]).copied()
    assert PartitionMap(TP, None, 'translated', [Run(0, 0, 100), Run(100, 120, 0)]).copied() == range(0, 100)


def test_the_resume_check_asks_each_cluster_once_for_all_partitions() -> None:
    """Four translated partitions restarted with nothing new: the check is one Fetch to each cluster (none on the
    first run: a new offset map maps nothing)."""
    topic = 'many'
    with ReferenceCluster(brokers=1) as source, ReferenceCluster(brokers=1, features=()) as target:
        source.create_topic(topic, partitions=4, replication_factor=1)
        for partition in range(4):  # 0..4 and 8..12
            write_at(source, TopicPartition(topic, partition), 0, [b'a-%d' % i for i in range(5)])
            write_at(source, TopicPartition(topic, partition), 8, [b'b-%d' % i for i in range(5)])
        fetched: dict[str, list[list[tuple[int, int]]]] = {'source': [], 'target': []}
        for name, cluster in (('source', source), ('target', target)):
            def seen(request, name=name) -> None:
                fetched[name].extend(sorted((p.partition, p.fetch_offset) for p in t.partitions)
                                     for t in request.request.topics if t.topic == topic)
            cluster.control(FETCH, seen, keep=True)
        first = mirror_once(source, target, topic, offset_mode='translated')
        assert (first.offset_mode, first.records, first.incidents) == ('translated', 40, [])
        assert fetched['target'] == [[(p, 0) for p in range(4)]]  # the end, nothing else
        fetched['source'].clear()
        fetched['target'].clear()
        again = mirror_once(source, target, topic)
        assert (again.records, again.incidents, again.exit_code) == (0, [], 0)
        # the ends (a Fetch from the end, as before the check), then the last record copied on both sides
        assert fetched == {'source': [[(p, 13) for p in range(4)], [(p, 12) for p in range(4)]],
                           'target': [[(p, 10) for p in range(4)], [(p, 9) for p in range(4)]]}
