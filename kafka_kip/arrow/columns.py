"""The columns a partition read fills: the compiled :class:`~kafka_kip._codec._columns.SparkColumns`, or this fallback.

Both take one partition's records in offset order and hand them over as ``pyarrow.RecordBatch`` es of Spark's
Kafka source columns (:func:`record_schema`; the Spark source passes the same schema as pyspark derives it from
:func:`kafka_kip.spark.records.record_schema`). The compiled one decodes whole fetched batches
(``append_batch``); both take single records (``append_record``), which is all :class:`PyColumns` does:
without the compiled codec the consumer hands out kafka-python's records.
"""
from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from kafka_kip import _codec
from kafka_kip.consumer.batches import FetchedBatch

#: Spark's Kafka source columns in Arrow, in its order (``headers`` optional), then ``leaderEpoch``.
_FIELDS = (('key', pa.binary()), ('value', pa.binary()), ('topic', pa.string()), ('partition', pa.int32()),
           ('offset', pa.int64()), ('timestamp', pa.timestamp('us', tz='UTC')), ('timestampType', pa.int32()))
HEADERS_TYPE = pa.list_(pa.field('element', pa.struct([('key', pa.string()), ('value', pa.binary())])))


def record_schema(with_headers: bool = True) -> pa.Schema:
    """The Arrow schema of the rows: key, value, topic, partition, offset, timestamp (UTC microseconds),
    timestampType, [headers], leaderEpoch."""
    fields = _FIELDS + ((('headers', HEADERS_TYPE),) if with_headers else ()) + (('leaderEpoch', pa.int32()),)
    return pa.schema(fields)


def _timestamp_micros(topic: str, partition: int, offset: int, timestamp: int) -> int:
    micros = timestamp * 1000
    if not -2 ** 63 < micros < 2 ** 63:
        raise OverflowError(f'{topic}-{partition} offset {offset}: timestamp {timestamp} ms is outside what a Spark '
                            'timestamp holds (microseconds in 64 bits)')
    return micros


class PyColumns:
    """Columns filled record by record in Python lists (see the module docstring)."""

    def __init__(self, topic: str, partition: int, schema: pa.Schema, with_headers: bool) -> None:
        self._topic, self._partition, self._schema, self._with_headers = topic, partition, schema, with_headers
        self._columns: list[list[Any]] = [[] for _ in schema.names]
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._columns[0])

    def append_record(self, key: bytes | None, value: bytes | None, offset: int, timestamp: int,
                      timestamp_type: int, headers: Sequence[tuple[str, bytes | None]], leader_epoch: int) -> None:
        values = [key, value, self._topic, self._partition, offset,
                  _timestamp_micros(self._topic, self._partition, offset, timestamp), timestamp_type]
        if self._with_headers:
            # as Spark's Kafka source: null, not an empty array, for a record without headers
            values.append([{'key': k, 'value': v} for k, v in headers] if headers else None)
        values.append(leader_epoch)
        for column, item in zip(self._columns, values, strict=True):
            column.append(item)
        self.nbytes += len(key or b'') + len(value or b'')

    def append_batch(self, *batch: Any) -> int:
        """-1: a fetched batch is left to kafka-python's decoding (see :func:`append_fetched`)."""
        return -1

    def take(self) -> pa.RecordBatch:
        """The rows appended so far; the columns start empty again."""
        columns, self._columns, self.nbytes = self._columns, [[] for _ in self._schema.names], 0
        return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, self._schema,
                                                                                     strict=True)],
                                          schema=self._schema)


def new_columns(topic: str, partition: int, schema: pa.Schema, with_headers: bool) -> Any:
    """The compiled columns when the codec is built (and not switched off), else :class:`PyColumns`."""
    if _codec.compiled is not None:
        try:
            from kafka_kip._codec._columns import SparkColumns
        except ImportError as exc:
            warnings.warn(f'kafka_kip: the compiled Spark columns are not available ({exc}): rows are built in '
                          'Python (same rows, slower). Reinstall kafka-python-kip where a C compiler is present.',
                          _codec.PurePythonRecordsWarning, stacklevel=2)
        else:
            return SparkColumns(topic, partition, schema, with_headers)
    return PyColumns(topic, partition, schema, with_headers)


def append_fetched(columns: Any, item: Any, until: int) -> None:
    """What a :class:`~kafka_kip.consumer.batches.BatchConsumer` handed out, its records below ``until``: a fetched
    batch (decoded by ``columns``, or by kafka-python where the compiled decoder declines it) or a record."""
    if not isinstance(item, FetchedBatch):
        if item.offset < until:
            columns.append_record(item.key, item.value, item.offset, item.timestamp, item.timestamp_type,
                                  item.headers, item.leader_epoch)
        return
    if max(item.base_offset, item.min_offset) >= until:
        return  # (what is wrong with records past the range is for the task reading them to find)
    if columns.append_batch(
            item.buffer, item.start, item.count, item.base_offset, item.first_timestamp, item.timestamp,
            item.log_append_time, item.leader_epoch, item.min_offset, until) < 0:
        _append_decoded(columns, item, until)


def _append_decoded(columns: Any, item: FetchedBatch, until: int) -> None:
    """The records of ``item`` as kafka-python decodes them, as its consumer hands them out: those below the fetch
    offset skipped up to the first one at or above it, and kafka-python's error raised unless a record at or past
    the range's end came before it (the consumer holds an error back for the next poll, which a read task whose
    position reached ``until`` does not make)."""
    timestamp_type = 1 if item.log_append_time else 0
    records = itertools.dropwhile(lambda record: record.offset < item.min_offset, item.decoded())
    reached = False
    try:
        for record in records:
            if record.offset < until:
                columns.append_record(record.key, record.value, record.offset, record.timestamp, timestamp_type,
                                      record.headers, item.leader_epoch)
            reached = record.offset + 1 >= until
    except Exception:
        if not reached:
            raise


__all__ = ['HEADERS_TYPE', 'PyColumns', 'append_fetched', 'new_columns', 'record_schema']
