"""The ``kafka-kip`` data source: batch and streaming reads, and the writers of :mod:`kafka_kip.spark.sink`.

Reads plan one Spark task per partition (or per ``maxRecordsPerPartition`` offsets of a partition) on the
driver with :class:`~kafka_kip.spark.planner.SourcePlanner`, and read on the executors with
:func:`~kafka_kip.spark.records.read_range`. A streaming query checkpoints positions with their epochs
(:mod:`kafka_kip.spark.positions`); before planning a micro-batch its start and end positions are checked
against the cluster, so a query restarted after an unclean leader election fails with
``TruncatedPartitionError`` naming the lost offsets (or, with ``onTruncation=closest``, continues from the
truncation point) and one restarted after its topic was recreated fails with ``InvalidPartitionEpochError``.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from kafka.structs import TopicPartition
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kafka_kip.spark.options import EARLIEST, LATEST, OptionError, ReadOptions, WriteOptions
from kafka_kip.spark.planner import SourcePlanner
from kafka_kip.spark.positions import Position, Positions, from_spark, to_spark
from kafka_kip.spark.records import OffsetRange, read_range, record_schema, split
from kafka_kip.spark.sink import BatchWriter, StreamWriter, check_schema

FORMAT = 'kafka-kip'


def _planner(options: ReadOptions) -> SourcePlanner:
    return SourcePlanner(options.bootstrap_servers, options.consumer_configs, options.subscription,
                         options.on_truncation)


class BatchReader(DataSourceReader):
    """``spark.read.format("kafka-kip")``: the offsets between startingOffsets and endingOffsets."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        options = self.options
        planner = _planner(options)
        try:
            described = planner.describe()
            start = planner.resolve(options.starting, described)
            if options.starting.by_partition:  # user-given positions may carry leader epochs to check
                start = planner.check(start, described)
            end = planner.resolve(options.ending, described)
        finally:
            planner.close()
        ranges: list[InputPartition] = []
        for tp in sorted(start):
            if start[tp].offset > end[tp].offset:
                raise OptionError(f'startingOffsets of {tp.topic}-{tp.partition} ({start[tp].offset}) is after its '
                                  f'endingOffsets ({end[tp].offset})')
            ranges.extend(split(tp, start[tp], end[tp].offset, options.max_records_per_partition))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return read_range(self.options.bootstrap_servers, self.options.consumer_configs, partition, self.schema,
                          self.options.on_truncation, self.options.poll_timeout_ms)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka-kip")``: micro-batches of offset ranges, epochs checkpointed.

    Subclasses change what a task does with its range (:meth:`read`); planning is the same.
    """

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._planner: SourcePlanner | None = None  # created on the driver only; never pickled in use
        self._stop_at: Positions | None = None  # Trigger.AvailableNow: the latest positions at the start

    @property
    def planner(self) -> SourcePlanner:
        if self._planner is None:
            self._planner = _planner(self.options)
        return self._planner

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, _planner=None)

    def initialOffset(self) -> dict:
        described = self.planner.describe()
        start = self.planner.resolve(self.options.starting, described)
        if self.options.starting.by_partition:
            start = self.planner.check(start, described)
        return to_spark(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._stop_at = self.planner.list_offsets(self.planner.describe(), LATEST)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        described = self.planner.describe()
        latest = self.planner.list_offsets(described, LATEST)
        if self._stop_at is not None:
            stop_at = self._stop_at
            latest = {tp: p if p.offset <= stop_at[tp].offset else stop_at[tp]
                      for tp, p in latest.items() if tp in stop_at}
        if isinstance(limit, ReadMaxRows):
            latest = self._cap(from_spark(start), latest, limit.max_rows)
        return to_spark(latest)

    def _cap(self, start: Positions, latest: Positions, max_rows: int) -> Positions:
        """Spark's maxOffsetsPerTrigger: at most ``max_rows`` offsets, shared in proportion to each lag."""
        new = {tp for tp in latest if tp not in start}
        if new:
            described = self.planner.describe()
            start = {**self.planner.list_offsets({tp: described[tp] for tp in new if tp in described}, EARLIEST),
                     **start}
        lag = {tp: max(0, p.offset - start[tp].offset) for tp, p in latest.items() if tp in start}
        total = sum(lag.values())
        if total <= max_rows:
            return latest
        capped = dict(latest)
        shares = {tp: max_rows * n // total for tp, n in lag.items()}
        if not any(shares.values()):
            shares[max(lag, key=lag.__getitem__)] = max_rows
        for tp, share in shares.items():
            if share < lag[tp]:
                p = latest[tp]
                capped[tp] = Position(start[tp].offset + share, p.leader_epoch, p.partition_epoch, p.topic_id)
        return capped

    def plan(self, start: dict, end: dict) -> list[tuple[TopicPartition, Position, int]]:
        """Checked ``(partition, from, until)`` of a micro-batch (also for one re-run after a restart).

        End positions are checked before start positions, so a truncation names every offset of the
        batch that is gone. With onTruncation=closest a truncated position becomes the truncation point.
        """
        start_pos, end_pos = from_spark(start), from_spark(end)
        described = self.planner.describe()
        checked_end = self.planner.check(end_pos, described)
        checked_start = self.planner.check(start_pos, described)
        new = {tp: described[tp] for tp in end_pos if tp not in start_pos and tp in described}
        checked_start.update(self.planner.list_offsets(new, EARLIEST))
        ranges = []
        for tp in sorted(end_pos):
            begin = checked_start.get(tp)
            if begin is not None:
                ranges.append((tp, begin, max(begin.offset, checked_end[tp].offset)))
        return ranges

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        ranges: list[InputPartition] = []
        for tp, begin, until in self.plan(start, end):
            ranges.extend(split(tp, begin, until, self.options.max_records_per_partition))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return read_range(self.options.bootstrap_servers, self.options.consumer_configs, partition, self.schema,
                          self.options.on_truncation, self.options.poll_timeout_ms)

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None


class KafkaKipDataSource(DataSource):
    """Format ``kafka-kip``: Spark's Kafka source and sink options and columns, plus leader epochs (see docs/SPARK.md)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _read_options(self) -> ReadOptions:
        return ReadOptions.parse(self.options)

    def schema(self) -> StructType:
        # Called by load(): every option is checked here, so mistakes fail before a query starts.
        return record_schema(self._read_options().include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(self._read_options().for_batch(), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(self._read_options().for_stream(), schema)

    def _write_options(self, schema: StructType) -> WriteOptions:
        options = WriteOptions.parse(self.options)
        check_schema(schema, options)
        return options

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return BatchWriter(self._write_options(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter(self._write_options(schema))

