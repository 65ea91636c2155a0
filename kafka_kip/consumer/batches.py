"""A consumer that hands out fetched record batches undecoded, for readers that decode them in bulk.

:class:`BatchConsumer` is kafka_kip's ``KafkaConsumer`` (positions validated with their epochs, KIP-320/232)
whose ``poll()`` returns, per partition, one :class:`FetchedBatch` per v2 batch instead of one
``ConsumerRecord`` per record: CRC-checked, decompressed, control batches and (read_committed) aborted
transactions left out, exactly the batches kafka_kip's consumer would decode records from. The position moves
past each batch handed out. Where kafka-python's own decoding takes over (a batch of another magic, a CRC
failure: see :mod:`kafka_kip.consumer.records`) or the compiled codec is not built, the items are
kafka-python's ``ConsumerRecord`` s, as from any consumer.

The Spark source decodes the batches straight into Arrow columns (:mod:`kafka_kip.spark.records`).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kafka.errors import KafkaConfigurationError
from kafka.record.default_records import DefaultRecordBatch
from kafka.structs import TopicPartition

from kafka_kip import _codec
from kafka_kip.consumer.group import KafkaConsumer
from kafka_kip.consumer.records import DecodedPartitionRecords, record_bytes_of


class FetchedBatch:
    """One fetched v2 batch: its records are ``buffer[start:]`` (uncompressed), ``count`` of them.

    ``offset`` is the batch's last offset and ``leader_epoch`` its leader epoch (what the consumer's position
    follows); only records at or past ``min_offset`` (the fetch offset, which may fall inside the batch) are
    the consumer's to hand out. :meth:`decoded` is kafka-python's decoding of the batch.
    """

    __slots__ = ('batch', 'buffer', 'start', 'count', 'base_offset', 'offset', 'first_timestamp', 'timestamp',
                 'log_append_time', 'leader_epoch', 'min_offset')

    def __init__(self, batch: DefaultRecordBatch, min_offset: int) -> None:
        self.batch = batch
        self.buffer, self.start = record_bytes_of(batch)
        self.count = batch.records_count
        self.base_offset = batch.base_offset
        self.offset = batch.last_offset
        self.first_timestamp = batch.first_timestamp
        self.timestamp = batch.max_timestamp  # (what a consumer's commit timestamp takes from its last record)
        self.log_append_time = batch.timestamp_type == DefaultRecordBatch.LOG_APPEND_TIME
        self.leader_epoch = batch.leader_epoch
        self.min_offset = min_offset

    def decoded(self) -> Iterator[Any]:
        """kafka-python's records of the batch (``DefaultRecord``: offset, timestamp, key, value, headers), or
        kafka-python's error for a batch it cannot decode. Once: the batch is read as it is iterated."""
        return iter(self.batch)

    def __repr__(self) -> str:
        return f'FetchedBatch(offsets {self.base_offset}..{self.offset}, {self.count} records)'


class BatchPartitionRecords(DecodedPartitionRecords):
    """kafka_kip's ``PartitionRecords`` whose items are :class:`FetchedBatch` es."""

    def _decode(self, batch: DefaultRecordBatch, tp: TopicPartition, key_deserializer: Any,
                value_deserializer: Any) -> tuple[FetchedBatch]:
        fetched = FetchedBatch(batch, self.fetch_offset)
        self.records_read += fetched.count
        self.bytes_read += len(fetched.buffer) - fetched.start
        self.next_fetch_offset = batch.next_offset
        return (fetched,)


class BatchConsumer(KafkaConsumer):
    """kafka_kip's ``KafkaConsumer`` whose ``poll()`` hands out :class:`FetchedBatch` es (see the module
    docstring). Reads assigned partitions (``assign()``) as raw bytes: no deserializers, no ``subscribe()``."""

    def __init__(self, *topics: str, **configs: Any) -> None:
        for name in ('key_deserializer', 'value_deserializer'):
            if configs.get(name) is not None:
                raise KafkaConfigurationError(f'BatchConsumer hands out record bytes: {name} must be None, got '
                                              f'{configs[name]!r}')
        if topics:
            raise KafkaConfigurationError(f'BatchConsumer reads assigned partitions: call assign(), not subscribe '
                                          f'to {topics!r}')
        super().__init__(**configs)
        if _codec.compiled is not None:
            self._fetcher.PartitionRecords = BatchPartitionRecords

    def subscribe(self, *args: Any, **kwargs: Any) -> None:
        raise KafkaConfigurationError('BatchConsumer reads assigned partitions: call assign(), not subscribe()')


__all__ = ['BatchConsumer', 'BatchPartitionRecords', 'FetchedBatch']
