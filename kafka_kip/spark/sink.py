"""Writing a DataFrame to Kafka (batch and streaming), optionally at the offsets its rows carry (KIP-391).

Input columns, as Spark's built-in Kafka sink: ``value`` (binary or string, required), ``key`` (binary or
string), ``topic`` (string; the ``topic`` option overrides it), ``partition`` (int), ``headers``
(array<struct<key string, value binary>>), plus ``timestamp`` (timestamp) and, with
``preserveOffsets=true``, ``offset`` (long, required together with ``partition``). Other columns (e.g.
``leaderEpoch`` from a kafka-kip read) are ignored, so a read DataFrame can be written as it is.

With ``preserveOffsets=true`` each row is produced as a ``ProducerRecordWithOffset``: the broker writes it
at that offset or refuses it with ``InvalidProduceOffsetError`` when the offset is below its log end. A
re-executed task or micro-batch (task retry, query restart from its checkpoint) therefore finds the rows
it already wrote refused and counts them as *already there* instead of writing them twice: replication
keeps source offsets and stays exactly-once without transactions, provided the target partitions have
no other writer.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

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

from kafka_kip.errors import InvalidProduceOffsetError
from kafka_kip.producer import KafkaProducer
from kafka_kip.spark.options import OptionError, WriteOptions
from kafka_kip.spark.records import HEADERS_TYPE
from kafka_kip.structs import ProducerRecordWithOffset

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


def _encode(value: Any) -> bytes | None:
    return value.encode('utf-8') if isinstance(value, str) else value


class _Tally:
    """Counts the outcomes of a task's sends; keeps the first real failure to raise after the flush."""

    def __init__(self) -> None:
        self.written = self.already_there = 0
        self.error: BaseException | None = None

    def ok(self, _metadata: Any) -> None:
        self.written += 1

    def failed_at(self, offset: int | None) -> Callable[[BaseException], None]:
        """The errback of the record at ``offset``: a refusal below the log end means it is already there.

        A refusal at or above the log end (checked mode against a stock broker that cannot leave a gap) is a
        real failure: the record is not in the target.
        """
        def failed(exc: BaseException) -> None:
            if isinstance(exc, InvalidProduceOffsetError) and offset is not None and (
                    exc.log_end_offset < 0 or offset < exc.log_end_offset):
                self.already_there += 1
            elif self.error is None:
                self.error = exc
        return failed


def write_rows(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> WriteResult:
    """Produce every row of ``batches`` (one Spark task's input) and wait for the answers."""
    producer = KafkaProducer(bootstrap_servers=options.bootstrap_servers, **options.producer_configs)
    tally = _Tally()
    last_offsets: dict[tuple[str, int], int] = {}
    try:
        for batch in batches:
            for row in _rows(batch, options.topic):
                topic, partition, key, value, headers, timestamp_ms, offset = row
                if options.preserve_offsets:
                    if partition is None or offset is None:
                        raise ValueError(f'preserveOffsets=true: a row for topic {topic!r} has a null '
                                         f'{"partition" if partition is None else "offset"}')
                    previous = last_offsets.get((topic, partition), -1)
                    if offset <= previous:
                        # The broker would refuse it as "already there" and the record would be lost silently.
                        raise ValueError(f'preserveOffsets=true needs the rows of a partition in increasing offset '
                                         f'order within a task; {topic}-{partition} has offset {offset} after '
                                         f'{previous}')
                    last_offsets[(topic, partition)] = offset
                    future = producer.send(ProducerRecordWithOffset(topic, partition, key, value, headers,
                                                                    timestamp_ms, offset))
                else:
                    future = producer.send(topic, value=value, key=key, headers=headers, partition=partition,
                                           timestamp_ms=timestamp_ms)
                future.add_callback(tally.ok)
                future.add_errback(tally.failed_at(offset if options.preserve_offsets else None))
                if tally.error is not None:
                    raise tally.error
        producer.flush()
    finally:
        producer.close()
    if tally.error is not None:
        raise tally.error
    return WriteResult(tally.written, tally.already_there)


def _rows(batch: pa.RecordBatch, topic_option: str | None) -> Iterator[tuple]:
    names = batch.schema.names
    n = batch.num_rows

    def column(name: str, convert: Any = None) -> list[Any]:
        if name not in names:
            return [None] * n
        array = batch.column(names.index(name))
        if convert is not None:
            array = convert(array)
        return array.to_pylist()

    topics = [topic_option] * n if topic_option is not None else column('topic')
    stamps = column('timestamp', lambda a: a.cast(pa.timestamp('ms', tz=a.type.tz), safe=False).cast(pa.int64()))
    headers = column('headers')
    for topic, partition, key, value, hdrs, stamp, offset in zip(
            topics, column('partition'), column('key'), column('value'), headers, stamps, column('offset'),
            strict=True):
        if topic is None:
            raise ValueError('a row has a null topic (and the option topic is not set)')
        yield (topic, partition, _encode(key), _encode(value),
               None if hdrs is None else [(h['key'], h['value']) for h in hdrs],
               stamp, offset)


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
