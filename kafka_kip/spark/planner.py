"""Driver-side planning: which partitions, from where to where, and whether a stored position still holds.

:class:`SourcePlanner` answers the questions Spark asks a source between tasks, with one admin client
(metadata and ListOffsets, each answer carrying the leader epoch) and, only when a leader epoch moved, a
consumer that validates positions the KIP-320 way (``seek`` with the leader epoch, then ``position``:
OffsetForLeaderEpoch against the current leader). Stored positions follow the consumer's KIP-232 rule
(:func:`kafka_kip.consumer.incarnation.position_verdict`): a position of another incarnation of the partition
(deleted and recreated, or stored on another cluster: another topic id) raises ``InvalidPartitionEpochError``;
one whose partition epoch or topic id this cluster's metadata has not reached is waited for (a warning names
it) at most ``offset_epoch_wait_ms`` (option ``kafka.offset.epoch.wait.ms``), then raises it too.
"""
from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kafka.errors import KafkaError, KafkaTimeoutError, LogTruncationError, OffsetOutOfRangeError
from kafka.protocol.consumer.offsets import IsolationLevel, OffsetSpec
from kafka.structs import TopicPartition

from kafka_kip.admin import KafkaAdminClient
from kafka_kip.consumer import KafkaConsumer
from kafka_kip.consumer.fetcher import DEFAULT_OFFSET_EPOCH_WAIT_MS
from kafka_kip.consumer.incarnation import MetadataVerdict, describe_epochs, position_verdict
from kafka_kip.errors import InvalidPartitionEpochError, TruncatedPartitionError
from kafka_kip.metadata.freshness import Epochs
from kafka_kip.policies import CLOSEST, consumer_reset_policy
from kafka_kip.protocol.constants import UNKNOWN_EPOCH
from kafka_kip.protocol.retry import RetryPolicy
from kafka_kip.spark.options import (
    ASSIGN,
    EARLIEST,
    EARLIEST_OFFSET,
    LATEST,
    LATEST_OFFSET,
    NO_MATCH_ERROR,
    SUBSCRIBE,
    OptionError,
    PositionsSpec,
    Subscription,
    TimestampSpec,
)
from kafka_kip.spark.positions import Position, Positions

log = logging.getLogger(__name__)
T = TypeVar('T')


@dataclass(frozen=True)
class PartitionInfo:
    """A partition as the cluster metadata describes it now."""

    leader_epoch: int
    partition_epoch: int
    topic_id: str | None


_RESUME_HINT = ('If this cluster holds the same records at the same offsets (a mirror that kept them), start a new '
                'query (new checkpoint) with startingOffsets at those offsets; otherwise start a new query.')


def _uuid(topic_id: str | None) -> uuid.UUID | None:
    return None if topic_id is None else uuid.UUID(topic_id)


def _verdict(position: Position, info: PartitionInfo) -> MetadataVerdict:
    return position_verdict(Epochs(info.leader_epoch, info.partition_epoch), _uuid(info.topic_id),
                            Epochs(position.leader_epoch, position.partition_epoch), _uuid(position.topic_id))


def _tied(position: Position) -> bool:
    """The position names its incarnation (partition epoch or topic id), not just a leader epoch."""
    return position.partition_epoch >= 0 or position.topic_id is not None


def _held(tp: TopicPartition, position: Position) -> str:
    epochs = describe_epochs(Epochs(position.leader_epoch, position.partition_epoch), _uuid(position.topic_id))
    return f'{tp.topic}-{tp.partition} at offset {position.offset} with epochs ({epochs})'


def _here(info: PartitionInfo) -> str:
    return describe_epochs(Epochs(info.leader_epoch, info.partition_epoch), _uuid(info.topic_id))


def _check_covers(name: str, requested: Mapping[TopicPartition, Any],
                  described: Mapping[TopicPartition, PartitionInfo]) -> None:
    """Spark's rule for per-partition options: exactly the subscribed partitions, each named once."""
    missing = sorted(set(described) - set(requested))
    if missing:
        raise OptionError(f'option {name} must give a value for every subscribed partition; missing '
                          + ', '.join(f'{tp.topic}-{tp.partition}' for tp in missing))
    unknown = sorted(set(requested) - set(described))
    if unknown:
        raise OptionError(f'option {name} names partitions that are not subscribed or do not exist: '
                          + ', '.join(f'{tp.topic}-{tp.partition}' for tp in unknown))


