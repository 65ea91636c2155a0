"""The mirror on stock targets (no KIP-391): checked offsets kept or refused unsent, translated offsets mapped.

Every test runs on each stock target: the reference cluster without its extensions (``features=()``),
Tansu, and Apache Kafka where its launcher is available. Where the targets differ (Tansu 0.6's memory
storage cannot delete records), ``StockTarget.deletes_records`` says which outcome is exact for it.
"""
from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import kafka
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

from kafka_kip.errors import UnsupportedFeatureError
from kafka_kip.mirror import Mirror, Run
from kafka_kip.mirror.translate import OffsetTranslator
from kafka_kip.protocol.requests import produce_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.mirror.helpers import commit_groups, committed_offsets, first_record_of_group, mirror_cli
from tests.support.apache_kafka_clusters import shared_apache_kafka
from tests.support.consuming import read_to_end


@dataclass(frozen=True)
class StockTarget:
    name: str
    bootstrap_servers: str
    deletes_records: bool  # DeleteRecords works (Tansu 0.6's memory storage drops the connection)


#: A one-broker Apache Kafka whose log cleaner runs often (the compacted-source tests wait for it).
@contextmanager
def _stock_cluster(name: str, request: pytest.FixtureRequest | None = None) -> Iterator[StockTarget]:
    if name == 'reference':
        with ReferenceCluster(brokers=1, features=()) as cluster:
            yield StockTarget(name, cluster.bootstrap_servers, True)
    elif name == 'tansu':
        from integration import tansu
        try:
            tansu.tansu_binary()
        except FileNotFoundError as exc:
            pytest.skip(str(exc))
        with tansu.TansuBroker() as broker:
            yield StockTarget(name, broker.bootstrap_servers, False)
    else:  # the session's shared cluster (kafka_kip_reference.fixtures.pytest_plugin), left running
        cluster = shared_apache_kafka(request, 'mirror')
        yield StockTarget(name, cluster.bootstrap_servers, True)


@pytest.fixture(scope='module', params=['reference', 'tansu', 'apache-kafka'])
def stock(request: pytest.FixtureRequest) -> Iterator[StockTarget]:
    with _stock_cluster(request.param, request) as target:
        yield target


@pytest.fixture
def stock_target(stock: StockTarget) -> str:
    return stock.bootstrap_servers


def write(cluster: ReferenceCluster, tp: TopicPartition, count: int, gap: int = 0) -> None:
    # timestamps of now: Apache Kafka's retention (7 days) deletes the copies of older records on the target
    base = cluster.log_end_offset(tp) + gap
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**30)
    now = int(time.time() * 1000)
    for i in range(count):
        builder.append(i, now, b'k', f'{tp.topic}-{tp.partition}-{base + i}'.encode(), [])
    data = builder.build()
    data[0:8] = base.to_bytes(8, 'big')
    with WireClient(cluster.brokers()[cluster.leader(tp)]) as wire:
        answer = wire.request(produce_request(tp.topic, tp.partition, bytes(data), use_offset=True))
    assert answer.responses[0].partition_responses[0].error_code == 0


def source_with_a_gap(factory, topic: str) -> tuple[ReferenceCluster, TopicPartition]:
    """A 1-broker source whose ``topic``-0 holds offsets 0..29 and 35..44: offsets 30..34 do not exist."""
    tp = TopicPartition(topic, 0)
    source = factory(brokers=1)
    source.create_topic(topic, partitions=1, replication_factor=1)
    write(source, tp, 30)
    write(source, tp, 10, gap=5)
    return source, tp


