"""One partition's offsets ``[start, until)`` as Arrow record batches: the loop of a Spark read task and of
:func:`kafka_kip.arrow.read_table`.

A :class:`~kafka_kip.consumer.batches.BatchConsumer` is seeked to the start (with its epochs: KIP-320/232
validate it before anything is fetched) and polled until its position reaches ``until``; each fetched batch
is decoded straight into the columns of :mod:`kafka_kip.arrow.columns`. The position, not the records, says
where the read is, so compacted gaps, aborted transactions and transaction markers end the range too.
A truncation the consumer detects (at the start or mid-read) propagates as kafka-python's
``LogTruncationError`` (kafka_kip's ``TruncatedPartitionError``) for the caller to name in its own terms.
"""
from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
from kafka.errors import KafkaTimeoutError
from kafka.structs import TopicPartition

from kafka_kip.arrow.columns import append_fetched, new_columns
from kafka_kip.consumer.batches import BatchConsumer
from kafka_kip.structs import OffsetAndMetadata

ROWS_PER_BATCH = 8192  # a Spark task's batches
BYTES_PER_BATCH = 32 << 20  # keys and values of one Arrow batch (Arrow's binary offsets are 32-bit)
_POLL_MS = 500


def read_partition(consumer: BatchConsumer, tp: TopicPartition, start: OffsetAndMetadata, until: int,
                   schema: pa.Schema, poll_timeout_ms: int, timeout_hint: str,
                   rows_per_batch: int = ROWS_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """The records of ``tp`` from ``start`` (an offset with its epochs) below ``until``, as batches of ``schema``
    each taken once it holds ``rows_per_batch`` rows or :data:`BYTES_PER_BATCH` bytes of keys and values (or the
    range ends).

    ``consumer`` is (re)assigned to ``tp`` alone. Raises ``KafkaTimeoutError`` (its message ending with
    ``timeout_hint``, the setting that changes the limit) when the position stays put for ``poll_timeout_ms``.
    """
    if until <= start.offset:
        return
    columns = new_columns(tp.topic, tp.partition, schema, 'headers' in schema.names)
    consumer.assign([tp])
    consumer.partitions_for_topic(tp.topic)  # metadata first: validating the start needs the current epochs
    consumer.seek(tp, start)
    position = start.offset
    deadline = time.monotonic() + poll_timeout_ms / 1000
    while position < until:
        fetched = consumer.poll(timeout_ms=min(_POLL_MS, poll_timeout_ms))
        for item in fetched.get(tp, ()):
            append_fetched(columns, item, until)
        previous, position = position, consumer.position(tp)
        if position != previous:
            deadline = time.monotonic() + poll_timeout_ms / 1000
        elif time.monotonic() > deadline:
            raise KafkaTimeoutError(f'{tp.topic}-{tp.partition}: no record at offset {position} within '
                                    f'{poll_timeout_ms} ms (reading up to offset {until}; {timeout_hint})')
        if len(columns) >= rows_per_batch or columns.nbytes >= BYTES_PER_BATCH:
            yield columns.take()
    if len(columns):
        yield columns.take()


__all__ = ['BYTES_PER_BATCH', 'ROWS_PER_BATCH', 'read_partition']
