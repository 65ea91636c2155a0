"""KIP-391 client pieces without a broker: batching by offset, drains, splits, verification, config."""
from __future__ import annotations

import math
import time

import pytest
from kafka.errors import KafkaConfigurationError, LeaderNotAvailableError
from kafka.producer.future import RecordMetadata as StockRecordMetadata
from kafka.producer.producer_batch import ProducerBatch
from kafka.record.memory_records import MemoryRecords

from kafka_kip import KafkaProducer, TopicPartition, _codec
from kafka_kip.errors import InvalidProduceOffsetError, UnsupportedFeatureError
from kafka_kip.policies import CHECKED
from kafka_kip.producer import OFFSET_MODES, RecordMetadata
from kafka_kip.producer.accumulator import OffsetRecordAccumulator
from kafka_kip.producer.admission import Admit, OffsetAdmission
from kafka_kip.producer.batch import OffsetProducerBatch
from kafka_kip.producer.records import CompiledProducerBatch
from kafka_kip_reference.fixtures.conditions import Listener
from tests.support.record_batches import batch_kind

pytestmark = pytest.mark.kip391

TP = TopicPartition('t', 0)
OTHER = TopicPartition('t', 1)


class OneNodeCluster:
    """Just what the accumulator's drain asks of the cluster metadata: every partition is led by node 0."""

    def __init__(self, *partitions: TopicPartition) -> None:
        self._partitions = set(partitions)

    def partitions_for_broker(self, node_id: int) -> set[TopicPartition]:
        return set(self._partitions)


class FixedAdmission:
    def __init__(self, verdict) -> None:
        self.verdict = verdict
        self.asked: list[tuple[int, int]] = []

    def admit(self, batch: OffsetProducerBatch, node_id: int):
        self.asked.append((batch.base_offset, node_id))
        if self.verdict is Admit.SEND:
            batch.use_offset = True
        return self.verdict


def _accumulator(**configs) -> OffsetRecordAccumulator:
    return OffsetRecordAccumulator(**configs)


def _queued(accumulator: OffsetRecordAccumulator, tp: TopicPartition = TP) -> list[tuple]:
    return [(batch_kind(b), getattr(b, 'base_offset', None), b.record_count) for b in accumulator._batches[tp]]


def _append(accumulator: OffsetRecordAccumulator, offset: int, tp: TopicPartition = TP, value: bytes = b'v'):
    return accumulator.append_with_offset(tp, offset, None, None, value, [])


def test_only_consecutive_offsets_share_a_batch():
    accumulator = _accumulator()
    flags = [_append(accumulator, offset)[1:] for offset in (0, 1, 2, 5, 6, 6, 3)]
    assert _queued(accumulator) == [('OffsetProducerBatch', 0, 3), ('OffsetProducerBatch', 5, 2),
                                    ('OffsetProducerBatch', 6, 1), ('OffsetProducerBatch', 3, 1)]
    # (batch_is_full, new_batch_created): a queue of more than one batch is ready to send
    assert flags == [(False, True), (False, False), (False, False), (True, True), (True, False),
                     (True, True), (True, True)]


def test_plain_and_offset_records_never_share_a_batch():
    accumulator = _accumulator()
    _append(accumulator, 0)
    accumulator.append(TP, None, None, b'plain', [])
    _append(accumulator, 1)
    accumulator.append(TP, None, None, b'plain', [])
    accumulator.append(TP, None, None, b'plain', [])
    assert _queued(accumulator) == [('OffsetProducerBatch', 0, 1), ('ProducerBatch', None, 1),
                                    ('OffsetProducerBatch', 1, 1), ('ProducerBatch', None, 2)]


def test_a_full_batch_continues_at_the_next_offset():
    accumulator = _accumulator(batch_size=500)
    for offset in range(10):
        _append(accumulator, offset, value=b'x' * 100)
    assert _queued(accumulator) == [('OffsetProducerBatch', 0, 4), ('OffsetProducerBatch', 4, 4),
                                    ('OffsetProducerBatch', 8, 2)]


def test_stamped_batch_carries_the_offsets():
    accumulator = _accumulator()
    for offset in (40, 41, 42):
        _append(accumulator, offset)
    batch = accumulator._batches[TP][0]
    batch.records.close()
    batch.stamp_base_offset()
    stored = next(iter(MemoryRecords(bytes(batch.records.buffer()))))
    assert stored.validate_crc()
    assert [record.offset for record in stored] == [40, 41, 42]


def test_drain_takes_one_kind_oldest_first_and_asks_admission():
    accumulator = _accumulator()
    cluster = OneNodeCluster(TP, OTHER)
    _append(accumulator, 7)
    accumulator.append(OTHER, None, None, b'plain', [])
    accumulator._batches[OTHER][0].created = accumulator._batches[TP][0].created + 1   # the offset batch is older
    accumulator.admission = FixedAdmission(Admit.SEND)

    first = accumulator.drain(cluster, {0}, 1_000_000)[0]
    second = accumulator.drain(cluster, {0}, 1_000_000)[0]

    assert [(type(b).__name__, b.topic_partition, b.use_offset) for b in first] == [
        ('OffsetProducerBatch', TP, True)]
    assert [(batch_kind(b), b.topic_partition) for b in second] == [('ProducerBatch', OTHER)]
    assert accumulator.admission.asked == [(7, 0)]
    assert accumulator.muted == set()