def target_records(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset='earliest',
                                   enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        for record in read_to_end(consumer, tps):
            out[record.partition].append((record.offset, record.value))
    finally:
        consumer.close()
    return out


def test_auto_mode_checks_offsets_on_a_stock_target(reference_cluster_factory, stock_target: str) -> None:
    source = reference_cluster_factory(brokers=1)
    source.create_topic('plain', partitions=2, replication_factor=1)
    for p in range(2):
        write(source, TopicPartition('plain', p), 40 + 10 * p)
    with Mirror(source.bootstrap_servers, stock_target, 'plain') as mirror:
        summary = mirror.run(stop_at_end=True)
    assert (summary.offset_mode, summary.records, summary.incidents, summary.exit_code) == ('checked', 90, [], 0)
    copied = target_records(stock_target, 'plain', 2)
    for p in range(2):
        assert copied[p] == [(r.offset, r.value) for r in source.records(TopicPartition('plain', p))]


def test_checked_mode_refuses_a_batch_after_a_source_gap_unsent(reference_cluster_factory, stock_target: str) -> None:
    source, tp = source_with_a_gap(reference_cluster_factory, 'gapped')
    with Mirror(source.bootstrap_servers, stock_target, 'gapped', offset_mode='checked') as mirror:
        summary = mirror.run(stop_at_end=True)
    [incident] = summary.incidents
    assert (incident.kind, incident.stopped, incident.lost) == ('offset-gap', True, None)
    assert incident.message == (
        'gapped-0: the next source record is at offset 35 but the target partition gapped-0 ends at offset 30, '
        'and a target without produce-with-offsets (KIP-391) appends at its end: its log is not empty (offsets '
        "0..29), so it cannot be aligned. Nothing was written at a wrong offset. Use offset mode 'translated' (or "
        "'auto'), or a target that supports KIP-391")
    assert (summary.partitions[0].state, summary.partitions[0].copied_to, summary.exit_code) == ('stopped', 30, 2)
    assert target_records(stock_target, 'gapped', 1)[0] == [(r.offset, r.value) for r in source.records(tp)][:30]


def test_auto_mode_goes_on_in_translated_mode_after_a_source_gap(reference_cluster_factory, stock_target: str) -> None:
    source, tp = source_with_a_gap(reference_cluster_factory, 'gapped-auto')
    with Mirror(source.bootstrap_servers, stock_target, 'gapped-auto') as mirror:
        summary = mirror.run(stop_at_end=True)
    assert (summary.incidents, summary.exit_code, summary.offset_mode, summary.partitions[0].copied_to) == \
        ([], 0, 'translated', 45)
    assert target_records(stock_target, 'gapped-auto', 1)[0] == \
        [(i, r.value) for i, r in enumerate(source.records(tp))]
    with OffsetTranslator(stock_target) as translator:
        assert translator.maps[tp].runs == [Run(0, 0, 30), Run(35, 30, 10)]
        assert [translator.translate(tp, o)[1] for o in (29, 30, 34, 35, 44, 45)] == [29, 30, 30, 30, 39, 40]


def test_broker_mode_refuses_a_target_without_produce_with_offsets(reference_cluster_factory, stock_target: str) -> None:
    source = reference_cluster_factory(brokers=1)
    mirror = Mirror(source.bootstrap_servers, stock_target, 'x', offset_mode='broker')
    try:
        with pytest.raises(UnsupportedFeatureError) as raised:
            mirror.start()
    finally:
        mirror.close()
    assert raised.value.feature == 'kip.391'


def test_a_second_run_onto_a_stock_target_resumes_where_the_first_ended(reference_cluster_factory, stock_target: str) -> None:
    tp = TopicPartition('again', 0)
    source = reference_cluster_factory(brokers=1)
    source.create_topic('again', partitions=1, replication_factor=1)
    write(source, tp, 30)
    with Mirror(source.bootstrap_servers, stock_target, 'again') as mirror:
        first = mirror.run(stop_at_end=True)
    write(source, tp, 20)
    with Mirror(source.bootstrap_servers, stock_target, 'again') as mirror:
        second = mirror.run(stop_at_end=True)
    assert (first.exit_code, first.records, first.incidents) == (0, 30, [])
    assert (second.exit_code, second.records, second.incidents) == (0, 20, [])
    assert target_records(stock_target, 'again', 1)[0] == [(r.offset, r.value) for r in source.records(tp)]


@pytest.fixture(params=['reference', 'tansu'])
def target_that_cannot_grow(request: pytest.FixtureRequest) -> Iterator[str]:
    """A stock target without CreatePartitions: Tansu 0.6, or the reference cluster told not to offer it."""
    if request.param == 'tansu':
        with _stock_cluster('tansu') as target:
            yield target.bootstrap_servers
    else:
        with ReferenceCluster(brokers=1, features=(), api_versions={37: None}) as cluster:
            yield cluster.bootstrap_servers


def test_source_partitions_a_stock_target_cannot_hold_are_reported_not_copied(reference_cluster_factory, target_that_cannot_grow: str) -> None:
    stock_target = target_that_cannot_grow
    source = reference_cluster_factory(brokers=1)
    source.create_topic('growing', partitions=2, replication_factor=1)
    for p in range(2):
        write(source, TopicPartition('growing', p), 10)
    incidents: list = []
    mirror = Mirror(source.bootstrap_servers, stock_target, 'growing', topic_refresh_interval_ms=50,
                    on_incident=incidents.append)
    runner = threading.Thread(target=lambda: setattr(mirror, 'result', mirror.run()))
    runner.start()
    try:
        wait_until(lambda: [p.copied_to for p in mirror.summary().partitions] == [10, 10], 'both partitions copied to 10')
        source.create_partitions('growing', 4)
        for p in range(4):
            write(source, TopicPartition('growing', p), 5)
        wait_until(lambda: len(incidents) == 2 and [p.copied_to for p in mirror.summary().partitions][:2] == [15, 15],
                   'two incidents and both partitions copied to 15')
    finally:
        mirror.stop()
        runner.join(30)
        mirror.close()
    summary = mirror.result
    assert [(p.source.partition, p.state, p.copied_to) for p in summary.partitions] == \
        [(0, 'copying', 15), (1, 'copying', 15), (2, 'stopped', -1), (3, 'stopped', -1)]
    assert [(i.kind, i.source.partition, i.stopped) for i in summary.incidents] == \
        [('not-copied', 2, True), (('not-copied', 3, True))]
    assert summary.incidents[0].message.startswith(
        'growing-2: the target topic growing has 2 partitions and could not be grown to 4 (')
    assert summary.exit_code == 2
    copied = target_records(stock_target, 'growing', 2)
    for p in range(2):
        assert copied[p] == [(r.offset, r.value) for r in source.records(TopicPartition('growing', p))]


def source_starting_at_50(source: ReferenceCluster, topic: str) -> TopicPartition:
    """A source partition whose log starts at 50: 100 records written, the first 50 deleted."""
    tp = TopicPartition(topic, 0)
    source.create_topic(topic, partitions=1, replication_factor=1)
    write(source, tp, 100)
    admin = kafka.KafkaAdminClient(bootstrap_servers=source.bootstrap_servers)
    try:
        admin.delete_records({tp: 50})
    finally:
        admin.close()
    assert source.log_start_offset(tp) == 50
    return tp


def test_checked_mode_aligns_an_empty_target_partition_with_a_source_starting_at_50(reference_cluster_factory, stock: StockTarget) -> None:
    stock_target = stock.bootstrap_servers
    source = reference_cluster_factory(brokers=1)
    tp = source_starting_at_50(source, 'start50-aligned')
    with Mirror(source.bootstrap_servers, stock_target, tp.topic, offset_mode='checked') as mirror:
        summary = mirror.run(stop_at_end=True)
    if not stock.deletes_records:
        [incident] = summary.incidents
        assert (incident.kind, summary.exit_code, summary.records) == ('offset-gap', 2, 0)
        assert 'the empty partition cannot be aligned: DeleteRecords failed on the target' in incident.message
        assert target_records(stock_target, tp.topic, 1)[0] == []  # the placeholders were never written
        return
    assert (summary.exit_code, summary.incidents, summary.records, summary.offset_mode) == (0, [], 50, 'checked')
    assert (summary.partitions[0].copied_to, summary.partitions[0].target_end) == (100, 100)
    # the placeholders below 50 are deleted: the target's log starts where the source's does
    assert target_records(stock_target, tp.topic, 1)[0] == [(r.offset, r.value) for r in source.records(tp)]
    assert target_log_start(stock_target, tp) == 50


def test_checked_mode_refuses_unsent_when_alignment_would_cost_too_much(reference_cluster_factory, stock_target: str) -> None:
    source = reference_cluster_factory(brokers=1)
    tp = source_starting_at_50(source, 'start50-refused')
    with Mirror(source.bootstrap_servers, stock_target, tp.topic, offset_mode='checked',
                copier_configs={'max_alignment_records': 49}) as mirror:
        summary = mirror.run(stop_at_end=True)
    [incident] = summary.incidents
    assert (incident.kind, incident.stopped, summary.exit_code, summary.records) == ('offset-gap', True, 2, 0)
    assert incident.message.startswith(
        f'{tp.topic}-0: the next source record is at offset 50 but the target partition {tp.topic}-0 ends at '
        'offset 0, and a target without produce-with-offsets (KIP-391) appends at its end: aligning the empty '
        'partition would take 50 placeholder records, more than max_alignment_records=49. Nothing was written')
    assert target_records(stock_target, tp.topic, 1)[0] == []


def test_auto_mode_translates_a_source_starting_at_50_and_syncs_the_group_exactly(reference_cluster_factory, stock_target: str) -> None:
    source = reference_cluster_factory(brokers=1)
    tp = source_starting_at_50(source, 'start50-auto')
    commit_groups(source.bootstrap_servers, {'app-start50': {tp: 80}})
    with Mirror(source.bootstrap_servers, stock_target, tp.topic, groups='app-start50',
                copier_configs={'max_alignment_records': 0}) as mirror:
        summary = mirror.run(stop_at_end=True)
    assert (summary.exit_code, summary.incidents, summary.offset_mode) == (0, [], 'translated')
    assert {t: c.offset for t, c in summary.groups.committed['app-start50'].items()} == {tp: 30}
    assert target_records(stock_target, tp.topic, 1)[0] == [(i, r.value) for i, r in enumerate(source.records(tp))]
    assert first_record_of_group(stock_target, 'app-start50', tp) == (30, source_value(source, tp, 80))


def test_translated_mode_with_group_sync_on_a_source_starting_at_50(reference_cluster_factory, stock_target: str) -> None:
    """Was: IndexError in group sync, reading the target at offset 79 (the source's numbering)."""
    source = reference_cluster_factory(brokers=1)
    tp = source_starting_at_50(source, 'start50-off')
    commit_groups(source.bootstrap_servers, {'app-off': {tp: 80}})
    with Mirror(source.bootstrap_servers, stock_target, tp.topic, offset_mode='off', groups='app-off') as mirror:
        summary = mirror.run(stop_at_end=True)
    assert (summary.exit_code, summary.incidents, summary.groups.failed) == (0, [], {})
    assert {t: c.offset for t, c in summary.groups.committed['app-off'].items()} == {tp: 30}
    assert first_record_of_group(stock_target, 'app-off', tp) == (30, source_value(source, tp, 80))


def source_value(cluster: ReferenceCluster, tp: TopicPartition, offset: int) -> bytes:
    return next(r.value for r in cluster.records(tp) if r.offset == offset)


def target_log_start(bootstrap: str, tp: TopicPartition) -> int:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return consumer.beginning_offsets([tp])[tp]
    finally:
        consumer.close()


# -- sources with transactions and compaction, on the stock cluster itself (mirrored to dr.<topic>) -----------


def read_all(bootstrap: str, tp: TopicPartition, isolation: str = 'read_uncommitted') -> list[tuple[int, bytes, bytes]]:
    """What a consumer of ``tp`` reads from the start: ``(offset, key, value)``."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    out: list[tuple[int, bytes, bytes]] = []
    try:
        wait_until(lambda: out.extend((r.offset, r.key, r.value) for records in consumer.poll(timeout_ms=100).values()
                                      for r in records) or consumer.position(tp) >= end, f'{tp} read to {end}')
    finally:
        consumer.close(autocommit=False)
    return out


def transactional_source(bootstrap: str, topic: str) -> TopicPartition:
    """Plain records, a committed transaction, an aborted one (its records written), another committed, more plain.

    Kafka's log: 0..4 plain, 5..7 committed, 8 marker, 9..11 aborted, 12 marker, 13..14 committed, 15 marker,
    16..19 plain.
    """
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    plain = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        plain.send(topic, key=b'p%d' % i, value=b'plain-%d' % i, partition=0)
    plain.flush()
    txn = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f'{topic}-txn')
    txn.init_transactions()
    for outcome, count in (('committed', 3), ('aborted', 3), ('committed-again', 2)):
        txn.begin_transaction()
        for i in range(count):
            txn.send(topic, key=b't%d' % i, value=b'%s-%d' % (outcome.encode(), i), partition=0)
        txn.flush()
        if outcome == 'aborted':
            txn.abort_transaction()
        else:
            txn.commit_transaction()
    txn.close()
    for i in range(5, 9):
        plain.send(topic, key=b'p%d' % i, value=b'plain-%d' % i, partition=0)
    plain.flush()
    plain.close()
    return TopicPartition(topic, 0)


def groups_at(bootstrap: str, prefix: str, tp: TopicPartition, offsets: range) -> dict[str, int]:
    groups = {f'{prefix}-{offset}': offset for offset in offsets}
    commit_groups(bootstrap, {group: {tp: offset} for group, offset in groups.items()})
    return groups


def assert_failover_is_exact(bootstrap: str, source: list[tuple[int, bytes, bytes]], target_tp: TopicPartition,
                             groups: dict[str, int]) -> None:
    """Each group, switched to the target, reads exactly the record after its committed source offset."""
    target = read_all(bootstrap, target_tp)
    assert [(k, v) for _, k, v in target] == [(k, v) for _, k, v in source]
    committed = committed_offsets(bootstrap, groups, target_tp)
    for group, offset in groups.items():
        next_on_source = next(((k, v) for o, k, v in source if o >= offset), None)
        next_on_target = next(((k, v) for o, k, v in target if o >= committed[group]), None)
        assert (group, next_on_target) == (group, next_on_source)


@pytest.mark.parametrize('isolation', ['read_committed', 'read_uncommitted'])
def test_a_transactional_source_is_translated_exactly_and_groups_fail_over_exactly(stock: StockTarget,
                                                                                  isolation: str) -> None:
    bootstrap = stock.bootstrap_servers
    tp = transactional_source(bootstrap, f'txn-{isolation}')
    groups = groups_at(bootstrap, f'txn-{isolation}', tp, range(0, 21))
    with Mirror(bootstrap, bootstrap, tp.topic, target_prefix='dr.', isolation_level=isolation,
                groups=f'txn-{isolation}-.*') as mirror:
        summary = mirror.run(stop_at_end=True)
    assert (summary.exit_code, summary.incidents, summary.offset_mode) == (0, [], 'translated')
    source = read_all(bootstrap, tp, isolation)
    values = [v for _, _, v in source]
    if stock.name in ('apache-kafka', 'reference'):
        assert (b'aborted-0' in values) == (isolation == 'read_uncommitted')
    else:  # Tansu 0.6 gives read-committed fetches no aborted transactions: its consumers read them too
        assert b'aborted-0' in values
    assert_failover_is_exact(bootstrap, source, TopicPartition('dr.' + tp.topic, 0), groups)


def test_checked_mode_never_writes_a_record_at_another_offset_than_the_source_s(stock: StockTarget) -> None:
    bootstrap = stock.bootstrap_servers
    tp = transactional_source(bootstrap, 'txn-checked')
    with Mirror(bootstrap, bootstrap, tp.topic, target_prefix='dr.', offset_mode='checked') as mirror:
        summary = mirror.run(stop_at_end=True)
    [incident] = summary.incidents
    assert (incident.kind, incident.stopped, summary.exit_code) == ('offset-gap', True, 2)
    # read-committed: the aborted records 9..11 are not copied (Tansu 0.6 serves them: the gap is the marker)
    first_after_marker = 9 if stock.name == 'tansu' else 13
    assert incident.message.startswith(f'txn-checked-0: the next source record is at offset {first_after_marker} but '
                                       'the target partition dr.txn-checked-0 ends at offset 8')
    copied = read_all(bootstrap, TopicPartition('dr.txn-checked', 0))
    source = {o: (k, v) for o, k, v in read_all(bootstrap, tp)}
    assert [o for o, _, _ in copied] == list(range(8))
    assert all(source[o] == (k, v) for o, k, v in copied)


def compacted_source(bootstrap: str, topic: str) -> TopicPartition:
    """20 records with their own keys, then keyed records over rolled segments until the log cleaner has
    removed some (gaps inside the log, after offset 19)."""
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, 1, 1, topic_configs={
            'cleanup.policy': 'compact', 'segment.ms': '100', 'min.cleanable.dirty.ratio': '0.01',
            'delete.retention.ms': '0'})])
    finally:
        admin.close()
    tp = TopicPartition(topic, 0)
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(20):  # unique keys: offsets 0..19 survive compaction
        producer.send(topic, key=b'head-%d' % i, value=b'head-%d' % i, partition=0)
    written = 0

    def compacted() -> bool:
        nonlocal written
        for _ in range(10):  # every round appends (segments roll on appends after segment.ms)
            producer.send(topic, key=b'key-%d' % (written % 4), value=b'v-%d' % written, partition=0)
            written += 1
        producer.flush()
        offsets = [o for o, _, _ in read_all(bootstrap, tp)]
        return len(offsets) < offsets[-1] + 1 - offsets[0]

    try:
        wait_until(compacted, f'the log cleaner to compact {topic}', timeout=60)
    finally:
        producer.close()
    return tp


def runs_of(offsets: list[int]) -> list[Run]:
    """The offset map of source ``offsets`` copied from target offset 0: one run per stretch without a gap."""
    runs: list[Run] = []
    for target, offset in enumerate(offsets):
        if runs and runs[-1].source_end == offset:
            runs[-1] = Run(runs[-1].source, runs[-1].target, runs[-1].count + 1)
        else:
            runs.append(Run(offset, target, 1))
    return runs


def skip_without_compaction(stock: StockTarget) -> None:
    if stock.name != 'apache-kafka':
        pytest.skip(f'{stock.name} does not compact logs')


def test_a_compacted_source_is_translated_exactly_and_groups_fail_over_exactly(stock: StockTarget) -> None:
    skip_without_compaction(stock)
    bootstrap = stock.bootstrap_servers
    tp = compacted_source(bootstrap, 'compacted')
    source = read_all(bootstrap, tp)
    end = source[-1][0] + 1
    groups = groups_at(bootstrap, 'compacted', tp, range(0, end + 1, max(1, end // 20)))
    with Mirror(bootstrap, bootstrap, tp.topic, target_prefix='dr.', groups='compacted-.*') as mirror:
        summary = mirror.run(stop_at_end=True)
    assert (summary.exit_code, summary.incidents, summary.offset_mode) == (0, [], 'translated')
    with OffsetTranslator(bootstrap) as translator:
        runs = translator.maps[TopicPartition('dr.compacted', 0)].runs
    assert runs == runs_of([o for o, _, _ in source]) and len(runs) >= 2  # one run per stretch of offsets
    assert_failover_is_exact(bootstrap, read_all(bootstrap, tp), TopicPartition('dr.compacted', 0), groups)


def test_a_compacted_source_restarted_after_the_last_copied_record_was_compacted_away(stock: StockTarget) -> None:
    """The restart compares the last record copied with the source's: a record the log cleaner removed since is
    passed over (compared further back), not taken for a truncation. (The target does not compact.)"""
    skip_without_compaction(stock)
    bootstrap = stock.bootstrap_servers
    tp = compacted_source(bootstrap, 'compacted-resume')
    with Mirror(bootstrap, bootstrap, tp.topic, target_prefix='dr.', sync_topic_configs=False) as mirror:
        first = mirror.run(stop_at_end=True)
    assert (first.exit_code, first.incidents, first.offset_mode) == (0, [], 'translated')
    last = read_all(bootstrap, tp)[-1][0]  # the last record copied
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    written = 0

    def cleaned() -> bool:
        nonlocal written
        for _ in range(10):  # the 4 keys again: every record copied after the first 20 has a newer one
            producer.send(tp.topic, key=b'key-%d' % (written % 4), value=b'again-%d' % written, partition=0)
            written += 1
        producer.flush()
        return last not in {o for o, _, _ in read_all(bootstrap, tp)}

    try:
        wait_until(cleaned, f'the log cleaner to remove offset {last}', timeout=60)
    finally:
        producer.close()
    source = read_all(bootstrap, tp)
    with Mirror(bootstrap, bootstrap, tp.topic, target_prefix='dr.', sync_topic_configs=False) as mirror:
        summary = mirror.run(stop_at_end=True)
    rest = [(k, v) for o, k, v in source if o > last]
    assert (summary.exit_code, summary.incidents, summary.records) == (0, [], len(rest))
    # the target keeps what the first run copied (some of it compacted away on the source since), then the rest
    copied = read_all(bootstrap, TopicPartition('dr.compacted-resume', 0))
    assert len(copied) == first.records + len(rest) and [(k, v) for _, k, v in copied[first.records:]] == rest


def test_checked_mode_stops_at_the_first_compacted_gap_unsent(stock: StockTarget) -> None:
    skip_without_compaction(stock)
    bootstrap = stock.bootstrap_servers
    tp = compacted_source(bootstrap, 'compacted-checked')
    source = read_all(bootstrap, tp)
    with Mirror(bootstrap, bootstrap, tp.topic, target_prefix='dr.', offset_mode='checked') as mirror:
        summary = mirror.run(stop_at_end=True)
    [incident] = summary.incidents
    assert (incident.kind, summary.exit_code) == ('offset-gap', 2)
    first_gap = next(i for i, (o, _, _) in enumerate(source) if o != i)
    assert first_gap >= 20 and incident.message.startswith(
        f'compacted-checked-0: the next source record is at offset {source[first_gap][0]} but the target partition '
        f'dr.compacted-checked-0 ends at offset {first_gap}')
    # every record copied is at its source offset: the records before the first gap, nothing after it
    assert read_all(bootstrap, TopicPartition('dr.compacted-checked', 0)) == source[:first_gap]


def test_translated_mode_killed_mid_stream_restarts_without_a_duplicate_or_a_loss(reference_cluster_factory, stock: StockTarget) -> None:
    """kill -9 while live records are copied (the map written ahead), then a restart: every record once."""
    tp = TopicPartition(f'killed-{stock.name}', 0)
    source = reference_cluster_factory(brokers=1)
    source.create_topic(tp.topic, partitions=1, replication_factor=1)
    for _ in range(10):
        write(source, tp, 20)
    groups = groups_at(source.bootstrap_servers, f'killed-{stock.name}', tp, range(0, 801, 40))
    writing = threading.Event()
    writing.set()

    def keep_writing() -> None:
        while writing.is_set():
            write(source, tp, 20)

    writer = threading.Thread(target=keep_writing)
    first = mirror_cli('--source', source.bootstrap_servers, '--target', stock.bootstrap_servers, '--topics',
                       tp.topic, '--offset-mode', 'translated')
    writer.start()
    try:  # killed while the source grows: the mirror cannot have caught up
        wait_until(lambda: first.poll() is not None or len(read_all(stock.bootstrap_servers, tp)) > 300,
                   'live records copied')
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
        writing.clear()
        writer.join()
    restart = mirror_cli('--source', source.bootstrap_servers, '--target', stock.bootstrap_servers, '--topics',
                         tp.topic, '--offset-mode', 'translated', '--group-sync', f'killed-{stock.name}-.*',
                         '--stop-at-end', '--json')
    out, err = restart.communicate(timeout=120)
    assert restart.returncode == 0, err
    assert json.loads(out)['incidents'] == []
    source_log = [(r.offset, r.key, r.value) for r in source.records(tp)]
    assert len(source_log) > 300
    assert_failover_is_exact(stock.bootstrap_servers, source_log, tp, groups)
