"""``read_table``: a range of a topic's offsets as one ``pyarrow.Table`` of Spark's Kafka source columns.

The range is resolved once, when the call starts: ``'earliest'`` is each partition's log start offset,
``'latest'`` its end offset as the consumer's ``isolation_level`` sees it (read_committed: the last stable
offset). Then each partition is read with the Spark source's read loop
(:func:`~kafka_kip.arrow.partition_reader.read_partition`), so the consumer's checks hold: a start given with a
leader epoch is validated before anything is fetched (KIP-320), a truncation found at the start or mid-read
raises ``TruncatedPartitionError`` naming the truncation point, and aborted transactions, transaction markers
and compacted gaps take no row.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
from kafka.errors import KafkaConfigurationError, LogTruncationError, OffsetOutOfRangeError
from kafka.structs import TopicPartition

from kafka_kip.arrow.columns import record_schema
from kafka_kip.arrow.partition_reader import read_partition
from kafka_kip.consumer.batches import BatchConsumer
from kafka_kip.errors import TruncatedPartitionError
from kafka_kip.protocol.constants import UNKNOWN_EPOCH
from kafka_kip.structs import OffsetAndMetadata

EARLIEST, LATEST = 'earliest', 'latest'
#: How long a partition's position may stay put before the read gives up (``poll_timeout_ms``).
DEFAULT_POLL_TIMEOUT_MS = 60_000
#: Settings read_table decides itself: it reads exact ranges without a group and raises on truncation.
_FIXED_CONFIGS = ('group_id', 'enable_auto_commit', 'auto_offset_reset', 'key_deserializer', 'value_deserializer')
#: Fetch sizes for bulk reads unless configured: a whole 1 MiB-batch-sized chunk of the log per request.
_DEFAULT_CONFIGS = {'max_partition_fetch_bytes': 8 << 20, 'fetch_max_bytes': 64 << 20}
#: Rows per chunk of the table (fewer, larger Arrow arrays than a Spark task's batches: less work per row)
TABLE_ROWS_PER_BATCH = 65536

Bound = str | Mapping[int, int | OffsetAndMetadata]


def read_table(bootstrap_servers: str | list[str], topic: str, partitions: Iterable[int] | None = None,
               start: Bound = EARLIEST, end: Bound = LATEST, *, poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS,
               **consumer_configs: Any) -> pa.Table:
    """The records of ``topic`` from ``start`` (inclusive) to ``end`` (exclusive) as a ``pyarrow.Table``.

    Columns (Spark's Kafka source, then ``leaderEpoch``): ``key`` binary, ``value`` binary, ``topic`` string,
    ``partition`` int32, ``offset`` int64, ``timestamp`` timestamp[us, UTC], ``timestampType`` int32 (0 create
    time, 1 log append time), ``headers`` list<struct<key string, value binary>> (null without headers),
    ``leaderEpoch`` int32. Rows are in partition order, then offset order.

    ``partitions``: partition numbers (default: every partition of the topic). ``start`` / ``end``:
    ``'earliest'``, ``'latest'``, or ``{partition: offset}`` (partitions left out take ``'earliest'`` /
    ``'latest'``); a start may be an ``OffsetAndMetadata`` carrying the leader epoch of the record before it (the
    last row's ``leaderEpoch`` of an earlier read), which is checked against the log first: a truncation raises
    ``TruncatedPartitionError``. ``poll_timeout_ms``: how long a partition may deliver nothing before
    ``KafkaTimeoutError``. Other keywords are kafka-python consumer settings (``isolation_level``,
    ``security_protocol``, ...).
    """
    if not isinstance(topic, str) or not topic:
        raise ValueError(f'topic must be a non-empty string, got {topic!r}')
    fixed = sorted(set(consumer_configs) & set(_FIXED_CONFIGS))
    if fixed:
        raise KafkaConfigurationError(f'read_table sets {", ".join(fixed)} itself (it reads exact offset ranges '
                                      'without a group and raises on truncation); leave them out')
    if isinstance(poll_timeout_ms, bool) or not isinstance(poll_timeout_ms, int) or poll_timeout_ms <= 0:
        raise ValueError(f'poll_timeout_ms must be a positive int, got {poll_timeout_ms!r}')
    consumer = BatchConsumer(bootstrap_servers=bootstrap_servers, group_id=None, enable_auto_commit=False,
                             auto_offset_reset='none', **{**_DEFAULT_CONFIGS, **consumer_configs})
    try:
        tps = _partitions(consumer, topic, partitions)
        earliest = consumer.beginning_offsets(tps)
        latest = consumer.end_offsets(tps)
        starts = _positions('start', start, tps, earliest, latest)
        ends = {tp: p.offset for tp, p in _positions('end', end, tps, earliest, latest).items()}
        _check_range(starts, ends, earliest, latest, consumer_configs.get('isolation_level'))
        schema = record_schema(with_headers=True)
        batches = []
        for tp in tps:
            try:
                batches.extend(read_partition(consumer, tp, starts[tp], ends[tp], schema, poll_timeout_ms,
                                              'read_table argument poll_timeout_ms', TABLE_ROWS_PER_BATCH))
            except LogTruncationError as exc:
                raise _truncated(exc, tp, starts[tp].offset) from exc
        return pa.Table.from_batches(batches, schema=schema)
    finally:
        consumer.close()


def _partitions(consumer: BatchConsumer, topic: str, requested: Iterable[int] | None) -> list[TopicPartition]:
    existing = consumer.partitions_for_topic(topic)
    if not existing:
        raise ValueError(f'topic {topic!r} does not exist (no partitions in the cluster metadata)')
    if requested is None:
        return [TopicPartition(topic, p) for p in sorted(existing)]
    if isinstance(requested, (str, bytes)) or not isinstance(requested, Iterable):
        raise ValueError(f'partitions must be a list of partition numbers or None (every partition), '
                         f'got {requested!r}')
    chosen = list(requested)
    for partition in chosen:
        if not _known('partitions', partition, existing):
            raise ValueError(f'partitions: topic {topic!r} has no partition {partition}; its partitions are '
                             f'{sorted(existing)}')
    if len(set(chosen)) != len(chosen):
        raise ValueError(f'partitions names a partition more than once: {chosen!r}')
    return [TopicPartition(topic, p) for p in sorted(chosen)]


def _known(argument: str, partition: Any, existing: Iterable[int]) -> bool:
    """Whether ``partition`` is in ``existing``; ValueError naming ``argument`` if it is not an int."""
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise ValueError(f'{argument}: a partition is an int, got {partition!r}')
    return partition in existing


def _positions(argument: str, bound: Bound, tps: list[TopicPartition], earliest: Mapping[TopicPartition, int],
               latest: Mapping[TopicPartition, int]) -> dict[TopicPartition, OffsetAndMetadata]:
    """``bound`` per partition of ``tps`` as offsets with the leader epoch to validate (unknown: -1)."""
    default = EARLIEST if argument == 'start' else LATEST
    named = {EARLIEST: earliest, LATEST: latest}
    if isinstance(bound, str):
        if bound not in named:
            raise ValueError(f"{argument} must be 'earliest', 'latest' or {{partition: offset}}, got {bound!r}")
        return {tp: OffsetAndMetadata(named[bound][tp], '', UNKNOWN_EPOCH) for tp in tps}
    if not isinstance(bound, Mapping):
        raise ValueError(f"{argument} must be 'earliest', 'latest' or {{partition: offset}}, got {bound!r}")
    read = sorted(tp.partition for tp in tps)
    for partition in bound:
        if not _known(argument, partition, read):
            raise ValueError(f'{argument}: partition {partition} is not read; the partitions read are {read}')
    out = {}
    for tp in tps:
        given = bound.get(tp.partition, default)
        if isinstance(given, str) and given in named:
            out[tp] = OffsetAndMetadata(named[given][tp], '', UNKNOWN_EPOCH)
            continue
        offset = given.offset if isinstance(given, OffsetAndMetadata) else given
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"{argument} of {tp.topic}-{tp.partition}: an offset is an int >= 0, an "
                             f"OffsetAndMetadata, 'earliest' or 'latest'; got {given!r}")
        if isinstance(given, OffsetAndMetadata):
            if argument == 'end' and given.leader_epoch not in (None, UNKNOWN_EPOCH):
                raise ValueError(f'end of {tp.topic}-{tp.partition}: an end is an offset; a leader epoch is only '
                                 f'checked at the start, got {given!r}')
            out[tp] = given
        else:
            out[tp] = OffsetAndMetadata(offset, '', UNKNOWN_EPOCH)
    return out


def _check_range(starts: Mapping[TopicPartition, OffsetAndMetadata], ends: Mapping[TopicPartition, int],
                 earliest: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                 isolation_level: str | None) -> None:
    """Every range within the log as it is now: nothing below the log start offset (gone), nothing past the
    end the consumer can read to (it would wait for records that may never come)."""
    end_name = 'last stable offset' if isolation_level == 'read_committed' else 'end offset'
    for tp, begin in starts.items():
        name = f'{tp.topic}-{tp.partition}'
        if begin.offset > ends[tp]:
            raise ValueError(f'start of {name} (offset {begin.offset}) is after its end (offset {ends[tp]})')
        if ends[tp] > latest[tp]:
            raise ValueError(f'end of {name} (offset {ends[tp]}) is past its {end_name} {latest[tp]}: at most '
                             f"{latest[tp]} (or 'latest')")
        if begin.offset < earliest[tp] and ends[tp] > begin.offset:
            raise OffsetOutOfRangeError(f'{name}: offsets {begin.offset}..{earliest[tp] - 1} are no longer in the log '
                                        f'(log start offset {earliest[tp]}: retention or DeleteRecords); start at '
                                        f"{earliest[tp]} or 'earliest'")


def _truncated(exc: LogTruncationError, tp: TopicPartition, start: int) -> TruncatedPartitionError:
    found = getattr(exc, 'truncated_offsets', None)
    if found is None:
        found = {t: None if o is None else o.offset for t, o in (exc.divergent_offsets or {}).items()}
    point = found.get(tp)
    where = 'at an unknown offset' if point is None else f'at offset {point}'
    return TruncatedPartitionError(found, message=f'{tp.topic}-{tp.partition}: the log was truncated {where} '
                                   f'(unclean leader election?) while read_table read it from offset {start}: '
                                   'records at and after the truncation point that were read or expected are '
                                   'gone or were replaced')


__all__ = ['EARLIEST', 'LATEST', 'read_table']