def test_drain_picks_its_kind_among_heads_not_backing_off():
    accumulator = _accumulator()
    _append(accumulator, 7)
    accumulator._batches[TP][0].retry()  # the older head waits retry_backoff_ms before its next attempt
    accumulator.append(OTHER, None, None, b'plain', [])
    accumulator.admission = FixedAdmission(Admit.SEND)

    drained = accumulator.drain(OneNodeCluster(TP, OTHER), {0}, 1_000_000)[0]
    assert [(batch_kind(b), b.topic_partition) for b in drained] == [('ProducerBatch', OTHER)]
    assert accumulator.admission.asked == []


def test_drain_without_offset_records_is_kafka_pythons():
    accumulator = _accumulator()
    accumulator.append(TP, None, None, b'plain', [])
    drained = accumulator.drain(OneNodeCluster(TP), {0}, 1_000_000)[0]
    assert [type(b) for b in drained] == [ProducerBatch if _codec.compiled is None else CompiledProducerBatch]


class AppendingWhileDraining:
    """A cluster whose partition listing runs ``append`` (once) right after it was read to the end.

    Both the accumulator's choice of heads and kafka-python's drain start by listing the node's partitions,
    so the append lands where an application thread can: after the drain looked at the queues.
    """

    def __init__(self, append, *partitions: TopicPartition) -> None:
        self._append = append
        self._partitions = partitions

    def partitions_for_broker(self, node_id: int):
        yield from self._partitions
        append, self._append = self._append, None
        if append is not None:
            append()


def _drained(accumulator: OffsetRecordAccumulator, cluster) -> list[tuple]:
    return [(batch_kind(b), b.topic_partition, getattr(b, 'use_offset', None))
            for b in accumulator.drain(cluster, {0}, 1_000_000)[0]]


def test_a_plain_batch_appended_while_offset_batches_drain_waits_for_the_next_drain():
    accumulator = _accumulator()
    accumulator.admission = FixedAdmission(Admit.SEND)
    _append(accumulator, 7)
    cluster = AppendingWhileDraining(lambda: accumulator.append(OTHER, None, None, b'plain', []), TP, OTHER)

    assert _drained(accumulator, cluster) == [('OffsetProducerBatch', TP, True)]
    assert _queued(accumulator, OTHER) == [('ProducerBatch', None, 1)]
    assert _drained(accumulator, cluster) == [('ProducerBatch', OTHER, None)]
    assert accumulator.admission.asked == [(7, 0)]


def test_an_offset_batch_appended_while_plain_batches_drain_waits_for_admission():
    accumulator = _accumulator()
    accumulator.admission = FixedAdmission(Admit.SEND)
    _append(accumulator, 3, tp=TP)
    accumulator._batches[TP].clear()   # the producer has sent offset records before; none is queued now
    accumulator.append(OTHER, None, None, b'plain', [])
    cluster = AppendingWhileDraining(lambda: _append(accumulator, 7), TP, OTHER)

    assert _drained(accumulator, cluster) == [('ProducerBatch', OTHER, None)]
    assert (_queued(accumulator), accumulator.admission.asked) == ([('OffsetProducerBatch', 7, 1)], [])
    assert _drained(accumulator, cluster) == [('OffsetProducerBatch', TP, True)]
    assert accumulator.admission.asked == [(7, 0)]


def test_the_first_offset_batch_appended_while_a_plain_drain_runs_waits_for_admission():
    accumulator = _accumulator()
    accumulator.admission = FixedAdmission(Admit.SEND)
    accumulator.append(OTHER, None, None, b'plain', [])
    cluster = AppendingWhileDraining(lambda: _append(accumulator, 7), TP, OTHER)

    # kafka-python's drain (this producer had no offset record yet) reaches the new batch first and stops
    assert _drained(accumulator, cluster) == []
    assert _drained(accumulator, cluster) == [('ProducerBatch', OTHER, None)]      # the older head
    assert accumulator.admission.asked == []
    assert _drained(accumulator, cluster) == [('OffsetProducerBatch', TP, True)]
    assert accumulator.admission.asked == [(7, 0)]


def test_refused_head_fails_unsent_and_leaves_nothing_behind():
    accumulator = _accumulator()
    futures = [_append(accumulator, offset)[0] for offset in (0, 1)]
    accumulator.admission = FixedAdmission(UnsupportedFeatureError('kip.391', 3))

    assert accumulator.drain(OneNodeCluster(TP), {0}, 1_000_000) == {0: []}
    errors = [future.exception for future in futures]
    assert [type(e) for e in errors] == [UnsupportedFeatureError] * 2
    assert (errors[0].feature, errors[0].node_id) == ('kip.391', 3)
    assert _queued(accumulator) == []
    assert not accumulator.has_incomplete


