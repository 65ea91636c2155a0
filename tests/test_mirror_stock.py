"""The mirror on stock targets (no KIP-391): checked offsets kept or refused unsent, translated offsets mapped.

Every test runs on each stock target: the reference cluster without its extensions (``features=()``),
Tansu, and Apache Kafka where its launcher is available. Where the targets differ (Tansu 0.6's memory
storage cannot delete records), ``StockTarget.deletes_records`` says which outcome is exact for it.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import kafka
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition
from mirror_helpers import commit_groups, first_record_of_group

from kafka_kip.errors import UnsupportedFeatureError
from kafka_kip.mirror import Mirror, Run
from kafka_kip.mirror.translate import OffsetTranslator
from kafka_kip.testing import ReferenceCluster
from kafka_kip.testing.conditions import wait_until
from kafka_kip.testing.wire_client import WireClient, produce_request


@dataclass(frozen=True)
class StockTarget:
    name: str
    bootstrap_servers: str
    deletes_records: bool  # DeleteRecords works (Tansu 0.6's memory storage drops the connection)


#: A one-broker Apache Kafka whose log cleaner runs often (the compacted-source tests wait for it).
APACHE_KAFKA_CONFIG = {'log.cleaner.backoff.ms': 100, 'log.cleaner.min.compaction.lag.ms': 0}


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
    else:  # the session's shared cluster (kafka_kip.testing.pytest_plugin), left running
        cluster = request.getfixturevalue('apache_kafka_factory')('mirror', 1, APACHE_KAFKA_CONFIG)
        yield StockTarget(name, cluster.bootstrap_servers, True)


@pytest.fixture(scope='module', params=['reference', 'tansu', 'apache-kafka'])
def stock(request: pytest.FixtureRequest) -> Iterator[StockTarget]:
    with _stock_cluster(request.param, request) as target:
        yield target


@pytest.fixture
def stock_target(stock: StockTarget) -> str:
    return stock.bootstrap_servers


def write(cluster: ReferenceCluster, tp: TopicPartition, count: int, gap: int = 0) -> None:
    base = cluster.log_end_offset(tp) + gap
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**30)
    for i in range(count):
        builder.append(i, 1_700_000_000_000 + i, b'k', f'{tp.topic}-{tp.partition}-{base + i}'.encode(), [])
    data = builder.build()
    data[0:8] = base.to_bytes(8, 'big')
    with WireClient(cluster.brokers()[cluster.leader(tp)]) as wire:
        answer = wire.request(produce_request(tp.topic, tp.partition, bytes(data), use_offset=True))
    assert answer.responses[0].partition_responses[0].error_code == 0


def target_records(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset='earliest',
                                   enable_auto_commit=False, consumer_timeout_ms=1500)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        for record in consumer:
            out[record.partition].append((record.offset, record.value))
    finally:
        consumer.close()
    return out


def test_auto_mode_checks_offsets_on_a_stock_target(stock_target: str) -> None:
    with ReferenceCluster(brokers=1) as source:
        source.create_topic('plain', partitions=2, replication_factor=1)
        for p in range(2):
            write(source, TopicPartition('plain', p), 40 + 10 * p)
        with Mirror(source.bootstrap_servers, stock_target, 'plain') as mirror:
            summary = mirror.run(stop_at_end=True)
        assert (summary.offset_mode, summary.records, summary.incidents, summary.exit_code) == ('checked', 90, [], 0)
        copied = target_records(stock_target, 'plain', 2)
        for p in range(2):
            assert copied[p] == [(r.offset, r.value) for r in source.records(TopicPartition('plain', p))]


def test_checked_mode_refuses_a_batch_after_a_source_gap_unsent(stock_target: str) -> None:
    tp = TopicPartition('gapped', 0)
    with ReferenceCluster(brokers=1) as source:
        source.create_topic('gapped', partitions=1, replication_factor=1)
        write(source, tp, 30)
        write(source, tp, 10, gap=5)  # offsets 30..34 do not exist
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


def test_auto_mode_goes_on_in_translated_mode_after_a_source_gap(stock_target: str) -> None:
    tp = TopicPartition('gapped-auto', 0)
    with ReferenceCluster(brokers=1) as source:
        source.create_topic('gapped-auto', partitions=1, replication_factor=1)
        write(source, tp, 30)
        write(source, tp, 10, gap=5)  # offsets 30..34 do not exist
        with Mirror(source.bootstrap_servers, stock_target, 'gapped-auto') as mirror:
            summary = mirror.run(stop_at_end=True)
        assert (summary.incidents, summary.exit_code, summary.offset_mode, summary.partitions[0].copied_to) == \
            ([], 0, 'translated', 45)
        assert target_records(stock_target, 'gapped-auto', 1)[0] == \
            [(i, r.value) for i, r in enumerate(source.records(tp))]
        with OffsetTranslator(stock_target) as translator:
            assert translator.maps[tp].runs == [Run(0, 0, 30), Run(35, 30, 10)]
            assert [translator.translate(tp, o)[1] for o in (29, 30, 34, 35, 44, 45)] == [29, 30, 30, 30, 39, 40]


def test_broker_mode_refuses_a_target_without_produce_with_offsets(stock_target: str) -> None:
    with ReferenceCluster(brokers=1) as source:
        mirror = Mirror(source.bootstrap_servers, stock_target, 'x', offset_mode='broker')
        try:
            with pytest.raises(UnsupportedFeatureError) as raised:
                mirror.start()
        finally:
            mirror.close()
    assert raised.value.feature == 'kip.391'


def test_a_second_run_onto_a_stock_target_resumes_where_the_first_ended(stock_target: str) -> None:
    tp = TopicPartition('again', 0)
    with ReferenceCluster(brokers=1) as source:
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


def test_source_partitions_a_stock_target_cannot_hold_are_reported_not_copied(target_that_cannot_grow: str) -> None:
    stock_target = target_that_cannot_grow
    with ReferenceCluster(brokers=1) as source:
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


def test_checked_mode_aligns_an_empty_target_partition_with_a_source_starting_at_50(stock: StockTarget) -> None:
    stock_target = stock.bootstrap_servers
    with ReferenceCluster(brokers=1) as source:
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


def test_checked_mode_refuses_unsent_when_alignment_would_cost_too_much(stock_target: str) -> None:
    with ReferenceCluster(brokers=1) as source:
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


def test_auto_mode_translates_a_source_starting_at_50_and_syncs_the_group_exactly(stock_target: str) -> None:
    with ReferenceCluster(brokers=1) as source:
        tp = source_starting_at_50(source, 'start50-auto')
        commit_groups(source.bootstrap_servers, {'app-start50': {tp: 80}})
        with Mirror(source.bootstrap_servers, stock_target, tp.topic, groups='app-start50',
                    copier_configs={'max_alignment_records': 0}) as mirror:
            summary = mirror.run(stop_at_end=True)
        assert (summary.exit_code, summary.incidents, summary.offset_mode) == (0, [], 'translated')
        assert {t: c.offset for t, c in summary.groups.committed['app-start50'].items()} == {tp: 30}
        assert target_records(stock_target, tp.topic, 1)[0] == [(i, r.value) for i, r in enumerate(source.records(tp))]
        assert first_record_of_group(stock_target, 'app-start50', tp) == (30, source_value(source, tp, 80))


def test_translated_mode_with_group_sync_on_a_source_starting_at_50(stock_target: str) -> None:
    """Was: IndexError in group sync, reading the target at offset 79 (the source's numbering)."""
    with ReferenceCluster(brokers=1) as source:
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
