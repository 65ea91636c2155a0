"""Batches of records written at given offsets (KIP-391), and what their records' futures resolve to.

An :class:`OffsetProducerBatch` is a kafka-python ``ProducerBatch`` whose records carry consecutive offsets
starting at ``base_offset``: the record at batch index ``i`` goes to offset ``base_offset + i``. On the
wire it is an ordinary v2 record batch whose header ``baseOffset`` is ``base_offset`` (kafka-python's
builder writes 0 there; the field sits outside the batch CRC, so stamping it needs no re-encoding).

With the compiled codec a batch is built as plain records' batches are (:mod:`kafka_kip.producer.records`):
records encoded by the compiled builder, their futures (:class:`CompiledOffsetRecordFuture`) built in
kafka-python's slots and completed by the batch's :class:`CompiledOffsetProduceResult` in one compiled loop.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kafka.producer.future import FutureProduceResult, FutureRecordMetadata
from kafka.producer.future import RecordMetadata as _StockRecordMetadata
from kafka.producer.producer_batch import ProducerBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.structs import TopicPartition

from kafka_kip import _codec
from kafka_kip.errors import InvalidProduceOffsetError
from kafka_kip.producer.records import BatchProduceResult, RecordFuture

_BASE_OFFSET = struct.Struct('>q')  # the first field of a v2 record batch header


class RecordMetadata(_StockRecordMetadata):
    """kafka-python's ``RecordMetadata`` plus ``log_end_offset`` (KIP-391).

    ``log_end_offset`` is the partition's log end offset the broker reported right after writing the
    record's batch, or -1 when the broker did not report one (a stock broker, ``acks=0``). It is an
    attribute, not a tuple field: the tuple keeps kafka-python's nine fields, so unpacking code still works.
    """

    log_end_offset: int = -1

    def __repr__(self) -> str:
        return f'{super().__repr__()[:-1]}, log_end_offset={self.log_end_offset!r})'


class OffsetProduceResult(FutureProduceResult):
    """The batch-level future of an :class:`OffsetProducerBatch`; also carries the reported log end offset."""

    __slots__ = ('log_end_offset',)

    def __init__(self, topic_partition: TopicPartition) -> None:
        super().__init__(topic_partition)
        self.log_end_offset = -1


class OffsetRecordFuture(FutureRecordMetadata):
    """The future ``send()`` returns for a record with an offset; resolves to :class:`RecordMetadata`."""

    __slots__ = ()

    def _produce_success(self, result: tuple) -> None:
        # Builds the RecordMetadata (with log_end_offset) in one step rather than wrapping kafka-python's: this
        # runs once per record on the sender thread, and wrapping doubled its cost (measured 1.0 -> 2.0 us).
        if self.is_done:
            # The record was refused at a split (OffsetProducerBatch.drop_below) and failed on its own; the
            # later completion of the batch it was cut from is not its outcome.
            return
        base_offset, log_append_time, record_errors = result
        index, timestamp, checksum, key_size, value_size, headers_size = self.args
        if record_errors is not None:
            self.failure(record_errors(index))
            return
        produced = self._produce_future
        tp = produced.topic_partition
        metadata = tuple.__new__(RecordMetadata, (  # RecordMetadata(...) minus the namedtuple's Python frame
            tp.topic, tp.partition, tp, -1 if base_offset == -1 else base_offset + index,
            timestamp if log_append_time in (None, -1) else log_append_time,
            checksum, key_size, value_size, headers_size))
        metadata.log_end_offset = produced.log_end_offset
        self.success(metadata)


class CompiledOffsetRecordFuture(OffsetRecordFuture, RecordFuture):
    """An :class:`OffsetRecordFuture` built by the compiled codec and completed by its batch's
    :class:`CompiledOffsetProduceResult` (see :class:`~kafka_kip.producer.records.RecordFuture`); one rebound to
    another batch by a split is completed by the callback :class:`OffsetRecordFuture` registers."""

    __slots__ = ()


class CompiledOffsetProduceResult(BatchProduceResult):
    """The batch-level future of an :class:`OffsetProducerBatch` built by the compiled codec: completes its
    :class:`CompiledOffsetRecordFuture` s in one compiled loop, with ``log_end_offset`` on their metadata."""

    __slots__ = ('log_end_offset',)

    def __init__(self, topic_partition: TopicPartition, record_futures: list[RecordFuture]) -> None:
        super().__init__(topic_partition, record_futures)
        self.log_end_offset = -1

    def success(self, value: tuple) -> CompiledOffsetProduceResult:
        _codec.compiled.complete_records(self, self._take_record_futures(), value, RecordMetadata,
                                         self.log_end_offset)
        return FutureProduceResult.success(self, value)


def _serialized_size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _headers_size(headers: list[tuple[str, bytes | None]]) -> int:
    if not headers:
        return -1
    return sum(len(key.encode('utf-8')) + (0 if value is None else len(value)) for key, value in headers)


class OffsetProducerBatch(ProducerBatch):
    """Records with consecutive offsets for one partition; never holds records without an offset.

    ``use_offset`` is decided when the batch is drained: True when it goes to a leader that advertises
    KIP-391 (the ProduceRequest then carries ``use_offset``), False when checked mode sends it to a
    stock broker as an ordinary produce.
    """

    def __init__(self, tp: TopicPartition, records: MemoryRecordsBuilder, base_offset: int,
                 now: float | None = None) -> None:
        super().__init__(tp, records, now=now)
        self._compiled = _codec.compiled is not None and isinstance(records, _codec.compiled.RecordBatchBuilder)
        self.produce_future = (CompiledOffsetProduceResult(tp, self._record_futures) if self._compiled
                               else OffsetProduceResult(tp))
        self.base_offset = base_offset
        self.use_offset = False

    @property
    def next_offset(self) -> int:
        """The offset right after the batch's last record."""
        return self.base_offset + self.records.next_offset()

    def try_append(self, timestamp_ms: int | None, key: bytes | None, value: bytes | None,
                   headers: list[tuple[str, bytes]], now: float | None = None) -> None:
        """Records without an offset never join this batch (offset and plain records are sent apart)."""
        return None

    def try_append_at(self, offset: int, timestamp_ms: int | None, key: bytes | None, value: bytes | None,
                      headers: list[tuple[str, bytes | None]], now: float) -> OffsetRecordFuture | None:
        """Append the record if ``offset`` continues the batch and it fits; its future, or None."""
        if offset != self.next_offset:
            return None
        if self._compiled:
            return _codec.compiled.append_record(self, self.records, timestamp_ms, key, value, headers, now,
                                                 CompiledOffsetRecordFuture)
        appended = self.records.append(timestamp_ms, key, value, headers)
        if appended is None:
            return None
        self.max_record_size = max(self.max_record_size, appended.size)
        self.last_append = now
        future = OffsetRecordFuture(self.produce_future, appended.offset, appended.timestamp, appended.crc,
                                    _serialized_size(key), _serialized_size(value), _headers_size(headers))
        self._record_futures.append(future)
        return future

    def stamp_base_offset(self) -> None:
        """Write ``base_offset`` into the closed batch's header (where the broker reads the offsets)."""
        _BASE_OFFSET.pack_into(self.records.buffer(), 0, self.base_offset)

    def complete(self, base_offset: int, log_append_time: int) -> bool:
        """Complete as acknowledged at ``base_offset``; fails the records if that is not where they belong."""
        if 0 <= base_offset != self.base_offset:
            error = _misplaced(self, base_offset)
            return self.complete_exceptionally(error, lambda _: error)
        return super().complete(base_offset, log_append_time)

    def drop_below(self, log_end_offset: int, exception: BaseException,
                   records: MemoryRecordsBuilder) -> int:
        """Fail the records below ``log_end_offset`` with ``exception``; keep the rest as a fresh batch.

        For a batch the broker refused because its first offset is below the log end while later records
        are not: those were never judged, and sending them on (from ``log_end_offset``, in the same
        place in the partition's queue) is what keeps the log free of a gap. ``records`` is an empty
        builder that receives them. The batch becomes unsent again, so it gets a new producer sequence when
        drained. Returns the number of records failed.
        """
        dropped = log_end_offset - self.base_offset
        kept = self._stored_records()[dropped:]
        futures = self._record_futures
        for future in futures[:dropped]:
            future.failure(exception)
        for index, (record, future) in enumerate(zip(kept, futures[dropped:], strict=True)):
            records.append(record.timestamp, record.key, record.value, record.headers)
            future.args = (index,) + future.args[1:]  # the record's index in the batch, as rebind() sets it
        self._record_futures = futures[dropped:]
        if self._compiled:
            self.produce_future.record_futures = self._record_futures
        self._start_again_at(log_end_offset, records)
        return dropped

    def _start_again_at(self, offset: int, records: MemoryRecordsBuilder) -> None:
        """The batch is ``records`` from ``offset`` on, unsent (it gets a new producer sequence when drained)."""
        self.records = records
        self.base_offset = offset
        self.use_offset = False
        self.drained = None
        self._retry = False  # ProducerBatch's "already has a producer sequence" flag

    def split_in_two(self, new_records: Callable[[], MemoryRecordsBuilder], now: float) -> list[OffsetProducerBatch]:
        """The first and the second half of the records as two batches, each keeping its offsets; every
        record's future moves to its new batch. For a batch the broker found too large."""
        records = self._stored_records()
        middle = (len(records) + 1) // 2
        halves = []
        for start, part in ((0, records[:middle]), (middle, records[middle:])):
            half = OffsetProducerBatch(self.topic_partition, new_records(), self.base_offset + start, now=now)
            half.created = self.created
            for index, record in enumerate(part):
                half.records.append(record.timestamp, record.key, record.value, record.headers)
                future = self._record_futures[start + index]
                future.rebind(half.produce_future, index)
                half._record_futures.append(future)
            halves.append(half)
        return halves

    def _stored_records(self) -> list[Any]:
        self.records.close()
        return [record for stored in MemoryRecords(bytes(self.records.buffer())) for record in stored]


def _misplaced(batch: OffsetProducerBatch, base_offset: int) -> InvalidProduceOffsetError:
    count = batch.record_count
    how = ('the broker wrote them' if batch.use_offset else
           'the stock broker appended them at its log end, because another writer had appended to the '
           'partition; checked mode needs a single writer per partition')
    return InvalidProduceOffsetError(
        base_offset + count,
        f'records for {batch.topic_partition} were requested at offsets {batch.base_offset}-'
        f'{batch.base_offset + count - 1} but {how} at {base_offset}-{base_offset + count - 1}')


__all__ = ['CompiledOffsetProduceResult', 'CompiledOffsetRecordFuture', 'OffsetProduceResult', 'OffsetProducerBatch',
           'OffsetRecordFuture', 'RecordMetadata']
