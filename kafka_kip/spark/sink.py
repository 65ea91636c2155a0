"""Writing a DataFrame to Kafka (batch and streaming), optionally at the offsets its rows carry (KIP-391).

Input columns, as Spark's built-in Kafka sink: ``value`` (binary or string, required), ``key`` (binary or
string), ``topic`` (string; the ``topic`` option overrides it), ``partition`` (int), ``headers``
(array<struct<key string, value binary>>), plus ``timestamp`` (timestamp) and, with
``preserveOffsets=true``, ``offset`` (long, required together with ``partition``). Other columns (e.g.
``leaderEpoch`` from a kafka-kip read) are ignored, so a read DataFrame can be written as it is.

Rows are encoded straight into record batches and sent by the producer as they are
(:mod:`kafka_kip.producer.arrow_writer`). With ``preserveOffsets=true`` each row goes to its offset: the broker
writes it at that offset or refuses it with ``InvalidProduceOffsetError`` when the offset is below its log end. A
re-executed task or micro-batch (task retry, query restart from its checkpoint) therefore finds the rows
it already wrote refused and counts them as *already there* instead of writing them twice: replication
keeps source offsets and stays exactly-once without transactions, provided the target partitions have
no other writer.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from kafka_kip.producer.arrow_writer import write_through
from kafka_kip.spark.options import OptionError, WriteOptions
from kafka_kip.spark.producers import task_producer
from kafka_kip.spark.records import HEADERS_TYPE
from kafka_kip.spark.worker_gc import settle_after_task

log = logging.getLogger(__name__)

_BYTES_OR_TEXT = (BinaryType, StringType)


def _check_type(schema: StructType, column: str, allowed: tuple[type[DataType], ...], what: str) -> None:
    if column in schema.fieldNames() and not isinstance(schema[column].dataType, allowed):
        raise OptionError(f'column {column!r} must be {what}, got {schema[column].dataType.simpleString()}')


def check_schema(schema: StructType, options: WriteOptions) -> None:
    """Refuse an input schema the sink cannot write, naming the column (and option) at fault."""
    names = schema.fieldNames()
    if 'value' not in names:
        raise OptionError("the DataFrame to write needs a 'value' column (binary or string)")
    _check_type(schema, 'value', _BYTES_OR_TEXT, 'binary or string')
    _check_type(schema, 'key', _BYTES_OR_TEXT, 'binary or string')
    _check_type(schema, 'topic', (StringType,), 'string')
    _check_type(schema, 'partition', (IntegerType, LongType), 'int')
    _check_type(schema, 'offset', (IntegerType, LongType), 'long')
    _check_type(schema, 'timestamp', (TimestampType,), 'timestamp')
    if 'headers' in names and schema['headers'].dataType.simpleString() != HEADERS_TYPE.simpleString():
        raise OptionError(f"column 'headers' must be {HEADERS_TYPE.simpleString()}, got "
                          f"{schema['headers'].dataType.simpleString()}")
    if options.topic is None and 'topic' not in names:
        raise OptionError("set the option topic or give the DataFrame a 'topic' column")
    if options.preserve_offsets and not {'partition', 'offset'} <= set(names):
        raise OptionError("option preserveOffsets=true needs 'partition' and 'offset' columns")


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task did: records written, and records refused as already there (preserveOffsets)."""

    written: int
    already_there: int


def write_rows(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> WriteResult:
    """Produce every row of ``batches`` (one Spark task's input) and wait for the answers, through a producer
    this Python worker keeps from task to task (:mod:`kafka_kip.spark.producers`); then
    :func:`~kafka_kip.spark.worker_gc.settle_after_task`."""
    with task_producer({'bootstrap_servers': options.bootstrap_servers, **options.producer_configs}) as producer:
        counts = write_through(producer, batches, options.topic, options.preserve_offsets)
    settle_after_task()
    return WriteResult(counts.written, counts.already_there)


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("kafka-kip")``."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        results = [m for m in messages if isinstance(m, WriteResult)]
        log.info('kafka-kip write: %d records written, %d already there',
                 sum(r.written for r in results), sum(r.already_there for r in results))


class StreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kafka-kip")``: each micro-batch is written like a batch."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        results = [m for m in messages if isinstance(m, WriteResult)]
        log.info('kafka-kip micro-batch %d: %d records written, %d already there', batchId,
                 sum(r.written for r in results), sum(r.already_there for r in results))
