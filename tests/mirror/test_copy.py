"""The mirror's copy core against reference clusters: offsets, resumes, truncation, stale metadata."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import kafka
import pytest
from kafka.net.selector import NetworkSelector
from kafka.protocol.api_key import ApiKey
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

from kafka_kip.mirror import AUTO, BROKER, CLOSEST, TRANSLATED, Copier, Incident, Run, copy_range
from kafka_kip.mirror.batches import iter_batches
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.offset_map import OffsetMapStore
from kafka_kip.mirror.translate import OffsetTranslator
from kafka_kip.protocol.requests import fetch_request, produce_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.control import Delay
from kafka_kip_reference.fixtures.wire_client import WireClient

TP = TopicPartition('t', 0)
PRODUCE = ApiKey.Produce


@pytest.fixture
def clusters() -> Iterator[tuple[ReferenceCluster, ReferenceCluster]]:
    """A 3-broker source with ``t`` (1 partition, replication 3) and a 1-broker target with ``t``."""
    with ReferenceCluster(brokers=3) as source, ReferenceCluster(brokers=1) as target:
        source.create_topic('t', partitions=1, replication_factor=3)
        target.create_topic('t', partitions=1, replication_factor=1)
        yield source, target
        assert source.internal_errors == [] and target.internal_errors == []


def write(cluster: ReferenceCluster, count: int, tag: str, gap: int = 0) -> tuple[int, int]:
    """``count`` records in one batch at the true leader's end + ``gap`` (KIP-391); returns [first, end)."""
    base = cluster.log_end_offset(TP) + gap
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**30)
    for i in range(count):
        builder.append(i, 1_700_000_000_000 + base + i, b'key-%d' % ((base + i) % 7),
                       f'{tag}-{base + i}'.encode(), [('n', b'%d' % i)])
    data = builder.build()
    data[0:8] = base.to_bytes(8, 'big')
    with WireClient(cluster.brokers()[cluster.leader(TP)]) as wire:
        answer = wire.request(produce_request(TP.topic, TP.partition, bytes(data), use_offset=True))
    assert answer.responses[0].partition_responses[0].error_code == 0
    return base, base + count


def contents(cluster: ReferenceCluster) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in cluster.records(TP)]


def batches(cluster: ReferenceCluster) -> list[tuple[int, int, int]]:
    """(base offset, record count, producer id) of every batch in the leader's log."""
    with WireClient(cluster.brokers()[cluster.leader(TP)]) as wire:
        data = wire.request(fetch_request(TP.topic, TP.partition, 0, max_bytes=2**24)).responses[0].partitions[0]
    return [(h.base_offset, h.records_count, h.producer_id) for h, _ in iter_batches(data.records)]


@contextmanager
def copier(source: ReferenceCluster, target: ReferenceCluster, source_configs: dict | None = None,
           **configs: object) -> Iterator[Copier]:
    net = NetworkSelector()
    clients = [ClusterClient('source', source.bootstrap_servers, net, **(source_configs or {})),
               ClusterClient('target', target.bootstrap_servers, net)]
    for client in clients:
        client.bootstrap()
        client.track_topics(['t'])
    try:
        store = None
        if configs.get('offset_mode') in (AUTO, TRANSLATED):
            store = OffsetMapStore(clients[1])
            store.open()
        yield Copier(*clients, offset_map=store, **configs)
    finally:
        for client in clients:
            client.close()
        net.close()


def drive(copier: Copier, condition: Callable[[], object], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f'timed out; progress {copier.progress()}, incidents {copier.incidents}'
        copier.poll(50)


def test_copy_range_writes_every_batch_at_its_source_offset_gaps_included(clusters) -> None:
    source, target = clusters
    write(source, 50, 'a')
    write(source, 30, 'b', gap=10)  # offsets 50..59 never exist
    write(source, 20, 'c')
    result = copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 0, 110)
    assert contents(target) == contents(source)
    assert [b[:2] for b in batches(target)] == [(0, 50), (60, 30), (90, 20)]
    assert len({b[2] for b in batches(target)}) == 1 and batches(target)[0][2] >= 0  # one idempotent session
    assert (result.progress.records, result.progress.copied_to, result.progress.state) == (100, 110, 'done')
    assert result.incidents == []