class SourcePlanner:
    """Metadata, offsets and position checks for one source cluster (used on the Spark driver).

    ``consumer_configs`` are kafka-python consumer settings (from ``kafka.*`` options); the admin client
    gets those it understands. A metadata or offsets request that fails is retried as Spark's
    ``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs`` say: ``fetch_attempts`` attempts in all,
    ``retry_interval_ms`` apart, each with a new admin client. Close it when done.
    """

    def __init__(self, bootstrap_servers: str, consumer_configs: Mapping[str, Any], subscription: Subscription,
                 on_truncation: str, timeout_ms: int = 60_000, fetch_attempts: int = 3,
                 retry_interval_ms: int = 1000) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.consumer_configs = dict(consumer_configs)
        self.subscription = subscription
        self.on_truncation = on_truncation
        self.timeout_ms = timeout_ms
        self.fetch_attempts = fetch_attempts
        self.retry_interval_ms = retry_interval_ms
        # Spark's semantics: a number of attempts a fixed interval apart, whatever the error
        interval_s = retry_interval_ms / 1000
        self._fetch_retry = RetryPolicy(timeout_s=math.inf, max_attempts=fetch_attempts, backoff_s=interval_s,
                                        max_backoff_s=interval_s, jitter=0.0, also_retry=(KafkaError,))
        self._admin: KafkaAdminClient | None = None

    @property
    def admin(self) -> KafkaAdminClient:
        if self._admin is None:
            configs = {k: v for k, v in self.consumer_configs.items() if k in KafkaAdminClient.DEFAULT_CONFIG}
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **configs)
        return self._admin

    def consistency_context(self) -> bytes:
        """The KIP-1243 consistency context the planning read metadata at, as bytes for the tasks (empty before
        any planning, or where the brokers give no token)."""
        if self._admin is None:
            return b''
        context = self._admin._manager.consistency.store.read()
        return b'' if context.is_unknown() else context.to_bytes()

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def _retrying(self, what: str, request: Callable[[], T]) -> T:
        attempts = self._fetch_retry.begin(what)
        while True:
            try:
                return request()
            except KafkaError as exc:
                if not attempts.may_retry(exc):
                    raise
                log.warning('%s failed (attempt %d of %d, option fetchOffset.numRetries): %r; retrying in %d ms',
                            what, attempts.count, self.fetch_attempts, exc, self.retry_interval_ms)
                self.close()
                attempts.wait()

    # -- metadata and offsets -----------------------------------------------------------------------

    def describe(self) -> dict[TopicPartition, PartitionInfo]:
        """The subscribed partitions that exist now (a missing subscribed topic has none)."""
        return self._retrying('describing the source topics', self._describe)

    def _describe(self) -> dict[TopicPartition, PartitionInfo]:
        sub = self.subscription
        if sub.kind == ASSIGN:
            wanted: list[str] | None = sorted({tp.topic for tp in sub.partitions})
        elif sub.kind == SUBSCRIBE:
            wanted = list(sub.topics)
        else:
            wanted = None
        found: dict[TopicPartition, PartitionInfo] = {}
        for topic in self.admin.describe_topics(wanted):
            name = topic['name']
            if topic['error_code'] or not sub.matches(name) or (wanted is None and topic.get('is_internal')):
                continue
            topic_id = topic.get('topic_id')
            topic_id = None if topic_id in (None, '00000000-0000-0000-0000-000000000000') else str(topic_id)
            for p in topic['partitions']:
                tp = TopicPartition(name, p['partition_index'])
                if sub.kind == ASSIGN and tp not in sub.partitions:
                    continue
                found[tp] = PartitionInfo(p.get('leader_epoch', UNKNOWN_EPOCH), p.get('partition_epoch', UNKNOWN_EPOCH), topic_id)
        return found

    def _list(self, specs: Mapping[TopicPartition, int], described: Mapping[TopicPartition, PartitionInfo]) -> Positions:
        """ListOffsets for ``specs`` (an OffsetSpec or a timestamp per partition); offset -1 where none matched."""
        if not specs:
            return {}
        isolation = IsolationLevel.READ_COMMITTED if self.consumer_configs.get(
            'isolation_level') == 'read_committed' else IsolationLevel.READ_UNCOMMITTED
        answer = self._retrying('listing source offsets', lambda: self.admin.list_partition_offsets(
            dict(specs), isolation_level=isolation, timeout_ms=self.timeout_ms))
        return {tp: Position(found.offset, found.leader_epoch if found.leader_epoch is not None else UNKNOWN_EPOCH,
                             described[tp].partition_epoch, described[tp].topic_id)
                for tp, found in answer.items()}

    def list_offsets(self, described: Mapping[TopicPartition, PartitionInfo], which: str) -> Positions:
        """Earliest or latest positions of ``described`` partitions, with the epochs ListOffsets reports."""
        spec = OffsetSpec.EARLIEST if which == EARLIEST else OffsetSpec.LATEST
        return self._list({tp: spec for tp in described}, described)

    def resolve(self, spec: PositionsSpec, described: Mapping[TopicPartition, PartitionInfo]) -> Positions:
        """The positions ``spec`` (a start or end option) names for the ``described`` partitions."""
        if isinstance(spec, TimestampSpec):
            return self._by_timestamp(spec, described)
        if spec.default is not None:
            return self.list_offsets(described, spec.default)
        requested = dict(spec.by_partition or {})
        _check_covers(spec.name, requested, described)
        earliest = self.list_offsets({tp: described[tp] for tp, r in requested.items()
                                      if r.offset == EARLIEST_OFFSET}, EARLIEST)
        latest = self.list_offsets({tp: described[tp] for tp, r in requested.items()
                                    if r.offset == LATEST_OFFSET}, LATEST)
        positions = {**earliest, **latest}
        for tp, r in requested.items():
            if r.offset >= 0:
                info = described[tp]
                positions[tp] = Position(r.offset, r.leader_epoch, info.partition_epoch, info.topic_id)
        return positions

    def _by_timestamp(self, spec: TimestampSpec, described: Mapping[TopicPartition, PartitionInfo]) -> Positions:
        """Per partition the first offset whose record timestamp is >= the given one (ListOffsets by time)."""
        if spec.by_partition is not None:
            _check_covers(spec.name, spec.by_partition, described)
            stamps = dict(spec.by_partition)
        else:
            stamps = {tp: spec.timestamp for tp in described}
        found = self._list(stamps, described)
        unmatched = sorted(tp for tp, p in found.items() if p.offset < 0)
        if unmatched and spec.no_match == NO_MATCH_ERROR:
            raise OptionError(f'option {spec.name}: no record at or after the timestamp in '
                              + ', '.join(f'{tp.topic}-{tp.partition} (timestamp {stamps[tp]})' for tp in unmatched)
                              + '; set startingOffsetsByTimestampStrategy=latest to start such partitions at their '
                              'latest offset')
        return {**found, **self.list_offsets({tp: described[tp] for tp in unmatched}, LATEST)}

    # -- checking stored positions ----------------------------------------------------------------

    def check(self, positions: Mapping[TopicPartition, Position],
              described: Mapping[TopicPartition, PartitionInfo]) -> Positions:
        """Validate positions stored earlier against the cluster now; return them, reset where allowed.

        Raises ``InvalidPartitionEpochError`` for positions of partitions deleted or recreated since, and
        ``TruncatedPartitionError`` (onTruncation=fail) for positions above a truncation point; with
        onTruncation=closest such a position becomes the truncation point.
        """
        gone = {tp: p.partition_epoch for tp, p in positions.items()
                if tp not in described and self.subscription.matches(tp.topic)}
        if gone:
            raise InvalidPartitionEpochError(
                gone, 'source partitions were deleted or recreated since these positions were stored: '
                + ', '.join(f'{tp.topic}-{tp.partition} at offset {positions[tp].offset}' for tp in sorted(gone))
                + ' (their offsets belong to the old partition); start a new query (new checkpoint)')
        described = self._await_epochs(positions, described)
        stale = {tp: p for tp, p in positions.items()
                 if tp in described and 0 <= p.leader_epoch < described[tp].leader_epoch}
        checked = dict(positions)
        if stale:
            checked.update(self._validate(stale, described))
        return checked

    def _await_epochs(self, positions: Mapping[TopicPartition, Position],
                      described: Mapping[TopicPartition, PartitionInfo]) -> Mapping[TopicPartition, PartitionInfo]:
        """``described``, or a newer description in which every position tied to an incarnation is caught up.

        Raises InvalidPartitionEpochError for positions of another incarnation, and for those still ahead of
        this cluster's metadata after ``offset_epoch_wait_ms``.
        """
        limit_ms = self.consumer_configs.get('offset_epoch_wait_ms', DEFAULT_OFFSET_EPOCH_WAIT_MS)
        deadline = time.monotonic() + limit_ms / 1000
        warned: set[TopicPartition] = set()
        while True:
            verdicts = {tp: _verdict(p, described[tp]) for tp, p in positions.items() if tp in described}
            other = sorted(tp for tp, v in verdicts.items() if v is MetadataVerdict.RECREATED)
            if other:
                raise InvalidPartitionEpochError({tp: positions[tp].partition_epoch for tp in other}, '; '.join(
                    f"{_held(tp, positions[tp])} belongs to another incarnation of the partition than this cluster's "
                    f'({_here(described[tp])}): the source topic was deleted and recreated, or the positions were '
                    'stored on another cluster' for tp in other) + '. ' + _RESUME_HINT)
            ahead = sorted(tp for tp, v in verdicts.items() if v is MetadataVerdict.BEHIND and _tied(positions[tp]))
            if not ahead:
                return described
            if time.monotonic() >= deadline:
                raise InvalidPartitionEpochError({tp: positions[tp].partition_epoch for tp in ahead}, '; '.join(
                    f"{_held(tp, positions[tp])}: this cluster's metadata has not reached those epochs within "
                    f'offset_epoch_wait_ms={limit_ms} ({_here(described[tp])}): the positions were stored on another '
                    'cluster, or the metadata is stuck' for tp in ahead) + '. ' + _RESUME_HINT)
            for tp in set(ahead) - warned:
                warned.add(tp)
                log.warning("Waiting until this cluster's metadata reaches the epochs of %s (it has %s); "
                            'InvalidPartitionEpochError if it does not within offset_epoch_wait_ms=%d',
                            _held(tp, positions[tp]), _here(described[tp]), limit_ms)
            time.sleep(self.consumer_configs.get('retry_backoff_ms', 100) / 1000)
            described = {**described, **self.describe()}

    def _validate(self, positions: Positions, described: Mapping[TopicPartition, PartitionInfo]) -> Positions:
        reset = consumer_reset_policy(self.on_truncation)
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset=reset, **self.consumer_configs)
        try:
            consumer.assign(list(positions))
            for topic in {tp.topic for tp in positions}:
                consumer.partitions_for_topic(topic)  # metadata first: validation needs the current epochs
            for tp, position in positions.items():
                consumer.seek(tp, position.seek_target())
            try:
                offsets = {tp: consumer.position(tp, timeout_ms=self.timeout_ms) for tp in positions}
                # position() caches a truncation it found for the next call; make it surface now.
                consumer.position(next(iter(positions)), timeout_ms=self.timeout_ms)
            except LogTruncationError as exc:
                raise truncation_error(exc, positions) from exc
        finally:
            consumer.close()
        out = {}
        for tp, offset in offsets.items():
            if offset is None:
                raise KafkaTimeoutError(f'could not validate the position of {tp.topic}-{tp.partition} '
                                        f'within {self.timeout_ms} ms')
            old = positions[tp]
            if offset == old.offset:
                out[tp] = old
                continue
            log.warning('%s-%d: source log truncated at offset %d, below the stored position %d (leader epoch %d); '
                        'continuing from %d (onTruncation=closest)', tp.topic, tp.partition, offset, old.offset,
                        old.leader_epoch, offset)
            info = described[tp]
            out[tp] = Position(offset, info.leader_epoch, info.partition_epoch, info.topic_id)
        return out


    def check_retained(self, positions: Mapping[TopicPartition, Position],
                       described: Mapping[TopicPartition, PartitionInfo]) -> Positions:
        """Positions below their partition's log start offset (records deleted by retention or DeleteRecords).

        Spark's ``failOnDataLoss``: with onTruncation=fail such a position raises ``OffsetOutOfRangeError``
        naming the lost offsets; with closest it moves to the log start offset, with a warning naming them.
        """
        earliest = self.list_offsets({tp: described[tp] for tp in positions if tp in described}, EARLIEST)
        lost = sorted(tp for tp, p in positions.items() if tp in earliest and p.offset < earliest[tp].offset)
        if not lost:
            return dict(positions)
        text = '; '.join(f'{tp.topic}-{tp.partition}: offsets {positions[tp].offset}..{earliest[tp].offset - 1} lost '
                         f'(log start offset {earliest[tp].offset}, position was {positions[tp].offset})' for tp in lost)
        if self.on_truncation != CLOSEST:
            raise OffsetOutOfRangeError(f'source records are no longer in the log (retention or DeleteRecords): {text}. '
                                        'Set failOnDataLoss=false (or onTruncation=closest) to continue from the log '
                                        'start offset.')
        log.warning('source records are no longer in the log (retention or DeleteRecords): %s; continuing from the '
                    'log start offset (failOnDataLoss=false / onTruncation=closest)', text)
        return {**positions, **{tp: earliest[tp] for tp in lost}}

def truncation_error(exc: LogTruncationError, positions: Mapping[TopicPartition, Position]) -> TruncatedPartitionError:
    """A ``TruncatedPartitionError`` naming the lost offset ranges (truncation point up to the position)."""
    found = getattr(exc, 'truncated_offsets', None)
    if found is None:
        found = {tp: None if o is None else o.offset for tp, o in (exc.divergent_offsets or {}).items()}
    parts = []
    for tp in sorted(found):
        point, position = found[tp], positions.get(tp)
        upto = '?' if position is None else position.offset
        if point is None:
            parts.append(f'{tp.topic}-{tp.partition}: truncated below offset {upto} (divergence point unknown)')
        else:
            parts.append(f'{tp.topic}-{tp.partition}: offsets {point}..{upto if upto == "?" else upto - 1} lost '
                         f'(log truncated at {point}, position was {upto})')
    return TruncatedPartitionError(found, message='source log truncated (unclean leader election?): '
                                   + '; '.join(parts) + '. Set failOnDataLoss=false (or onTruncation=closest) to '
                                   'continue from the truncation point.')

