"""The ``kafka-kip`` data source: batch and streaming reads, and the writers of :mod:`kafka_kip.spark.sink`.

Reads plan one Spark task per partition range on the driver with
:class:`~kafka_kip.spark.planner.SourcePlanner` (cut into more tasks by ``maxRecordsPerPartition`` /
``minPartitions``, :mod:`kafka_kip.spark.ranges`), and read on the executors with
:func:`~kafka_kip.spark.records.read_range`. Streaming batch sizes follow :mod:`kafka_kip.spark.limits`. A streaming query checkpoints positions with their epochs
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
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kafka_kip.spark.limits import TriggerPacer, rate_limit
from kafka_kip.spark.options import EARLIEST, LATEST, OffsetsSpec, OptionError, ReadOptions, WriteOptions
from kafka_kip.spark.planner import PartitionInfo, SourcePlanner
from kafka_kip.spark.positions import Position, Positions, from_spark, to_spark
from kafka_kip.spark.ranges import Range, batch_tasks, divide
from kafka_kip.spark.records import OffsetRange, read_range, record_schema
from kafka_kip.spark.sink import BatchWriter, StreamWriter, check_schema

FORMAT = 'kafka-kip'


def _planner(options: ReadOptions) -> SourcePlanner:
    return SourcePlanner(options.bootstrap_servers, options.consumer_configs, options.subscription,
                         options.on_truncation, fetch_attempts=options.fetch_attempts,
                         retry_interval_ms=options.fetch_retry_interval_ms)


def _executor_configs(options: ReadOptions) -> dict[str, Any]:
    """The consumer settings of the query's read tasks (with the executors' group, if one is configured)."""
    group_id = options.executor_group_id()
    return dict(options.consumer_configs) if group_id is None else {**options.consumer_configs, 'group_id': group_id}


def _tasks(ranges: list[Range], context: bytes) -> list[InputPartition]:
    return [OffsetRange(r.tp, r.start, r.until, consistency_context=context) for r in ranges]


class _RangeReading:
    """What a task of a ``kafka-kip`` read does: the records of its :class:`OffsetRange`."""

    options: ReadOptions
    schema: StructType
    consumer_configs: dict[str, Any]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):  # PySpark's stand-in task when planning found no partition
            return iter(())
        return read_range(self.options.bootstrap_servers, self.consumer_configs, partition, self.schema,
                          self.options.on_truncation, self.options.poll_timeout_ms)


class BatchReader(_RangeReading, DataSourceReader):
    """``spark.read.format("kafka-kip")``: the offsets between the start and end options."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.consumer_configs = _executor_configs(options)

    def partitions(self) -> list[InputPartition]:
        options = self.options
        planner = _planner(options)
        try:
            described = planner.describe()
            start = planner.resolve(options.starting, described)
            if isinstance(options.starting, OffsetsSpec) and options.starting.by_partition:
                # user-given positions may carry leader epochs to check, or be gone from the log
                start = planner.check_retained(planner.check(start, described), described)
            end = planner.resolve(options.ending, described)
            context = planner.consistency_context()
        finally:
            planner.close()
        ranges = []
        for tp in sorted(start):
            if start[tp].offset > end[tp].offset:
                raise OptionError(f'{options.starting.name} of {tp.topic}-{tp.partition} (offset {start[tp].offset}) '
                                  f'is after its {options.ending.name} (offset {end[tp].offset})')
            ranges.append(Range(tp, start[tp], end[tp].offset))
        return _tasks(batch_tasks(ranges, options.min_partitions, options.max_records_per_partition), context)