def test_a_range_ending_mid_batch_is_cut_and_the_next_one_skips_what_is_there(clusters) -> None:
    source, target = clusters
    write(source, 100, 'a')
    first = copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 0, 40)
    assert contents(target) == contents(source)[:40]
    assert first.progress.records == 40
    # starts below the target's end: the probe write gets INVALID_PRODUCE_OFFSET(40), "already there"
    second = copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 20, 100)
    assert contents(target) == contents(source)
    assert (second.progress.records, second.progress.copied_to) == (60, 100)
    assert [b[:2] for b in batches(target)] == [(0, 40), (40, 60)]
    assert second.incidents == []


def pause_a_follower(source: ReferenceCluster) -> int:
    """Stops a follower of TP's leader copying TP; returns its id (what writes come next, it has not)."""
    leader = source.leader(TP)
    lagging = next(b for b in source.replicas(TP) if b != leader)
    source.pause_replication(TP, lagging)
    return lagging


def _unclean_election(source: ReferenceCluster, target: ReferenceCluster, copier: Copier) -> tuple[int, int]:
    """Records the copier copies, then lost by an unclean election; returns the lost range [first, end)."""
    lagging = pause_a_follower(source)
    lost = write(source, 50, 'doomed')
    drive(copier, lambda: len(target.records(TP)) == lost[1])
    source.elect_leader(TP, lagging, unclean=True)
    return lost


def test_truncation_stops_the_partition_and_reports_the_exact_lost_range(clusters) -> None:
    source, target = clusters
    write(source, 100, 'a')
    with copier(source, target) as c:
        c.add(TP)
        drive(c, lambda: len(target.records(TP)) == 100)
        lost = _unclean_election(source, target, c)
        write(source, 30, 'new')
        drive(c, lambda: c.incidents)
        before = contents(target)
        write(source, 30, 'newer')  # the source ends at 160: 60 records from the truncation point on not copied
        drive(c, lambda: c.progress()[0].source_end == 160)  # read again although the partition stopped
        assert lost == (100, 150)
        [incident] = c.incidents
        assert (incident.kind, incident.stopped, incident.lost, incident.divergent, incident.truncated_at) == \
            ('truncation', True, (100, 150), (100, 150), 100)
        progress = c.progress()[0]
        assert (progress.state, progress.copied_to, progress.source_end, progress.lag) == ('stopped', 100, 160, 60)
    assert contents(target) == before
    assert [v for _, _, v in before[100:]] == [b'doomed-%d' % o for o in range(100, 150)]


def test_truncation_with_closest_in_broker_mode_stops_rather_than_leave_out_the_new_records(clusters) -> None:
    source, target = clusters
    write(source, 100, 'a')
    with copier(source, target, on_truncation=CLOSEST) as c:  # offset mode 'broker', no offset map
        c.add(TP)
        drive(c, lambda: len(target.records(TP)) == 100)
        _unclean_election(source, target, c)
        write(source, 80, 'new')  # offsets 100..179 on the new leader
        drive(c, lambda: c.incidents)
        [incident] = c.incidents
        assert (incident.kind, incident.stopped, incident.lost, incident.divergent, incident.truncated_at,
                incident.continued_at) == ('truncation', True, (100, 150), (100, 150), 100, None)
        assert incident.message.endswith(
            'records 100..149 that were read are gone from the source; the target keeps its copies at offsets '
            "100..149, where the source now has other records or none; the source's records from 100 on cannot be "
            "copied at their offsets, which the target holds: offset mode 'broker' keeps the source's offsets "
            "(offset mode 'auto' copies them after the target's end, in translated mode); partition stopped")
        assert c.progress()[0].state == 'stopped'
    assert contents(target)[:100] == contents(source)[:100]
    assert [v for _, _, v in contents(target)[100:]] == [b'doomed-%d' % o for o in range(100, 150)]


