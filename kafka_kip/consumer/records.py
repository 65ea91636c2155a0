"""A fetched partition's records, decoded by the compiled codec into kafka-python's ``ConsumerRecord``.

:class:`DecodedPartitionRecords` is kafka-python's ``Fetcher.PartitionRecords`` with one method replaced:
the generator behind ``take()``. It walks the batches as kafka-python's does (CRC check, leader epoch,
aborted transactions, control batches, the next fetch offset after the last batch) and decodes each batch's
records in one compiled call (:func:`kafka_kip._codec._compiled.decode_records`); handing a record out
then costs no Python code at all unless deserializers are configured.

From the first batch it does not take as it is - a batch of another magic, a failed CRC check, records the
decoder finds malformed - kafka-python's own generator takes over for the rest of the fetch, so corrupt
input yields the same records and raises the same errors as unmodified kafka-python.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import kafka.consumer.fetcher as _stock
from kafka.protocol.consumer import IsolationLevel
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from kafka.structs import TopicPartition

from kafka_kip import _codec
from kafka_kip._patch import record_bytes

log = logging.getLogger(__name__)

_record_bytes = record_bytes.install()
_StockPartitionRecords = _stock.Fetcher.PartitionRecords


class _Resumed:
    """The batches of ``records`` from ``first`` on: where kafka-python's generator takes over."""

    def __init__(self, first: Any, records: MemoryRecords) -> None:
        self._first = first
        self._records = records

    def next_batch(self) -> Any:
        first, self._first = self._first, None
        return first if first is not None else self._records.next_batch()


def _progress_field(name: str) -> property:
    """An attribute kafka-python's PartitionRecords reads and writes, kept in the compiled Progress."""
    return property(lambda self: getattr(self._progress, name),
                    lambda self, value: setattr(self._progress, name, value))


class DecodedPartitionRecords(_StockPartitionRecords):
    """kafka-python's ``PartitionRecords`` whose records are decoded by the compiled codec."""

    next_fetch_offset = _progress_field('next_fetch_offset')
    records_read = _progress_field('records_read')
    bytes_read = _progress_field('bytes_read')

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._codec = _codec.compiled
        self._progress = self._codec.Progress()
        super().__init__(*args, **kwargs)

    def _unpack_records(self, tp: TopicPartition, records: MemoryRecords, key_deserializer: Any,
                        value_deserializer: Any) -> Iterator[Any]:
        try:
            batch = records.next_batch()
            last_batch = None
            while batch is not None:
                if batch.magic != 2 or (self.check_crcs and not batch.validate_crc()):
                    break
                last_batch = batch
                self.leader_epoch = batch.leader_epoch
                if self._skips(batch):
                    self.next_fetch_offset = batch.next_offset
                    batch = records.next_batch()
                    continue
                decoded = self._decode(batch, tp, key_deserializer, value_deserializer)
                if decoded is None:
                    break
                yield from decoded
                batch = records.next_batch()
            else:
                if last_batch is not None:
                    # as kafka-python: v2 keeps the last offset of a batch whose last records were compacted away
                    self.next_fetch_offset = last_batch.next_offset
                self.drain()
                return
        except self._codec.DeserializerStopIteration as stop:
            # kafka-python's generator turns a StopIteration into this error (and logs it to its logger)
            _stock.log.exception('StopIteration raised unpacking messageset', exc_info=stop.__cause__)
            raise RuntimeError('StopIteration raised unpacking messageset')
        yield from super()._unpack_records(tp, _Resumed(batch, records), key_deserializer, value_deserializer)

    def _skips(self, batch: DefaultRecordBatch) -> bool:
        """Whether ``batch`` is skipped: a control batch, or (read_committed) one of an aborted transaction."""
        if self.isolation_level == IsolationLevel.READ_COMMITTED and batch.has_producer_id():
            self._consume_aborted_transactions_up_to(batch.last_offset)
            if self._contains_abort_marker(batch):
                self.aborted_producer_ids.discard(batch.producer_id)
            elif self._is_batch_aborted(batch):
                log.debug('Skipping aborted record batch from partition %s with producer_id %s and offsets %s to %s',
                          self.topic_partition, batch.producer_id, batch.base_offset, batch.last_offset)
                return True
        return batch.is_control_batch

    def _decode(self, batch: DefaultRecordBatch, tp: TopicPartition, key_deserializer: Any,
                value_deserializer: Any) -> Any:
        buffer, start = record_bytes_of(batch)
        return self._codec.decode_records(
            buffer, start, batch.records_count, batch.base_offset, batch.first_timestamp, batch.max_timestamp,
            batch.timestamp_type == DefaultRecordBatch.LOG_APPEND_TIME, self.leader_epoch, tp.topic, tp.partition,
            _stock.ConsumerRecord, self._progress, self._deserialize, key_deserializer, value_deserializer)


def record_bytes_of(batch: DefaultRecordBatch) -> tuple[bytearray, int]:
    """``(buffer, start)``: the (uncompressed) records of ``batch`` are ``buffer[start:]``; ``batch`` stays unread.

    A compressed batch is decompressed by kafka-python (same codecs, same errors) in a copy, so that ``batch``
    can still be handed to kafka-python's own decoding should a compiled decoder not take the records.
    """
    if batch.compression_type == DefaultRecordBatch.CODEC_NONE:
        return _record_bytes(batch)
    copy = DefaultRecordBatch(_record_bytes(batch)[0])
    iter(copy)
    return _record_bytes(copy)


def partition_records_class() -> type:
    """The PartitionRecords class for a new Fetcher: the compiled decoder's if it is built, else kafka-python's."""
    return _StockPartitionRecords if _codec.compiled is None else DecodedPartitionRecords


__all__ = ['DecodedPartitionRecords', 'partition_records_class', 'record_bytes_of']