class StreamReader(_RangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka-kip")``: micro-batches of offset ranges, epochs checkpointed.

    Subclasses change what a task does with its range (:meth:`read`); planning is the same.
    """

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.consumer_configs = _executor_configs(options)
        self._planner: SourcePlanner | None = None  # created on the driver only; never pickled in use
        self._stop_at: Positions | None = None  # Trigger.AvailableNow: the latest positions at the start
        self._expansion_holds: dict[str, Positions] = {}  # grown topic -> its prior partitions' latest when seen
        self._pacer = None if options.min_offsets_per_trigger is None else TriggerPacer(
            options.min_offsets_per_trigger, options.max_trigger_delay_ms)

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
        if isinstance(self.options.starting, OffsetsSpec) and self.options.starting.by_partition:
            start = self.planner.check_retained(self.planner.check(start, described), described)
        return to_spark(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        # Only tells Spark a limit applies (anything but ReadAllAvailable): latestOffset applies the options.
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._stop_at = self.planner.list_offsets(self.planner.describe(), LATEST)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        described = self.planner.describe()
        latest = self.planner.list_offsets(described, LATEST)
        if self._stop_at is not None:
            stop_at = self._stop_at
            latest = {tp: p if p.offset <= stop_at[tp].offset else stop_at[tp]
                      for tp, p in latest.items() if tp in stop_at}
        latest = self._hold_new_partitions(from_spark(start), latest)
        if isinstance(limit, ReadAllAvailable):
            return to_spark(latest)
        begin = from_spark(start)
        if self._pacer is not None and self._stop_at is None and not self._pacer.admit(begin, latest):
            return start  # minOffsetsPerTrigger: no batch yet
        if self.options.max_offsets_per_trigger:
            latest = rate_limit(self.options.max_offsets_per_trigger, self._with_new(begin, latest, described), latest)
        return to_spark(latest)

    def _hold_new_partitions(self, start: Positions, latest: Positions) -> Positions:
        """``latest`` without the new partitions of a grown topic until a micro-batch starts where its prior
        partitions' latest positions were when the growth was seen (at or past the KIP-253 expansion's
        thresholds): a key's records written after the expansion are planned after those written before it."""
        started = {tp.topic for tp in start}
        grown = {tp.topic for tp in latest if tp not in start and tp.topic in started}
        self._expansion_holds = {topic: ends for topic, ends in self._expansion_holds.items() if topic in grown}
        held = set()
        for topic in grown:
            ends = self._expansion_holds.setdefault(
                topic, {tp: p for tp, p in latest.items() if tp.topic == topic and tp in start})
            if any(start[tp].offset < end.offset for tp, end in ends.items()):
                held.add(topic)
        return {tp: p for tp, p in latest.items() if tp in start or tp.topic not in held}

    def _with_new(self, start: Positions, latest: Positions, described: dict[TopicPartition, PartitionInfo]) -> Positions:
        """``start`` plus the earliest positions of partitions that appeared since (they are read from there)."""
        new = {tp: described[tp] for tp in latest if tp not in start and tp in described}
        return {**self.planner.list_offsets(new, EARLIEST), **start}

    def plan(self, start: dict, end: dict) -> list[tuple[TopicPartition, Position, int]]:
        """Checked ``(partition, from, until)`` of a micro-batch (also for one re-run after a restart).

        End positions are checked before start positions, so a truncation names every offset of the
        batch that is gone. With onTruncation=closest a truncated position becomes the truncation point and
        a position below the log start offset (retention) becomes the log start offset.
        """
        start_pos, end_pos = from_spark(start), from_spark(end)
        described = self.planner.describe()
        checked_end = self.planner.check(end_pos, described)
        checked_start = self.planner.check_retained(self.planner.check(start_pos, described), described)
        checked_start = self._with_new(checked_start, end_pos, described)
        ranges = []
        for tp in sorted(end_pos):
            begin = checked_start.get(tp)
            if begin is not None:
                ranges.append((tp, begin, max(begin.offset, checked_end[tp].offset)))
        return ranges

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return _tasks(divide([Range(tp, begin, until) for tp, begin, until in self.plan(start, end)],
                             self.options.min_partitions, self.options.max_records_per_partition),
                      self.planner.consistency_context())

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
        if overwrite:
            raise OptionError('save mode overwrite is not supported: a Kafka topic can only be appended to; use '
                              'mode("append") (Spark\'s Kafka sink refuses it too)')
        return BatchWriter(self._write_options(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter(self._write_options(schema))

