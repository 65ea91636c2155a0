"""The mirror on a stock target (no KIP-391): checked offsets, gaps reported, no silent fallback."""
from __future__ import annotations

import threading
from collections.abc import Iterator

import kafka
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

from kafka_kip.errors import UnsupportedFeatureError
from kafka_kip.mirror import Mirror
from kafka_kip.testing import ReferenceCluster
from kafka_kip.testing.conditions import wait_until
from kafka_kip.testing.wire_client import WireClient, produce_request


@pytest.fixture(scope='module')
def stock_target() -> Iterator[str]:
    """A stock broker: a reference cluster that advertises no extension (no kip.391) and ignores their fields."""
    with ReferenceCluster(brokers=1, features=()) as broker:
        yield broker.bootstrap_servers


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


def test_checked_mode_stops_at_a_source_offset_gap_with_a_report(stock_target: str) -> None:
    tp = TopicPartition('gapped', 0)
    with ReferenceCluster(brokers=1) as source:
        source.create_topic('gapped', partitions=1, replication_factor=1)
        write(source, tp, 30)
        write(source, tp, 10, gap=5)  # offsets 30..34 do not exist
        with Mirror(source.bootstrap_servers, stock_target, 'gapped') as mirror:
            summary = mirror.run(stop_at_end=True)
        [incident] = summary.incidents
        assert (incident.kind, incident.stopped, incident.lost) == ('offset-gap', True, (30, 35))
        assert (summary.partitions[0].state, summary.partitions[0].copied_to, summary.exit_code) == ('stopped', 30, 2)
        assert target_records(stock_target, 'gapped', 1)[0] == [(r.offset, r.value) for r in source.records(tp)][:30]


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


def test_source_partitions_a_stock_target_cannot_hold_are_reported_not_copied() -> None:
    # A target that cannot grow a topic: a stock broker without CreatePartitions (as Tansu 0.6.0).
    with ReferenceCluster(brokers=1) as source, \
            ReferenceCluster(brokers=1, features=(), api_versions={37: None}) as target:
        stock_target = target.bootstrap_servers
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


