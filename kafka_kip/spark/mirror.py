"""``spark-mirror``: the replicator as a Structured Streaming query, copying with the mirror's copy core.

The ``kafka-kip-mirror`` streaming source plans micro-batches exactly like ``kafka-kip`` (positions with
epochs in the checkpoint, checked before every batch, see :mod:`kafka_kip.spark.source`), but its tasks
do not return records: each task copies one source partition's offset range to the target with
:func:`kafka_kip.mirror.copy.copy_range` -- the same partition-range copy code ``kafka-kip mirror`` runs --
raw record batches written at their source offsets (KIP-391), and returns one summary row.

Exactly once without transactions: a micro-batch's ranges are in the checkpoint before its tasks run, so
a retried task or a batch re-run after a restart copies the same ranges again, and the copier treats
the target's ``INVALID_PRODUCE_OFFSET`` as "already there" (it resumes from the target's end).

Rows: ``topic, partition, startOffset, endOffset, records, bytes, incidents, mode, targetEnd, sourceEnd``
(``records``/``bytes`` that this task wrote; ``incidents`` the copier's reports, e.g. records the target keeps
after a truncation; ``mode`` the partition's offset mode; ``targetEnd`` the target offset after its last write,
``sourceEnd`` the source's high watermark as last fetched). A partition the copier stops fails its task
(:class:`CopyStoppedError`, or ``TruncatedPartitionError``). :func:`start_mirror` observes the rows in the query's
progress (:mod:`kafka_kip.spark.mirror_progress`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka.net.selector import NetworkSelector
from kafka.structs import TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from kafka_kip.errors import KafkaError, TruncatedPartitionError
from kafka_kip.metadata import KipConnectionManager
from kafka_kip.mirror.client import CONNECTION_CONFIGS, ClusterClient
from kafka_kip.mirror.copy import copy_range
from kafka_kip.mirror.state import Incident
from kafka_kip.mirror.topics import copied_configs, describe_topics, ensure_topic
from kafka_kip.policies import OFFSET_MODES, parse_offset_mode
from kafka_kip.spark.options import OptionError, ReadOptions, client_configs
from kafka_kip.spark.records import OffsetRange, with_context
from kafka_kip.spark.settings import MIRROR_OPTIONS, SOURCE_OPTIONS
from kafka_kip.spark.source import StreamReader
from kafka_kip.spark.stopping import stoppable

if TYPE_CHECKING:  # the driver's side; Python workers import this module to run tasks and need none of it
    from kafka_kip.spark.mirror_query import MirrorQuery

log = logging.getLogger(__name__)

MIRROR_FORMAT = 'kafka-kip-mirror'
MIRROR_SCHEMA = StructType([
    StructField('topic', StringType()), StructField('partition', IntegerType()),
    StructField('startOffset', LongType()), StructField('endOffset', LongType()),
    StructField('records', LongType()), StructField('bytes', LongType()),
    StructField('incidents', ArrayType(StringType())), StructField('mode', StringType()),
    StructField('targetEnd', LongType()), StructField('sourceEnd', LongType()),
])
#: What ``target.*`` options may set: the copier's connection settings.
_CONNECTION_DEFAULTS = {k: v for k, v in KipConnectionManager.DEFAULT_CONFIG.items() if k in CONNECTION_CONFIGS}
#: The ``kafka-kip-mirror`` source's options beyond the read options and ``target.*``: ``offsetMode``, ``topicPrefix``.
_OWN_OPTIONS = tuple(s.option for s in MIRROR_OPTIONS if s.option and s.option.lower() not in SOURCE_OPTIONS.by_option
                     and not s.option.startswith(('kafka.', 'target.')))
_DEFAULT = MIRROR_OPTIONS.defaults()
_NOT_FOR_MIRROR = {
    'maxrecordsperpartition': 'maxRecordsPerPartition (a partition is copied in order, by one task per batch)',
    'includeheaders': 'includeHeaders (records are copied as they are)',
    'endingoffsets': 'endingOffsets (the mirror is a streaming query)',
    'minpartitions': 'minPartitions (a partition is copied in order, by one task per batch)',
    'groupidprefix': 'groupIdPrefix (the copier reads without a consumer group)',
    'kafka.group.id': 'kafka.group.id (the copier reads without a consumer group)',
}


@dataclass(frozen=True)
class MirrorOptions:
    """``kafka-kip-mirror`` options: the ``kafka-kip`` read options for the source, plus the target."""

    source: ReadOptions
    target_bootstrap_servers: str
    target_configs: Mapping[str, Any]
    offset_mode: str
    topic_prefix: str
    offset_map_topic: str

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> MirrorOptions:
        for key, what in _NOT_FOR_MIRROR.items():
            if key in options:
                raise OptionError(f'option {what} is not supported by the {MIRROR_FORMAT} source')
        source = ReadOptions.parse(options, extra=_OWN_OPTIONS, extra_prefixes=('target.',))
        target = str(options.get('target.bootstrap.servers', '')).strip()
        if not target:
            raise OptionError('option target.bootstrap.servers is required (the cluster to copy to)')
        try:
            mode = parse_offset_mode(MIRROR_OPTIONS.option(options, 'offset_mode'))
        except ValueError:
            raise OptionError(f'option offsetMode must be one of {", ".join(OFFSET_MODES)} (as kafka-kip mirror; '
                              f"'off' is translated), got {options['offsetmode']!r}") from None
        return cls(source.for_stream(), target,
                   client_configs(options, 'target.', _CONNECTION_DEFAULTS), mode,
                   MIRROR_OPTIONS.option(options, 'topic_prefix', OptionError),
                   MIRROR_OPTIONS.option(options, 'offset_map_topic', OptionError))

    @property
    def source_configs(self) -> dict[str, Any]:
        """The source's ``kafka.*`` settings that the copier's connections take."""
        return {k: v for k, v in self.source.consumer_configs.items() if k in CONNECTION_CONFIGS}

    def target_tp(self, tp: TopicPartition) -> TopicPartition:
        return TopicPartition(self.topic_prefix + tp.topic, tp.partition)


class CopyStoppedError(KafkaError):
    """The copier stopped a partition (an incident other than a truncation); the message is the incident's text.

    The task fails, so its batch is not committed: a restart copies the range again."""


def incident_text(incident: Incident) -> str:
    """One line for an :class:`~kafka_kip.mirror.copy.Incident` (what the ``incidents`` column holds)."""
    return f'{incident.kind}: {incident.message}'


class MirrorStreamReader(StreamReader):
    """Plans like :class:`StreamReader`; each task copies its range instead of returning its records."""

    def __init__(self, options: MirrorOptions, schema: StructType) -> None:
        super().__init__(options.source, schema)
        self.mirror = options
        self._shaped: dict[str, int] = {}  # target topics known to have the source's partition count
        self._target_context = b''  # the target's consistency context after shaping topics (KIP-1243)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        ranges = self.plan(start, end)
        counts: dict[str, int] = {}
        for tp, _, _ in ranges:
            counts[tp.topic] = max(counts.get(tp.topic, 0), tp.partition + 1)
        self._shape_targets(counts)
        context = self.planner.consistency_context()
        return [OffsetRange(tp, begin, until, consistency_context=context, target_consistency_context=self._target_context)
                for tp, begin, until in ranges if until > begin.offset]

    def _shape_targets(self, counts: Mapping[str, int]) -> None:
        """Create missing target topics (and grow short ones) like their sources, before tasks write.

        ``counts``: the partition count each source topic has at least (from the batch's ranges).
        """
        if all(self._shaped.get(name, 0) >= count for name, count in counts.items()):
            return
        net = NetworkSelector()
        source = ClusterClient('source', self.options.bootstrap_servers, net, **self.mirror.source_configs)
        target = ClusterClient('target', self.mirror.target_bootstrap_servers, net, **self.mirror.target_configs)
        try:
            source.bootstrap()
            shapes = {name: info for name, info in describe_topics(source, sorted(counts)).items()
                      if self._shaped.get(name) != info.partitions}
            if not shapes:
                return
            target.bootstrap()
            prefix = self.mirror.topic_prefix
            existing = describe_topics(target, [prefix + name for name in shapes])
            for name, info in shapes.items():
                done = ensure_topic(target, prefix + name, info, copied_configs(source, name), existing)
                if done:
                    log.info('target topic %s', done)
                self._shaped[name] = info.partitions
            target_context = target.manager.consistency.store.read()
            if not target_context.is_unknown():  # the tasks write to the topics as created, through any broker
                self._target_context = target_context.to_bytes()
        finally:
            source.close()
            target.close()
            net.close()

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, OffsetRange)
        mirror, tp = self.mirror, partition.tp
        result = copy_range(self.options.bootstrap_servers, mirror.target_bootstrap_servers, tp,
                            partition.start.offset, partition.until, target_tp=mirror.target_tp(tp),
                            offset_mode=mirror.offset_mode, offset_map_topic=mirror.offset_map_topic,
                            on_truncation=self.options.on_truncation,
                            source_configs=with_context(mirror.source_configs, partition.consistency_context),
                            target_configs=with_context(mirror.target_configs, partition.target_consistency_context))
        for incident in result.incidents:
            if incident.stopped and incident.kind == 'truncation':
                raise TruncatedPartitionError({tp: incident.truncated_at}, message=incident.message)
            if incident.stopped:
                raise CopyStoppedError(incident_text(incident))
        progress = result.progress
        yield (tp.topic, tp.partition, partition.start.offset, partition.until, progress.records, progress.bytes,
               [incident_text(i) for i in result.incidents], progress.mode, progress.target_end, progress.source_end)


class KafkaKipMirrorDataSource(DataSource):
    """Format ``kafka-kip-mirror`` (streaming only): copies source partitions to the target, see module doc."""

    @classmethod
    def name(cls) -> str:
        return MIRROR_FORMAT

    def schema(self) -> StructType:
        MirrorOptions.parse(self.options)  # load() checks every option
        return MIRROR_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MirrorStreamReader(MirrorOptions.parse(self.options), schema)


# -- the query ----------------------------------------------------------------------------------------


def start_mirror(spark: Any, source: str, target: str, topics: str, checkpoint: str, *,
                 starting_offsets: str = _DEFAULT['starting_offsets'], on_truncation: str = _DEFAULT['on_truncation'],
                 max_offsets_per_trigger: int | None = None, offset_mode: str = _DEFAULT['offset_mode'],
                 topic_prefix: str = _DEFAULT['topic_prefix'], offset_map_topic: str = _DEFAULT['offset_map_topic'],
                 groups: str | None = None, group_sync_interval_ms: int = _DEFAULT['group_sync_interval_ms'],
                 available_now: bool = False, trigger_interval_s: float = _DEFAULT['trigger_interval'],
                 show_batches: bool = False, extra_options: Mapping[str, str] | None = None,
                 foreach_batch: Callable[[Any, int], None] | None = None,
                 on_incident: Callable[[Incident], None] | None = None) -> MirrorQuery:
    """Start the replication query on ``spark``; returns a :class:`~kafka_kip.spark.mirror_query.MirrorQuery`
    (the ``StreamingQuery``'s methods, plus the group sync: call its ``stop()`` or ``finish()``).

    ``topics`` is a regex on the whole source topic name (as ``kafka-kip mirror --topics``); ``groups`` a regex
    of source consumer groups whose committed offsets are synced to the target every ``group_sync_interval_ms``
    (:mod:`kafka_kip.spark.groups`).
    ``extra_options`` are more ``kafka.*`` (source) / ``target.*`` client options. ``show_batches`` prints
    each micro-batch's summary rows (Spark's console sink) instead of discarding them (``noop``).
    ``available_now`` copies what the source has when the query starts, then stops.
    ``foreach_batch(frame, batch_id)`` receives each micro-batch's summary rows instead (it runs wrapped in
    :func:`~kafka_kip.spark.stopping.stoppable`, so stopping the query mid-batch ends it cleanly).
    ``on_incident`` is called on the driver with each incident the copier reported, once its batch's progress is in.
    """
    from kafka_kip.spark.groups import QueryGroupSync
    from kafka_kip.spark.mirror_progress import CopyLedger, observe_copies
    from kafka_kip.spark.mirror_query import MirrorQuery

    spark.dataSource.register(KafkaKipMirrorDataSource)
    if groups is not None:
        MIRROR_OPTIONS['groups'].parse(groups, 'groups (--group-sync)', OptionError)
    given = {'source': source, 'target': target, 'topics': topics, 'starting_offsets': starting_offsets,
             'on_truncation': on_truncation, 'offset_mode': offset_mode, 'topic_prefix': topic_prefix,
             'offset_map_topic': offset_map_topic}
    if max_offsets_per_trigger:
        given['max_offsets_per_trigger'] = max_offsets_per_trigger
    options = {MIRROR_OPTIONS[name].option: str(value) for name, value in given.items()}
    options.update(extra_options or {})
    writer = (observe_copies(spark.readStream.format(MIRROR_FORMAT).options(**options).load())
              .writeStream.queryName('kafka_kip_spark_mirror').option('checkpointLocation', checkpoint))
    if foreach_batch is not None:
        writer = writer.foreachBatch(stoppable(foreach_batch))
    elif show_batches:
        writer = writer.format('console').option('truncate', 'false').option('numRows', '1000')
    else:
        writer = writer.format('noop')
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(
        processingTime=f'{trigger_interval_s} seconds')
    query = writer.start()
    ledger = CopyLedger(parse_offset_mode(offset_mode), topic_prefix, on_incident)
    group_sync = None
    if groups is not None:
        parsed = MirrorOptions.parse({key.lower(): value for key, value in options.items()})
        group_sync = QueryGroupSync(source, target, groups, topics, topic_prefix=topic_prefix,
                                    offset_mode=parsed.offset_mode, offset_map_topic=offset_map_topic,
                                    interval_ms=group_sync_interval_ms, source_configs=parsed.source_configs,
                                    target_configs=parsed.target_configs)
        group_sync.start()
    return MirrorQuery(spark, query, ledger, group_sync)


def failure_text(exc: BaseException) -> str:
    """The kafka-kip error inside a Spark exception (last ``kafka_kip.errors.X: ...`` line), else ``str(exc)``."""
    lines = [line.strip() for line in str(exc).splitlines()]
    found = [line for line in lines if line.startswith(('kafka_kip.errors.', 'kafka.errors.',
                                                        'kafka_kip.spark.options.OptionError',
                                                        'kafka_kip.spark.mirror.CopyStoppedError'))]
    return found[-1] if found else str(exc)

