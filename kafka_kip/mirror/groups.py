"""Group offset sync: committed offsets of chosen source groups, translated exactly to the target.

A committed source offset is translated by the copier (:meth:`kafka_kip.mirror.copy.Copier.translate`):
to the target offset of the first copied record at or after it -- the same number where offsets are
kept (broker and checked modes), through the offset map in translated mode (MirrorMaker 2 keeps an
offset-syncs topic and translates approximately). So a group that fails over reads exactly the next
record: none twice, none skipped. The leader epoch changes too: a committed leader epoch is checked
against the epoch history of the cluster it is used on (KIP-320), so the target commit carries the
*target's* epoch of the record before the offset, read from the target log. Like MirrorMaker 2, the sync

* only commits offsets whose records are already on the target (never beyond what is copied),
* never moves a target group's offset backwards, and
* leaves alone groups that have active members on the target (the consumers there own their offsets).

Groups of both protocols are synced alike: ListGroups lists classic and KIP-848 consumer groups, their offsets
are read and committed the same way (an offset commit without member or epoch, which both kinds accept while
they have no members), and a target group's state comes from DescribeGroups, or from ConsumerGroupDescribe for a
KIP-848 group (DescribeGroups answers GROUP_ID_NOT_FOUND, "not a classic group", for those).

A group whose sync fails is reported in :attr:`GroupSyncResult.failed` (retried at the next round).

The KIP-320 commit timestamp travels too, and the target's KIP-232 partition epoch is attached where the
target coordinator advertises ``kip.232``.
"""
from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.mirror import answers
from kafka_kip.mirror.batches import iter_batches
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.protocol import constants, requests
from kafka_kip.protocol.features import KIP_232
from kafka_kip.protocol.requests import OffsetCommitPartition
from kafka_kip.protocol.retry import RetryPolicy

_INACTIVE_STATES = frozenset({'Empty', 'Dead'})
#: The last round of a run (the mirror's, a query's) retries retriable errors (no coordinator yet) this long.
LAST_ROUND_RETRY_S = 30.0
#: A group's sync retries retriable errors (no coordinator yet, ...) until the round's deadline (``retry_for_s``).
_SYNC_RETRY = RetryPolicy(timeout_s=0.0, backoff_s=0.1, max_backoff_s=1.0)
#: Listing the source groups also retries a broker the metadata still names but that left (the deadline: the
#: round's); each attempt waits for a metadata refresh instead of a backoff.
_LIST_RETRY = RetryPolicy(timeout_s=0.0, also_retry=(Errors.UnknownBrokerIdError,))
log = logging.getLogger(__name__)


class CommittedOffset(NamedTuple):
    """A committed offset as read from a group coordinator."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int = -1


@dataclass
class GroupSyncResult:
    """One sync round: what was committed on the target and what was left, with the reason."""

    committed: dict[str, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # group ('*': listing the groups) -> what failed
    synced_at: dict[str, float] = field(default_factory=dict)  # group -> when it was last synced (monotonic s)
    lag: dict[str, int] = field(default_factory=dict)  # group -> source records its target commit does not cover

    def merge(self, later: GroupSyncResult) -> None:
        """Take in a later round: its commits and sync times added, its skipped and failed groups instead."""
        for group, offsets in later.committed.items():
            self.committed.setdefault(group, {}).update(offsets)
        self.synced_at.update(later.synced_at)
        self.lag.update(later.lag)
        self.skipped = dict(later.skipped)
        self.failed = dict(later.failed)

    def snapshot(self) -> GroupSyncResult:
        """A copy that later rounds do not change."""
        return GroupSyncResult({group: dict(offsets) for group, offsets in self.committed.items()},
                               dict(self.skipped), dict(self.failed), dict(self.synced_at), dict(self.lag))

    def ages(self, now: float) -> dict[str, float]:
        """Seconds since each group was last synced."""
        return {group: round(now - at, 3) for group, at in self.synced_at.items()}

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        return {
            'committed': {group: {f'{tp.topic}-{tp.partition}': c.offset for tp, c in offsets.items()}
                          for group, offsets in self.committed.items()},
            'skipped': dict(self.skipped),
            'failed': dict(self.failed),
            'sync_age_seconds': self.ages(time.monotonic() if now is None else now),
            'lag': dict(self.lag),
        }


#: ``translate(source partition, source offset)``: the target partition and offset, None if not copied.
Translate = Callable[[TopicPartition, int], 'tuple[TopicPartition, int] | None']
#: ``copied_to(source partition)``: every source offset below it is on the target (-1 unknown).
CopiedTo = Callable[[TopicPartition], int]


def find_coordinator(client: ClusterClient, group: str) -> int:
    """The node coordinating ``group`` on ``client``'s cluster."""
    response = client.request(requests.find_coordinator(group))
    if response.API_VERSION >= 4:
        entry = response.coordinators[0]
        error, node = entry.error_code, entry.node_id
    else:
        error, node = response.error_code, response.node_id
    if error:
        raise Errors.for_code(error)(f'{client.name} cluster: no coordinator for group {group!r}')
    return node


