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

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from kafka.errors import LogTruncationError
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

from kafka_kip.arrow.partition_reader import read_partition
from kafka_kip.consumer.batches import BatchConsumer
from kafka_kip.metadata.consistency import ConsistencyContext
from kafka_kip.metadata.store import ConsistencyContextStore
from kafka_kip.policies import consumer_reset_policy
from kafka_kip.spark.planner import truncation_error
from kafka_kip.spark.positions import Position
from kafka_kip.spark.worker_gc import settle_after_task

#: ``headers`` column type, as Spark's Kafka source has it.
HEADERS_TYPE = ArrayType(StructType([StructField('key', StringType()), StructField('value', BinaryType())]))
_SPARK_COLUMNS = (('key', BinaryType()), ('value', BinaryType()), ('topic', StringType()),
                  ('partition', IntegerType()), ('offset', LongType()), ('timestamp', TimestampType()),
                  ('timestampType', IntegerType()))


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
    With onTruncation=closest a truncated start continues from the truncation point. A range read to its end
    ends with :func:`~kafka_kip.spark.worker_gc.settle_after_task`.
    """
    if part.until <= part.start.offset:
        return  # an empty range: Spark's batch plans keep a task per partition
    consumer = BatchConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                             auto_offset_reset=consumer_reset_policy(on_truncation),
                             **{'group_id': None, **with_context(consumer_configs, part.consistency_context)})
    try:
        yield from read_partition(consumer, part.tp, part.start.seek_target(), part.until,
                                  to_arrow_schema(schema, timezone='UTC'), poll_timeout_ms,
                                  'option kafkaConsumer.pollTimeoutMs')
    except LogTruncationError as exc:
        raise truncation_error(exc, {part.tp: part.start}) from exc
    finally:
        consumer.close()
    settle_after_task()
