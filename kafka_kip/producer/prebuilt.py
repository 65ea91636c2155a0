"""Record batches built before they reach the producer (the Arrow encoder's), queued as the producer's own.

A :class:`PrebuiltRecords` stands where kafka-python's ``ProducerBatch`` holds its records builder: the sender
and the accumulator drain, stamp (producer id, epoch, sequence: idempotence), send, retry and complete it as any
other batch. It takes no more records. :class:`PrebuiltBatch` is a plain batch (with its KIP-253 partition
count), :class:`PrebuiltOffsetBatch` a batch of records written at their offsets (KIP-391). Neither has a future
per record: the writer reads the outcome of the whole batch (:func:`outcome`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.structs import TopicPartition

from kafka_kip.producer.batch import OffsetProducerBatch
from kafka_kip.producer.records import CompiledProducerBatch
from kafka_kip.protocol.record_batch import stamp_producer


class PrebuiltRecords:
    """A closed v2 batch of ``count`` records, with the interface of kafka-python's ``MemoryRecordsBuilder``
    the producer uses."""

    def __init__(self, data: bytearray, count: int) -> None:
        self._buffer = data
        self._count = count
        self.producer_id = self.producer_epoch = self.base_sequence = -1

    def append(self, timestamp: Any, key: Any, value: Any, headers: Any = None) -> None:
        return None  # full: a record sent with send() starts a batch of its own

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int,
                           is_transactional: bool) -> None:
        stamp_producer(self._buffer, producer_id, producer_epoch, base_sequence, is_transactional)
        self.producer_id, self.producer_epoch, self.base_sequence = producer_id, producer_epoch, base_sequence

    def close(self) -> None:
        pass  # closed when built; stamp_producer keeps the CRC right

    def buffer(self) -> bytearray:
        return self._buffer

    def records(self) -> MemoryRecords:
        return MemoryRecords(bytes(self._buffer))

    def size_in_bytes(self) -> int:
        return len(self._buffer)

    def compression_rate(self) -> float:
        return 1.0  # (a sensor's figure; the encoder does not keep the uncompressed size)

    def is_full(self) -> bool:
        return True

    def next_offset(self) -> int:
        return self._count


class PrebuiltBatch(CompiledProducerBatch):
    """A prebuilt plain batch, partitioned for ``partition_count`` partitions (EXPLICIT: partitions given)."""

    def __init__(self, tp: TopicPartition, records: PrebuiltRecords, partition_count: int) -> None:
        super().__init__(tp, records)
        self.partition_count = partition_count


class PrebuiltOffsetBatch(OffsetProducerBatch):
    """A prebuilt batch of records at offsets ``base_offset ..``; ``already_there`` counts those the broker
    refused as below its log end while later ones were sent on (:meth:`drop_below`)."""

    def __init__(self, tp: TopicPartition, records: PrebuiltRecords | MemoryRecordsBuilder, base_offset: int) -> None:
        super().__init__(tp, records, base_offset)
        self.already_there = 0

    def drop_below(self, log_end_offset: int, exception: BaseException, records: MemoryRecordsBuilder) -> int:
        dropped = log_end_offset - self.base_offset
        for record in self._stored_records()[dropped:]:
            records.append(record.timestamp, record.key, record.value, record.headers)
        self.already_there += dropped
        self._start_again_at(log_end_offset, records)
        return dropped

    def split_in_two(self, new_records: Callable[[], MemoryRecordsBuilder], now: float) -> list[OffsetProducerBatch]:
        records = self._stored_records()
        middle = (len(records) + 1) // 2
        halves = []
        for start, part in ((0, records[:middle]), (middle, records[middle:])):
            half = PrebuiltOffsetBatch(self.topic_partition, new_records(), self.base_offset + start)
            half.created = self.created
            for record in part:
                half.records.append(record.timestamp, record.key, record.value, record.headers)
            halves.append(half)
        return halves


def outcome(batch: Any) -> BaseException | None:
    """None if ``batch`` (completed) was written, else the error it failed with."""
    future = batch.produce_future
    if future.exception is not None:
        return future.exception
    record_errors = future.value[2]
    return None if record_errors is None else record_errors(0)


__all__ = ['PrebuiltBatch', 'PrebuiltOffsetBatch', 'PrebuiltRecords', 'outcome']
