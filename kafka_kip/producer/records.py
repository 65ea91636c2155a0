"""Producer batches built by the compiled codec, whose record futures are completed in one compiled loop.

With the compiled codec, kafka_kip's accumulator (kafka-python's ``append``, rebuilt by
:mod:`kafka_kip._patch.accumulator_append`) builds its batches from :func:`records_builder` and
:class:`CompiledProducerBatch`:

- records are encoded straight into the batch buffer by :class:`kafka_kip._codec._compiled.RecordBatchBuilder`,
  byte for byte what kafka-python's ``MemoryRecordsBuilder`` writes;
- each ``send()`` gets a :class:`RecordFuture` (a kafka-python ``FutureRecordMetadata``) that is not
  registered as a callback on the batch's future: :class:`BatchProduceResult` completes the batch's record
  futures itself, in order, with the same ``RecordMetadata`` or record error, then completes as kafka-python's.

A record future moved to another batch (``rebind()``, when kafka-python splits a batch the broker found
too large) is completed by that batch, through kafka-python's callback, as before.
"""
from __future__ import annotations

import threading
from typing import Any

from kafka.producer.future import FutureProduceResult, FutureRecordMetadata, RecordMetadata
from kafka.producer.producer_batch import ProducerBatch
from kafka.record.memory_records import MemoryRecordsBuilder
from kafka.structs import TopicPartition

from kafka_kip import _codec
from kafka_kip._patch import record_future
from kafka_kip.producer.partition_counts import SENDING


class RecordFuture(FutureRecordMetadata):
    """kafka-python's ``FutureRecordMetadata``, completed by its batch's :class:`BatchProduceResult`.

    Built by the compiled codec without kafka-python's two empty callback lists (``NO_CALLBACKS`` instead):
    registering a callback makes them first.
    """

    __slots__ = ()

    def add_callback(self, f: Any, *args: Any, **kwargs: Any) -> RecordFuture:
        self._make_callback_lists()
        return super().add_callback(f, *args, **kwargs)

    def add_errback(self, f: Any, *args: Any, **kwargs: Any) -> RecordFuture:
        self._make_callback_lists()
        return super().add_errback(f, *args, **kwargs)

    def _add_cb_eb(self, callback: Any, errback: Any) -> RecordFuture:
        self._make_callback_lists()
        return super()._add_cb_eb(callback, errback)

    def _make_callback_lists(self) -> None:
        with self._lock:
            if self._callbacks is _codec.compiled.NO_CALLBACKS:  # (once completed, they are None)
                self._callbacks, self._errbacks = [], []


class BatchProduceResult(FutureProduceResult):
    """kafka-python's batch-level future that completes the batch's :class:`RecordFuture` s first.

    ``records_lock`` is the lock the batch's record futures share (one per batch instead of one per record).
    """

    __slots__ = ('record_futures', 'records_lock')

    def __init__(self, topic_partition: TopicPartition, record_futures: list[RecordFuture]) -> None:
        super().__init__(topic_partition)
        self.record_futures = record_futures
        self.records_lock = threading.Lock()

    def success(self, value: tuple) -> BatchProduceResult:
        _codec.compiled.complete_records(self, self._take_record_futures(), value, RecordMetadata)
        return super().success(value)

    def failure(self, error: Any) -> BatchProduceResult:
        for future in self._take_record_futures():
            if future._produce_future is self:
                future.failure(error)
        return super().failure(error)

    def _take_record_futures(self) -> list[RecordFuture]:
        # Dropped once completed: they refer to this future, and the cycle would leave them all to the
        # garbage collector (kafka-python's Future drops its callback lists on completion for the same reason).
        futures, self.record_futures = self.record_futures, []
        return futures


class CompiledProducerBatch(ProducerBatch):
    """kafka-python's ``ProducerBatch``; with a compiled builder, ``try_append`` runs compiled.

    It also carries the partition count its records were partitioned with (KIP-253,
    :mod:`kafka_kip.producer.partition_counts`): the count of the ``send()`` that created it, and it takes
    records of that count only.
    """

    def __init__(self, tp: TopicPartition, records: Any, now: float | None = None) -> None:
        super().__init__(tp, records, now=now)
        self._compiled = _codec.compiled is not None and isinstance(records, _codec.compiled.RecordBatchBuilder)
        self._partition_count = SENDING.count
        if self._compiled:
            records.partition_count = self._partition_count  # where the compiled send path compares it
            self.produce_future = BatchProduceResult(tp, self._record_futures)

    @property
    def partition_count(self) -> int:
        """The partition count of the batch's records (:data:`~kafka_kip.producer.partition_counts.EXPLICIT`:
        their partitions were given)."""
        return self._partition_count

    @partition_count.setter
    def partition_count(self, count: int) -> None:
        self._partition_count = count
        if self._compiled:
            self.records.partition_count = count

    def try_append(self, timestamp_ms: int | None, key: Any, value: Any, headers: list,
                   now: float | None = None) -> FutureRecordMetadata | None:
        if SENDING.count != self._partition_count:
            return None
        if not self._compiled:
            return super().try_append(timestamp_ms, key, value, headers, now=now)
        return _codec.compiled.append_record(self, self.records, timestamp_ms, key, value, headers, now, RecordFuture)


if _codec.compiled is not None:
    record_future.install(_codec.compiled, RecordFuture)


def records_builder(magic: int, compression_type: int, batch_size: int) -> Any:
    """A records builder for a new batch: the compiled codec's for message format v2, else kafka-python's."""
    if magic == 2 and _codec.compiled is not None:
        return _codec.compiled.RecordBatchBuilder(magic, compression_type, batch_size)
    return MemoryRecordsBuilder(magic, compression_type, batch_size)


__all__ = ['BatchProduceResult', 'CompiledProducerBatch', 'RecordFuture', 'records_builder']