@pytest.mark.parametrize('mode', [BROKER, TRANSLATED])
def test_closest_copies_what_was_read_below_the_truncation_point_and_not_yet_written(clusters, mode: str) -> None:
    source, target = clusters
    write(source, 100, 'a')
    release = threading.Event()
    with copier(source, target, on_truncation=CLOSEST, max_in_flight=1, offset_mode=mode) as c:
        c.add(TP)
        drive(c, lambda: len(target.records(TP)) == 100)
        target.control(PRODUCE, lambda request: Delay(until=release) if any(  # the next write of t is held
            data.name == 't' for data in request.request.topic_data) else None)
        write(source, 10, 'b')
        write(source, 10, 'c')  # 110..119: read, queued behind the held write when the source loses 120..149
        lagging = pause_a_follower(source)
        write(source, 30, 'doomed')
        drive(c, lambda: c.progress()[0].position == 150)
        source.elect_leader(TP, lagging, unclean=True)
        drive(c, lambda: c.progress()[0].state == 'recovering')  # a task owns it: the queue is not written
        release.set()
        drive(c, lambda: c.incidents)
        write(source, 20, 'new')  # 120..139 on the new leader
        drive(c, lambda: target.log_end_offset(TP) == 140)
        [incident] = c.incidents
        assert (incident.kind, incident.stopped, incident.lost, incident.divergent, incident.truncated_at,
                incident.continued_at) == ('truncation', False, (120, 150), None, 120, 110)
        assert incident.message.endswith('records 120..149 that were read are gone from the source; continuing '
                                         'from offset 110, the end of what the target has')
        assert c.progress()[0].mode == mode
    if mode == TRANSLATED:
        with OffsetTranslator(target.bootstrap_servers) as translator:
            assert translator.maps[TP].runs == [Run(0, 0, 140)]
    assert contents(target) == contents(source)
    assert [v for _, _, v in contents(target)[100:]] == [b'b-%d' % o for o in range(100, 110)] + \
        [b'c-%d' % o for o in range(110, 120)] + [b'new-%d' % o for o in range(120, 140)]


def test_a_truncation_while_no_mirror_ran_is_found_on_resume(clusters) -> None:
    source, target = clusters
    write(source, 100, 'a')
    lagging = pause_a_follower(source)
    write(source, 50, 'doomed')
    with copier(source, target) as c:
        c.add(TP, end=150)
        drive(c, lambda: c.done)
    source.elect_leader(TP, lagging, unclean=True)
    write(source, 20, 'new')
    with copier(source, target) as c:
        c.add(TP)  # resumes from the target's end (150), which the source no longer has
        drive(c, lambda: c.incidents)
        [incident] = c.incidents
        assert (incident.kind, incident.stopped, incident.lost, incident.divergent, incident.truncated_at) == \
            ('truncation', True, (100, 150), (100, 150), 100)
        assert 'on resume' in incident.message
    assert target.log_end_offset(TP) == 150


def test_a_truncation_between_two_ranges_is_found_when_the_next_range_starts(clusters) -> None:
    source, target = clusters
    write(source, 100, 'a')
    lagging = pause_a_follower(source)
    write(source, 50, 'doomed')
    assert copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 0, 150).incidents == []
    source.elect_leader(TP, lagging, unclean=True)
    write(source, 80, 'new')  # offsets 100..179 of the new leader's log
    result = copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 150, 180)
    [incident] = result.incidents
    assert (incident.kind, incident.stopped, incident.lost, incident.divergent, incident.truncated_at) == \
        ('truncation', True, (100, 150), (100, 150), 100)
    assert (result.progress.state, result.progress.records) == ('stopped', 0)
    assert target.log_end_offset(TP) == 150