def test_head_straddling_the_log_end_keeps_the_records_above_it():
    accumulator = _accumulator()
    futures = [_append(accumulator, offset)[0] for offset in range(3, 8)]
    refusal = InvalidProduceOffsetError(5, 'below the log end')
    accumulator.admission = FixedAdmission(refusal)

    assert accumulator.drain(OneNodeCluster(TP), {0}, 1_000_000) == {0: []}
    assert [future.exception for future in futures[:2]] == [refusal, refusal]
    assert [future.is_done for future in futures[2:]] == [False] * 3
    assert _queued(accumulator) == [('OffsetProducerBatch', 5, 3)]
    _append(accumulator, 8)  # the batch keeps growing from its new end
    assert _queued(accumulator) == [('OffsetProducerBatch', 5, 4)]

    batch = accumulator._batches[TP][0]
    batch.records.close()
    batch.complete(5, -1)
    assert [future.value.offset for future in futures[2:]] == [5, 6, 7]
    assert [future.exception for future in futures[:2]] == [refusal, refusal]


class RecordingTransactionManager:
    def __init__(self) -> None:
        self.resets = 0

    def is_transactional(self) -> bool:
        return False

    def reset_producer_id(self) -> None:
        self.resets += 1


def test_refusing_a_batch_sent_before_starts_a_new_producer_id():
    manager = RecordingTransactionManager()
    accumulator = _accumulator(transaction_manager=manager)
    future = _append(accumulator, 0)[0]
    accumulator._batches[TP][0].retry(now=time.monotonic() - 1)  # sent before, unanswered, backoff over
    accumulator.admission = FixedAdmission(InvalidProduceOffsetError(3, 'below the log end'))

    accumulator.drain(OneNodeCluster(TP), {0}, 1_000_000)
    assert (type(future.exception), manager.resets) == (InvalidProduceOffsetError, 1)


def test_batch_written_elsewhere_fails_with_both_ranges():
    batch = OffsetProducerBatch(TP, _accumulator()._new_records(), 10)
    future = batch.try_append_at(10, None, None, b'v', [], now=time.monotonic())
    batch.records.close()
    batch.complete(11, -1)
    assert type(future.exception) is InvalidProduceOffsetError
    assert future.exception.log_end_offset == 12
    assert 'requested at offsets 10-10' in str(future.exception) and 'at 11-11' in str(future.exception)


def test_record_metadata_keeps_kafka_pythons_tuple_and_adds_log_end_offset():
    batch = OffsetProducerBatch(TP, _accumulator()._new_records(), 3)
    future = batch.try_append_at(3, 1234, b'k', b'v', [('h', b'x')], now=time.monotonic())
    batch.records.close()
    batch.produce_future.log_end_offset = 4
    batch.complete(3, -1)
    metadata = future.value
    assert isinstance(metadata, StockRecordMetadata) and isinstance(metadata, RecordMetadata)
    assert tuple(metadata) == ('t', 0, TP, 3, 1234, None, 1, 1, 2)
    assert metadata.log_end_offset == 4
    assert repr(metadata).endswith('serialized_header_size=2, log_end_offset=4)')


def test_offset_mode_is_checked_before_connecting():
    with Listener() as broker:
        with pytest.raises(ValueError, match="offset_mode must be one of 'broker', 'checked', got 'loose'"):
            KafkaProducer(bootstrap_servers=broker.address, offset_mode='loose')
        with pytest.raises(KafkaConfigurationError, match="offset_mode='checked' needs acks=1 or acks='all'"):
            KafkaProducer(bootstrap_servers=broker.address, offset_mode='checked', acks=0)
        assert broker.connections() == 0
    assert OFFSET_MODES == ('broker', 'checked')


class _RefreshCounter:
    """The client admission asks for a metadata refresh after a failed lookup."""

    def __init__(self) -> None:
        self.refreshes = 0
        self.cluster = self

    def request_update(self) -> None:
        self.refreshes += 1


def test_the_sender_sleeps_no_longer_than_a_failed_lookups_retry():
    accumulator = _accumulator(delivery_timeout_ms=120_000)
    _append(accumulator, 0)
    client = _RefreshCounter()
    accumulator.admission = OffsetAdmission(client, CHECKED, accumulator.muted, retry_backoff_ms=300)
    assert accumulator.next_expiry_time_ms == math.inf  # no batch drained yet: kafka-python's sender sleeps on

    before_ms = time.monotonic() * 1000
    accumulator.admission._lookup_failed(TP, LeaderNotAvailableError())

    assert client.refreshes == 1
    assert accumulator.next_expiry_time_ms == accumulator.admission.next_retry_ms
    assert before_ms + 300 <= accumulator.next_expiry_time_ms <= time.monotonic() * 1000 + 300
