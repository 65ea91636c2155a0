"""The mirror on a stock target (Tansu, no KIP-391): checked offsets, gaps reported, no silent fallback."""
from __future__ import annotations

from collections.abc import Iterator

import kafka
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

from kafka_kip.errors import UnsupportedFeatureError
from kafka_kip.mirror import Mirror
from kafka_kip.testing import ReferenceCluster
from kafka_kip.testing.wire import WireClient, produce_request

tansu = pytest.importorskip('integration.tansu')


@pytest.fixture(scope='module')
def stock_target() -> Iterator[str]:
    try:
        tansu.tansu_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    with tansu.TansuBroker() as broker:
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
