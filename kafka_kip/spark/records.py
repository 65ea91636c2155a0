"""Executor side of reading: one offset range of one partition, as Arrow record batches of Spark's columns.

Columns: those of Spark's built-in Kafka source, in its order, then ``leaderEpoch``::

    key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int, [headers array<struct<key: string, value: binary>> with includeHeaders=true],
    leaderEpoch int

The range's start is a :class:`~kafka_kip.spark.positions.Position`: the consumer seeks to it with its
leader epoch and partition epoch, so it validates the position before fetching (KIP-320/232) and a task
that starts on a truncated or recreated partition fails instead of reading other records.
"""
from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from kafka.errors import KafkaTimeoutError, LogTruncationError
from kafka.structs import TopicPartition
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_kip.consumer import KafkaConsumer
from kafka_kip.metadata.consistency import ConsistencyContext
from kafka_kip.metadata.store import ConsistencyContextStore
from kafka_kip.policies import consumer_reset_policy
from kafka_kip.spark.planner import truncation_error
from kafka_kip.spark.positions import Position

#: ``headers`` column type, as Spark's Kafka source has it.
HEADERS_TYPE = ArrayType(StructType([StructField('key', StringType()), StructField('value', BinaryType())]))
_SPARK_COLUMNS = (('key', BinaryType()), ('value', BinaryType()), ('topic', StringType()),
                  ('partition', IntegerType()), ('offset', LongType()), ('timestamp', TimestampType()),
                  ('timestampType', IntegerType()))
_ROWS_PER_BATCH = 8192


def record_schema(include_headers: bool = False) -> StructType:
    """The DataFrame schema of a read (``headers`` only with ``includeHeaders=true``, as in Spark)."""
    columns = _SPARK_COLUMNS + ((('headers', HEADERS_TYPE),) if include_headers else ()) + (
        ('leaderEpoch', IntegerType()),)
    return StructType([StructField(name, kind) for name, kind in columns])


class OffsetRange(InputPartition):
    """One Spark task: read ``tp`` from ``start`` (with its epochs) up to ``until`` (exclusive).

    ``consistency_context`` (and ``target_consistency_context`` for a mirror's target): the driver's KIP-1243
    consistency context as bytes (``ConsistencyContext.to_bytes()``; empty: none), which the task's clients start
    from, so they read metadata at least as new as what the driver planned with.
    """

    def __init__(self, tp: TopicPartition, start: Position, until: int, consistency_context: bytes = b'',
                 target_consistency_context: bytes = b'') -> None:
        super().__init__((tp.topic, tp.partition, start.offset, until))
        self.tp = tp
        self.start = start
        self.until = until
        self.consistency_context = consistency_context
        self.target_consistency_context = target_consistency_context

    def __repr__(self) -> str:
        return f'OffsetRange({self.tp.topic}-{self.tp.partition} [{self.start.offset}, {self.until}))'


def with_context(configs: Mapping[str, Any], context: bytes) -> dict[str, Any]:
    """``configs`` whose clients start from the driver's consistency ``context`` (bytes; empty: as they are)."""
    if not context or 'consistency_context_store' in configs:
        return dict(configs)
    store = ConsistencyContextStore.of(ConsistencyContext.from_bytes(context))
    return {**configs, 'consistency_context_store': store}


def read_range(bootstrap_servers: str, consumer_configs: Mapping[str, Any], part: OffsetRange, schema: StructType,
               on_truncation: str, poll_timeout_ms: int) -> Iterator[pa.RecordBatch]:
    """The records of ``part`` as Arrow batches of ``schema`` (see :func:`record_schema`).

    Raises ``TruncatedPartitionError`` naming the lost offsets (onTruncation=fail), ``InvalidPartitionEpochError``
    for a recreated partition, and ``KafkaTimeoutError`` when no record arrives for ``poll_timeout_ms``.
    With onTruncation=closest a truncated start continues from the truncation point.
    """
    if part.until <= part.start.offset:
        return  # an empty range: Spark's batch plans keep a task per partition
    arrow_schema = to_arrow_schema(schema, timezone='UTC')
    with_headers = 'headers' in schema.fieldNames()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                             auto_offset_reset=consumer_reset_policy(on_truncation),
                             **{'group_id': None, **with_context(consumer_configs, part.consistency_context)})
    tp, until = part.tp, part.until
    try:
        consumer.assign([tp])
        consumer.partitions_for_topic(tp.topic)
        consumer.seek(tp, part.start.seek_target())
        columns: list[list[Any]] = [[] for _ in arrow_schema.names]
        position = part.start.offset
        deadline = time.monotonic() + poll_timeout_ms / 1000
        while position < until:
            try:
                fetched = consumer.poll(timeout_ms=min(500, poll_timeout_ms), max_records=_ROWS_PER_BATCH)
            except LogTruncationError as exc:
                raise truncation_error(exc, {tp: part.start})
            for record in fetched.get(tp, ()):
                if record.offset >= until:
                    break
                _append(columns, record, with_headers)
            previous, position = position, consumer.position(tp)
            if position != previous:
                deadline = time.monotonic() + poll_timeout_ms / 1000
            elif time.monotonic() > deadline:
                raise KafkaTimeoutError(f'{tp.topic}-{tp.partition}: no record at offset {position} within '
                                        f'{poll_timeout_ms} ms (reading up to offset {until}; option '
                                        'kafkaConsumer.pollTimeoutMs)')
            if len(columns[0]) >= _ROWS_PER_BATCH:
                yield _batch(columns, arrow_schema)
                columns = [[] for _ in arrow_schema.names]
        if columns[0]:
            yield _batch(columns, arrow_schema)
    finally:
        consumer.close()


def _append(columns: list[list[Any]], record: Any, with_headers: bool) -> None:
    # Spark timestamps are microseconds since the epoch (UTC); Arrow takes them as ints of the column's unit.
    values = [record.key, record.value, record.topic, record.partition, record.offset, record.timestamp * 1000,
              record.timestamp_type]
    if with_headers:
        # as Spark's Kafka source: null, not an empty array, for a record without headers
        values.append([{'key': k, 'value': v} for k, v in record.headers] if record.headers else None)
    values.append(record.leader_epoch)
    for column, value in zip(columns, values, strict=True):
        column.append(value)


def _batch(columns: list[list[Any]], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
                                      schema=schema)