def test_resume_learns_the_source_epoch_and_continues(clusters) -> None:
    source, target = clusters
    write(source, 100, 'a')
    source.elect_leader(TP, next(b for b in source.isr(TP) if b != source.leader(TP)))
    write(source, 30, 'b')
    with copier(source, target) as c:
        c.add(TP, end=130)
        drive(c, lambda: c.done)
    write(source, 30, 'c')
    with copier(source, target) as c:
        c.add(TP, end=160)
        drive(c, lambda: c.done)
        assert c.incidents == []
        assert c.progress()[0].records == 30
    assert contents(target) == contents(source)


@contextmanager
def copier_past_a_zombie(source: ReferenceCluster, target: ReferenceCluster) -> Iterator[tuple[Copier, int]]:
    """A copier (metadata at most 300 ms old) that copied t-0's first 100 records; then t-0's leader is delayed (it
    keeps serving epoch-0 metadata and its leadership: a zombie, whose id comes with the copier) and another elected."""
    write(source, 100, 'a')
    with copier(source, target, source_configs={'metadata_max_age_ms': 300}) as c:
        c.add(TP)
        drive(c, lambda: len(target.records(TP)) == 100)
        zombie = source.leader(TP)
        source.delay_metadata(zombie)
        source.elect_leader(TP, next(b for b in source.isr(TP) if b != zombie))
        yield c, zombie


def test_stale_metadata_from_a_zombie_leader_never_rewinds(clusters) -> None:
    source, target = clusters
    with copier_past_a_zombie(source, target) as (c, zombie):
        for _ in range(8):
            write(source, 10, 'b')
            stale = c.source.manager.call_soon(c.source.cluster.refresh_metadata, zombie)
            drive(c, lambda stale=stale: stale.is_done)  # a metadata answer from the zombie
            for _ in range(4):
                c.poll(50)
        source.release_metadata(zombie)
        write(source, 10, 'c')
        drive(c, lambda: target.log_end_offset(TP) == 190)
        for _ in range(10):
            c.poll(50)
        assert c.incidents == []
    assert contents(target) == contents(source)


def test_a_fetch_is_fenced_with_the_newest_leader_epoch_seen(clusters) -> None:
    source, target = clusters
    with copier_past_a_zombie(source, target) as (c, zombie):
        write(source, 20, 'b')
        drive(c, lambda: len(target.records(TP)) == 120)
        # the cache now says what the zombie says (leader = zombie, epoch 0): every read is fenced
        asked: list[int] = []  # current_leader_epoch of each fetch of t-0 that reaches the zombie
        fenced = source.control(ApiKey.Fetch, lambda request: asked.extend(
            p.current_leader_epoch for t in request.request.topics if t.topic == TP.topic
            for p in t.partitions if p.partition == TP.partition), broker_id=zombie, keep=True)
        real_leader = c.source.leader
        c.source.leader = lambda tp: (zombie, 0)
        try:
            # t-0 has one fetch in flight at a time: one at the zombie means the long poll at the real leader ended
            drive(c, lambda: asked)
            write(source, 20, 'c')
            # each fetch goes out once the one before was answered: the one after this is answered past the write
            before = len(asked)
            drive(c, lambda: len(asked) >= before + 2)
            assert set(asked) == {1} and target.log_end_offset(TP) == 120  # fenced with epoch 1, nothing copied
        finally:
            fenced.remove()
            c.source.leader = real_leader
        source.release_metadata(zombie)
        drive(c, lambda: target.log_end_offset(TP) == 140)
        assert c.incidents == []
    assert contents(target) == contents(source)


def test_records_deleted_on_the_source_before_they_were_copied_are_reported(clusters) -> None:
    source, target = clusters
    write(source, 100, 'a')
    copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 0, 60)
    admin = kafka.KafkaAdminClient(bootstrap_servers=source.bootstrap_servers)
    try:
        admin.delete_records({TP: 80})
    finally:
        admin.close()
    with copier(source, target) as c:
        c.add(TP, end=100)
        drive(c, lambda: c.done)
        [incident] = c.incidents
        assert (incident.kind, incident.stopped, incident.lost) == ('retention', False, (60, 80))
    assert contents(target)[60:] == contents(source)  # the source now starts at 80
    assert [o for o, _, _ in contents(target)] == list(range(60)) + list(range(80, 100))