def committed_offsets(client: ClusterClient, group: str, coordinator: int | None = None
                      ) -> dict[TopicPartition, CommittedOffset]:
    """Every committed offset of ``group`` (OffsetFetch v8+, all topics)."""
    node = find_coordinator(client, group) if coordinator is None else coordinator
    response = client.request(requests.offset_fetch_all(group), node)
    entry = response.groups[0]
    if entry.error_code:
        raise Errors.for_code(entry.error_code)(f'{client.name} cluster: OffsetFetch for {group!r} failed')
    out = {}
    for topic in entry.topics:
        for p in topic.partitions:
            if p.error_code == 0 and p.committed_offset >= 0:
                out[TopicPartition(topic.name, p.partition_index)] = CommittedOffset(
                    p.committed_offset, p.committed_leader_epoch, p.metadata or '', p.commit_timestamp)
    return out


class GroupSync:
    """Copies committed offsets of source groups matching ``groups`` (a regex) to the target.

    ``target_topic`` maps a source topic to its target topic, or None when the topic is not mirrored.
    """

    def __init__(self, source: ClusterClient, target: ClusterClient, groups: str,
                 target_topic: Callable[[str], str | None]) -> None:
        self.source, self.target = source, target
        self._pattern = re.compile(groups)
        self._target_topic = target_topic
        self._epochs: dict[TopicPartition, tuple[int, int, int]] = {}  # tp -> (offset, epochs...)

    def sync(self, translate: Translate, *, copied_to: CopiedTo | None = None,
             retry_for_s: float = 0.0) -> GroupSyncResult:
        """One round: every matching group's committed offsets, translated, committed on the target.

        A group failing with a retriable error (e.g. no coordinator yet) is tried again for ``retry_for_s``.
        With ``copied_to``, each synced group's lag is how many source offsets its commits are ahead of
        what is copied (what its target commit cannot cover yet).
        """
        result = GroupSyncResult()
        deadline = time.monotonic() + retry_for_s
        try:
            groups = self.source_groups(deadline)
        except Errors.KafkaError as exc:
            result.failed['*'] = f'listing the source groups failed: {type(exc).__name__}: {exc}'
            return result
        for group in groups:
            attempts = _SYNC_RETRY.begin(f'syncing group {group!r}', deadline=deadline)
            while True:
                try:
                    self._sync_group(group, translate, result, copied_to)
                    break
                except Errors.KafkaError as exc:
                    if attempts.may_retry(exc):
                        attempts.wait()
                        continue
                    result.failed[group] = f'{type(exc).__name__}: {exc}'
                    log.warning('group %s: offset sync failed: %s', group, result.failed[group])
                    break
        return result

    def _sync_group(self, group: str, translate: Translate, result: GroupSyncResult,
                    copied_to: CopiedTo | None) -> None:
        wanted: dict[TopicPartition, CommittedOffset] = {}
        lag = 0
        for tp, committed in committed_offsets(self.source, group).items():
            if self._target_topic(tp.topic) is None:
                continue
            copied = copied_to(tp) if copied_to is not None else -1
            if copied >= 0:
                lag += max(0, committed.offset - copied)
            found = translate(tp, committed.offset)
            if found is not None:
                target_tp, offset = found
                wanted[target_tp] = committed._replace(offset=offset)
        if wanted:
            coordinator = find_coordinator(self.target, group)
            state = self._group_state(coordinator, group)
            if state not in _INACTIVE_STATES:
                result.skipped[group] = f'the group is {state} on the target (it has active members there)'
                return
            current = committed_offsets(self.target, group, coordinator)
            moves = {tp: committed for tp, committed in wanted.items()
                     if tp not in current or committed.offset > current[tp].offset}
            if moves:
                result.committed[group] = self._commit(coordinator, group, moves)
        result.synced_at[group] = time.monotonic()
        result.lag[group] = lag

    # -- reading -------------------------------------------------------------------------------

    def source_groups(self, deadline: float = 0.0) -> list[str]:
        """Source groups whose id matches the pattern (ListGroups on every broker the metadata names).

        A broker that does not answer, or that a refresh meanwhile dropped from the metadata, may have left the
        cluster (a broker just shut down stays in the cached metadata until it is refreshed; its groups have moved
        to other coordinators): the metadata is refreshed, and until ``deadline`` (``time.monotonic()``) the
        listing is asked again of the brokers it then names.
        """
        attempts = _LIST_RETRY.begin('listing the source groups', deadline=deadline)
        while True:
            try:
                return self._list_groups()
            except Errors.KafkaError as exc:
                if not attempts.may_retry(exc):
                    self.source.cluster.request_update()  # the next round asks the brokers a fresh Metadata names
                    raise
                self.source.refresh(attempts.remaining_ms())

    def _list_groups(self) -> list[str]:
        found: set[str] = set()
        for broker in self.source.cluster.brokers():
            response = self.source.request(requests.list_groups(), broker.node_id)
            if response.error_code:
                raise Errors.for_code(response.error_code)('ListGroups on the source failed')
            found.update(g.group_id for g in response.groups if self._pattern.fullmatch(g.group_id))
        return sorted(found)

    def _group_state(self, coordinator: int, group: str) -> str:
        """The target group's state ('Dead': none), of a classic group or, failing that, a KIP-848 one."""
        response = self.target.request(requests.describe_groups([group]), coordinator)
        described = response.groups[0]
        if described.error_code == Errors.GroupIdNotFoundError.errno:
            if ApiKey.ConsumerGroupDescribe not in self.target.api_versions(coordinator):
                return 'Dead'
            response = self.target.request(requests.consumer_group_describe([group]), coordinator)
            described = response.groups[0]
            if described.error_code == Errors.GroupIdNotFoundError.errno:
                return 'Dead'
        if described.error_code:
            raise Errors.for_code(described.error_code)(f'describing group {group!r} on the target failed')
        return described.group_state

    # -- writing -------------------------------------------------------------------------------

    def _target_epochs(self, tp: TopicPartition, offset: int) -> tuple[int, int]:
        """(target leader epoch of the record before ``offset``, target partition epoch); -1 when unknown."""
        if offset == 0:
            return -1, -1
        cached = self._epochs.get(tp)
        if cached is None or cached[0] != offset:
            self.target.track_topics([tp.topic])
            node, leader_epoch = self.target.leader(tp)
            request = requests.fetch({tp.topic: [(tp.partition, leader_epoch, offset - 1, -1)]},
                                 max_wait_ms=answers.SINGLE_READ_MAX_WAIT_MS, max_bytes=2**20, partition_max_bytes=2**20,
                                 isolation_level=constants.READ_UNCOMMITTED, min_bytes=0)
            data = answers.only_partition(self.target.request(request, node).responses)
            if data is None:
                raise Errors.KafkaError(f'reading {tp} at {offset - 1} on the target: an answer without the partition')
            epoch = -1
            if data.error_code == constants.NONE:
                for header, _ in iter_batches(data.records or b''):
                    if header.base_offset + header.last_offset_delta >= offset - 1:
                        epoch = header.partition_leader_epoch
                        break
            elif data.error_code != constants.OFFSET_OUT_OF_RANGE:  # below the log start: no epoch to give
                raise Errors.for_code(data.error_code)(f'reading {tp} at {offset - 1} on the target failed')
            cached = self._epochs[tp] = (offset, epoch, getattr(data, 'partition_epoch', -1))
        return cached[1], cached[2]

    def _commit(self, coordinator: int, group: str, offsets: Mapping[TopicPartition, CommittedOffset]
                ) -> dict[TopicPartition, CommittedOffset]:
        extensions = self.target.supports(coordinator, KIP_232)
        entries = []
        written = {}
        for tp, committed in offsets.items():
            leader_epoch, partition_epoch = self._target_epochs(tp, committed.offset)
            entries.append(OffsetCommitPartition(tp.topic, tp.partition, committed.offset, leader_epoch,
                                                 committed.metadata, partition_epoch if extensions else -1,
                                                 committed.commit_timestamp if extensions else -1))
            written[tp] = committed._replace(leader_epoch=leader_epoch)
        response = self.target.request(requests.offset_commit(group, entries), coordinator)
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code:
                    raise Errors.for_code(p.error_code)(
                        f'committing {group!r} {topic.name}-{p.partition_index} on the target failed')
        return written