def test_translated_ranges_map_every_run_and_the_next_range_resumes_from_the_map(clusters) -> None:
    source, target = clusters
    write(source, 50, 'a')
    write(source, 50, 'b', gap=10)  # source offsets 0..49 and 60..109
    first = copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 0, 80, offset_mode=TRANSLATED)
    assert (first.progress.records, first.progress.copied_to, first.progress.target_end, first.progress.mode) == \
        (70, 80, 70, 'translated')
    with OffsetTranslator(target.bootstrap_servers) as translator:
        assert translator.maps[TP].runs == [Run(0, 0, 50), Run(60, 50, 20)]
    # a retried range: what the map says is on the target is skipped
    second = copy_range(source.bootstrap_servers, target.bootstrap_servers, TP, 60, 110, offset_mode=TRANSLATED)
    assert (second.progress.records, second.incidents) == (30, [])
    assert [v for _, _, v in contents(target)] == [v for _, _, v in contents(source)]
    assert [o for o, _, _ in contents(target)] == list(range(100))
    with OffsetTranslator(target.bootstrap_servers) as translator:
        assert translator.maps[TP].runs == [Run(0, 0, 50), Run(60, 50, 50)]
        # the first record at or after 55 (a gap on the source) is source 60, target 50
        assert [translator.translate(TP, o)[1] for o in (0, 49, 50, 55, 60, 109, 110, 500)] == \
            [0, 49, 50, 50, 50, 99, 100, 100]


def test_copier_rejects_bad_settings(clusters) -> None:
    source, target = clusters
    with copier(source, target) as c:
        with pytest.raises(ValueError, match='offset_mode must be one of'):
            Copier(c.source, c.target, offset_mode='sometimes')
        with pytest.raises(ValueError, match='on_truncation must be one of'):
            Copier(c.source, c.target, on_truncation='ignore')
        with pytest.raises(ValueError, match='share one NetworkSelector'):
            Copier(c.source, ClusterClient('target', target.bootstrap_servers, NetworkSelector()))
        c.add(TP)
        with pytest.raises(ValueError, match='already being copied'):
            c.add(TP)
        assert c.offset_mode == BROKER


def test_incidents_serialise_with_partition_names() -> None:
    incident = Incident('truncation', TP, TopicPartition('x.t', 0), False, 'm', (1, 5), (1, 3), 1, 3)
    assert incident.to_dict() == {'kind': 'truncation', 'source': 't-0', 'target': 'x.t-0', 'stopped': False,
                                  'message': 'm', 'lost': (1, 5), 'divergent': (1, 3), 'truncated_at': 1,
                                  'continued_at': 3}


def test_target_leader_changes_mid_stream_neither_lose_nor_duplicate(reference_cluster_factory) -> None:
    source = reference_cluster_factory(brokers=1)
    target = reference_cluster_factory(brokers=3)
    source.create_topic('t', partitions=1, replication_factor=1)
    target.create_topic('t', partitions=1, replication_factor=3)
    with copier(source, target, max_partition_fetch_bytes=4096) as c:
        c.add(TP)
        write(source, 40, 'first')
        drive(c, lambda: c.progress()[0].copied_to == 40)
        for round_ in range(6):
            copied = c.progress()[0].copied_to
            for _ in range(5):
                write(source, 40, f'r{round_}')
            drive(c, lambda copied=copied: c.progress()[0].copied_to > copied)
            leader = target.leader(TP)  # moves while the rest of the round is in flight or queued
            target.elect_leader(TP, next(b for b in target.isr(TP) if b != leader))
        drive(c, lambda: c.progress()[0].copied_to == 1240)
        assert (c.progress()[0].records, c.incidents) == (1240, [])
    assert contents(target) == contents(source)
    assert target.leader_epoch(TP) == 6
