"""``Mirror``: MirrorMaker-style replication of source topics to a target cluster, offsets kept or mapped.

The mirror finds the source topics matching a regex, creates them on the target (partition count,
configs), copies every partition with a :class:`~kafka_kip.mirror.copy.Copier` and, optionally, keeps
chosen consumer groups' committed offsets in step on the target (:mod:`kafka_kip.mirror.groups`),
translated exactly in every mode.

The mirror keeps no local state: each partition resumes from the target's end, in translated mode
through the offset map the mirror keeps on the target (:mod:`kafka_kip.mirror.offset_map`).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.net.selector import NetworkSelector
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.errors import UnsupportedFeatureError
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.config import MIRROR_SETTINGS
from kafka_kip.mirror.copy import Copier
from kafka_kip.mirror.groups import LAST_ROUND_RETRY_S, GroupSync, GroupSyncResult
from kafka_kip.mirror.lookups import Lookups
from kafka_kip.mirror.offset_map import OffsetMapStore
from kafka_kip.mirror.state import Incident, PartitionProgress, ProgressState
from kafka_kip.mirror.stats import CopyStats
from kafka_kip.mirror.topics import (
    TopicInfo,
    copied_configs_of,
    describe_topics,
    ensure_topics,
    matching_topics,
)
from kafka_kip.policies import (
    AUTO,
    BROKER,
    READ_COMMITTED,
    TRANSLATED,
    IsolationLevel,
    parse_offset_mode,
    parse_truncation_policy,
)
from kafka_kip.protocol.features import KIP_391
from kafka_kip.settings.coerce import to_regex

log = logging.getLogger(__name__)

_PROGRESS_INTERVAL_S = 0.25
_RETRY_BACKOFF_MS = 100
#: Exit codes of :attr:`MirrorSummary.exit_code` (and ``kafka-kip mirror``'s; 1: it could not run).
EXIT_OK, EXIT_NOT_ALL_COPIED, EXIT_SHUTDOWN_UNFINISHED = 0, 2, 3
EXIT_STOPPED_PARTITIONS = EXIT_NOT_ALL_COPIED
MIXED = 'mixed'
#: How a run that was stopped ended (:attr:`MirrorSummary.shutdown`; '' when it was not stopped).
CLEAN, TIMED_OUT, ABANDONED = 'clean', 'timed-out', 'abandoned'
_DEFAULT = MIRROR_SETTINGS.defaults()


@dataclass
class MirrorSummary:
    """What a mirror run did."""

    requested_mode: str
    seconds: float
    partitions: list[PartitionProgress]
    incidents: list[Incident]
    topic_changes: list[str] = field(default_factory=list)
    groups: GroupSyncResult = field(default_factory=GroupSyncResult)
    stats: CopyStats = field(default_factory=CopyStats)
    requests: dict[str, dict[str, int]] = field(default_factory=dict)  # cluster -> API -> requests sent
    taken_at: float = field(default_factory=time.monotonic)
    shutdown: str = ''  # how a stopped run ended: 'clean', 'timed-out' or 'abandoned'

    @property
    def offset_mode(self) -> str:
        """The mode the partitions were copied in ('mixed' when they differ; the request before any started)."""
        modes = {p.mode for p in self.partitions if p.mode}
        return modes.pop() if len(modes) == 1 else MIXED if modes else self.requested_mode

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def stopped(self) -> list[PartitionProgress]:
        return [p for p in self.partitions if p.state == ProgressState.STOPPED]

    @property
    def exit_code(self) -> int:
        """0 when every matching source partition is copied and every group synced; 2 when not (see the
        incidents and ``groups.failed``); 3 when a stop did not finish the writes in flight (a restart
        resumes from the target without duplicate or gap)."""
        if self.shutdown in (TIMED_OUT, ABANDONED):
            return EXIT_SHUTDOWN_UNFINISHED
        return EXIT_NOT_ALL_COPIED if self.stopped or self.groups.failed else EXIT_OK

    def incidents_by_kind(self) -> dict[str, int]:
        return dict(Counter(str(i.kind) for i in self.incidents))

    def last_copied_age(self, p: PartitionProgress) -> float | None:
        """Seconds from the partition's last acknowledged write to when the summary was taken (None: none yet)."""
        return None if p.last_copied_at < 0 else round(self.taken_at - p.last_copied_at, 3)

    def to_dict(self) -> dict[str, Any]:
        return {
            'offset_mode': self.offset_mode,
            'requested_offset_mode': self.requested_mode,
            'seconds': round(self.seconds, 3),
            'records': self.records,
            'bytes': self.bytes,
            'records_per_second': round(self.records_per_second, 1),
            'partitions': [{
                'source': f'{p.source.topic}-{p.source.partition}',
                'target': f'{p.target.topic}-{p.target.partition}',
                'mode': p.mode, 'state': p.state, 'copied_to': p.copied_to, 'target_end': p.target_end,
                'source_end': p.source_end, 'lag': p.lag, 'records': p.records, 'bytes': p.bytes,
                'last_copied_age_seconds': self.last_copied_age(p),
            } for p in self.partitions],
            'incidents': [i.to_dict() for i in self.incidents],
            'incidents_by_kind': self.incidents_by_kind(),
            'topic_changes': list(self.topic_changes),
            'groups': self.groups.to_dict(self.taken_at),
            **self.stats.to_dict(),
            'requests': {cluster: dict(sent) for cluster, sent in self.requests.items()},
            'shutdown': self.shutdown,
            'exit_code': self.exit_code,
        }


class Mirror:
    """Replicates source topics matching ``topics`` (a regex on the whole name) to the target.

    The keywords from ``topics`` to ``shutdown_timeout_ms`` are the settings of
    :data:`~kafka_kip.mirror.config.MIRROR_SETTINGS` (their doc, default and accepted spellings; the table in
    docs/MIRROR.md): ``offset_mode`` a :class:`~kafka_kip.policies.OffsetMode`, ``on_truncation`` a
    :class:`~kafka_kip.policies.TruncationPolicy`, ``isolation_level`` an
    :class:`~kafka_kip.policies.IsolationLevel`, each in any of its spellings. ``source_configs`` /
    ``target_configs`` are kafka-python connection configs
    (``security_protocol``, ``sasl_*``, ``ssl_*``, ...; ``consistency_context_store`` to share a KIP-1243 store);
    ``copier_configs`` are :class:`Copier` settings. Target topics are created and written through one target
    client, so on a ``kip.1243`` target a topic the mirror just created is never looked up in a lagging broker's
    old metadata.

    :meth:`run` replicates until :meth:`stop` (or, with ``stop_at_end``, until the end offsets the
    source had at start are copied) and returns a :class:`MirrorSummary`; while it runs, :attr:`latest` is a
    summary at most a quarter of a second old (for readers on other threads: the metrics endpoint).
    ``shutdown_timeout_ms`` bounds what :meth:`stop` finishes (the writes in flight, the last group sync).
    Source topics starting with one of ``exclude_prefixes`` are not mirrored (the copies a flow in the other
    direction wrote: see :mod:`kafka_kip.mirror.config`).
    """

    def __init__(self, source: str, target: str, topics: str = _DEFAULT['topics'], *,
                 groups: str | None = _DEFAULT['groups'], offset_mode: str = _DEFAULT['offset_mode'],
                 on_truncation: str = _DEFAULT['on_truncation'], isolation_level: str = _DEFAULT['isolation_level'],
                 target_prefix: str = _DEFAULT['target_prefix'],
                 sync_topic_configs: bool = _DEFAULT['sync_topic_configs'],
                 group_sync_interval_ms: int = _DEFAULT['group_sync_interval_ms'],
                 topic_refresh_interval_ms: int = _DEFAULT['topic_refresh_interval_ms'],
                 offset_map_topic: str = _DEFAULT['offset_map_topic'],
                 source_configs: Mapping[str, Any] | None = None, target_configs: Mapping[str, Any] | None = None,
                 copier_configs: Mapping[str, Any] | None = None,
                 on_incident: Callable[[Incident], None] | None = None,
                 shutdown_timeout_ms: int = _DEFAULT['shutdown_timeout_ms'],
                 exclude_prefixes: tuple[str, ...] = ()) -> None:
        offset_mode = parse_offset_mode(offset_mode)
        on_truncation = parse_truncation_policy(on_truncation)
        isolation_level = IsolationLevel.parse(isolation_level)
        for name, pattern in (('topics', topics), ('groups', groups)):
            if pattern is not None:
                to_regex(pattern, name)
        self.topics = topics
        self.exclude_prefixes = tuple(exclude_prefixes)
        self.groups = groups
        self.offset_mode = offset_mode
        self.on_truncation = on_truncation
        self.isolation_level = isolation_level
        self.target_prefix = target_prefix
        self.offset_map_topic = offset_map_topic
        self.sync_topic_configs = sync_topic_configs
        self._intervals = (group_sync_interval_ms / 1000, topic_refresh_interval_ms / 1000)
        self._copier_configs = dict(copier_configs or {})
        self._on_incident = on_incident
        self._net = NetworkSelector()
        self.source = ClusterClient('source', source, self._net, **dict(source_configs or {}))
        self.target = ClusterClient('target', target, self._net, **dict(target_configs or {}))
        self.copier: Copier | None = None
        self._group_sync: GroupSync | None = None
        self._mirrored: dict[str, TopicInfo] = {}
        self._refusals: dict[str, str] = {}  # source topic -> why some of its partitions are not copied
        self._growth_waits: dict[str, dict[TopicPartition, int]] = {}  # grown source topic -> its prior ends
        self._topic_changes: list[str] = []
        self._groups_result = GroupSyncResult()
        self._stop = threading.Event()
        self._flush_on_stop = True
        self.shutdown_timeout_ms = shutdown_timeout_ms
        self._stop_deadline: float | None = None
        self._shutdown = ''
        self._started_at = 0.0
        self.latest: MirrorSummary | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, *, stop_at_end: bool = False) -> None:
        """Connect, read the offset map, create/grow target topics and start copying every partition."""
        self._started_at = time.monotonic()
        self.source.bootstrap()
        self.target.bootstrap()
        if self.offset_mode == BROKER:
            self._require_produce_with_offsets()
        self.copier = Copier(self.source, self.target, offset_map=self._open_offset_map(),
                             offset_mode=self.offset_mode, on_truncation=self.on_truncation,
                             isolation_level=self.isolation_level, on_incident=self._on_incident,
                             **self._copier_configs)
        if self.groups:
            self._group_sync = GroupSync(self.source, self.target, self.groups, self.target_topic)
        self._discover(stop_at_end=stop_at_end)

    def target_topic(self, source_topic: str) -> str | None:
        """The target topic of a mirrored source topic (None if the topic is not mirrored)."""
        return self.target_prefix + source_topic if source_topic in self._mirrored else None

    def run(self, *, stop_at_end: bool = False, on_progress: Callable[[list[PartitionProgress], float], None]
            | None = None) -> MirrorSummary:
        """Replicate until :meth:`stop` or, with ``stop_at_end``, until the source's end offsets as of the
        start are copied; then finish the writes in progress and return the summary."""
        if self.copier is None:
            self.start(stop_at_end=stop_at_end)
        copier = self.copier
        group_interval, topic_interval = self._intervals
        now = time.monotonic()
        next_groups, next_topics, next_progress = now, now + topic_interval, now
        while not self._stop.is_set() and not (stop_at_end and copier.done):
            copier.poll(100)
            now = time.monotonic()
            if now >= next_progress:
                self.latest = self.summary()
                if on_progress is not None:
                    on_progress(self.latest.partitions, now - self._started_at)
                next_progress = now + _PROGRESS_INTERVAL_S
            if self._group_sync is not None and now >= next_groups:
                self._sync_groups()
                next_groups = now + group_interval
            if not stop_at_end and now >= next_topics:
                self._housekeeping(self._discover)
                next_topics = now + (_PROGRESS_INTERVAL_S if self._growth_waits else topic_interval)
        self._finish()
        self.latest = self.summary()
        return self.latest

    def _finish(self) -> None:
        """Write what was read and sync groups once more: within the shutdown bound after :meth:`stop`."""
        copier = self.copier
        if not self._stop.is_set():  # stop_at_end: everything is read
            copier.flush()
            if self._group_sync is not None:
                self._sync_groups(retry_for_s=LAST_ROUND_RETRY_S)
            return
        if not self._flush_on_stop:
            self._shutdown = ABANDONED
            return
        deadline = self._stop_deadline
        flushed = copier.flush(max(0.0, deadline - time.monotonic()) * 1000)
        if self._group_sync is not None and flushed:
            self._sync_groups(retry_for_s=max(0.0, deadline - time.monotonic()))
        self._shutdown = CLEAN if flushed and time.monotonic() <= deadline else TIMED_OUT
        log.info('mirror stopped: %s', self._shutdown)

    def stop(self, *, flush: bool = True) -> None:
        """Ask :meth:`run` to return (thread- and signal-safe).

        With ``flush`` (the default) it first stops reading, writes everything already read and syncs groups
        once more, within ``shutdown_timeout_ms`` of this call (summary ``shutdown``: 'clean', else
        'timed-out'). ``flush=False`` abandons all of that, as a crash would ('abandoned').
        """
        self._flush_on_stop = flush
        if self._stop_deadline is None:
            self._stop_deadline = time.monotonic() + self.shutdown_timeout_ms / 1000
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stop.is_set()

    def close(self) -> None:
        """Close every connection."""
        self.source.close()
        self.target.close()
        self._net.close()

    def __enter__(self) -> Mirror:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def summary(self) -> MirrorSummary:
        """What the run did so far (or, after :meth:`run` returned, in all)."""
        copier = self.copier
        now = time.monotonic()
        groups = self._groups_result.snapshot()
        return MirrorSummary(self.offset_mode, now - self._started_at,
                             copier.progress() if copier else [], list(copier.incidents) if copier else [],
                             list(self._topic_changes), groups, copier.stats.snapshot() if copier else CopyStats(),
                             {client.name: dict(client.requests_sent) for client in (self.source, self.target)},
                             now, self._shutdown)

    # -- set-up --------------------------------------------------------------------------------

    def _require_produce_with_offsets(self) -> None:
        brokers = [b.node_id for b in self.target.cluster.brokers()]
        missing = [node for node in brokers if not self.target.supports(node, KIP_391)]
        if missing:
            raise UnsupportedFeatureError(KIP_391, missing[0])

    def _open_offset_map(self) -> OffsetMapStore | None:
        """The offset map on the target (created if missing); translated and auto modes need it."""
        store = OffsetMapStore(self.target, self.offset_map_topic)
        try:
            store.open()
        except Errors.KafkaError as exc:
            if self.offset_mode in (AUTO, TRANSLATED):
                raise Errors.KafkaError(f'the offset map topic {self.offset_map_topic} cannot be created or read '
                                        f'on the target ({type(exc).__name__}: {exc}); create it (1 partition, '
                                        'cleanup.policy=compact) or give the mirror the right to') from exc
            log.warning('no offset map on the target (%s): recreated source topics are found only while the '
                        'mirror runs', exc)
            return None
        return store

    def _discover(self, *, stop_at_end: bool = False) -> None:
        """Mirror new matching source topics and new partitions of mirrored ones."""
        found = {name: info for name, info in matching_topics(self.source, self.topics).items()
                 if not name.startswith(self.exclude_prefixes)}
        changed = {name: info for name, info in found.items()
                   if self._mirrored.get(name) != info and not self._holds_growth(name, info)}
        if not changed:
            return
        refused: dict[TopicPartition, str] = {}
        for name, cannot in self._shape_targets(changed).items():
            for p in cannot:
                refused[TopicPartition(name, p)] = (f'{name}-{p}: ' + self._refusals[name])
        previous = {name: self._mirrored.get(name) for name in changed}
        self._mirrored.update(changed)
        try:
            self.source.track_topics(list(self._mirrored))
            self.target.track_topics([self.target_prefix + name for name in self._mirrored])
            new = [TopicPartition(name, p) for name, info in changed.items() for p in range(info.partitions)
                   if TopicPartition(name, p) not in self.copier.partitions]
            for tp in [tp for tp in new if tp in refused]:
                self.copier.refuse(tp, refused[tp], target_tp=self._target_tp(tp))
            new = [tp for tp in new if tp not in refused]
            ends = self._end_offsets(new) if stop_at_end else {}
            for tp in new:
                self.copier.add(tp, end=ends.get(tp), target_tp=self._target_tp(tp))
        except Errors.KafkaError:  # the partitions not added yet are found again at the next refresh
            for name, info in previous.items():
                if info is None:
                    del self._mirrored[name]
                else:
                    self._mirrored[name] = info
            raise

    def _holds_growth(self, name: str, info: TopicInfo) -> bool:
        """True while a mirrored topic that grew on the source waits for its prior partitions (KIP-253).

        The target is grown only once every prior partition is copied up to the source's end offset when the
        growth was seen (at or past the expansion's threshold): the target's expansion then records thresholds
        at or past the source's, so a KIP-253 consumer of the target returns each key in the source's order.
        A stopped prior partition is not waited for.
        """
        mirrored = self._mirrored.get(name)
        if mirrored is None or info.partitions <= mirrored.partitions or info.topic_id != mirrored.topic_id:
            self._growth_waits.pop(name, None)
            return False
        ends = self._growth_waits.get(name)
        if ends is None:
            ends = self._growth_waits[name] = self._end_offsets(
                [TopicPartition(name, p) for p in range(mirrored.partitions)])
            log.info('%s grew to %d partitions: the target grows once its prior partitions are copied to %s',
                     name, info.partitions, {tp.partition: end for tp, end in ends.items()})
        stopped = {p.source for p in self.copier.progress() if p.state == ProgressState.STOPPED}
        if any(self.copier.copied_to(tp) < end for tp, end in ends.items() if tp not in stopped):
            return True
        del self._growth_waits[name]
        return False

    def _target_tp(self, tp: TopicPartition) -> TopicPartition:
        return TopicPartition(self.target_prefix + tp.topic, tp.partition)

    def _shape_targets(self, changed: dict[str, TopicInfo]) -> dict[str, range]:
        """Create or grow the target topics of ``changed`` (a few requests for all of them); returns the
        source partitions each cannot hold."""
        prefix = self.target_prefix
        existing = describe_topics(self.target, [prefix + name for name in changed])
        configs = copied_configs_of(self.source, list(changed)) if self.sync_topic_configs else {}
        wanted, cannot = {}, {}
        for name, info in changed.items():
            found = configs.get(name, {})
            if isinstance(found, Errors.KafkaError):
                cannot[name] = self._refuse(name, info, existing.get(prefix + name), found)
            else:
                wanted[prefix + name] = (info, found)
        for target_name, done in ensure_topics(self.target, wanted, existing).items():
            name = target_name[len(prefix):]
            if isinstance(done, Errors.KafkaError):
                cannot[name] = self._refuse(name, changed[name], existing.get(target_name), done)
            elif done:
                log.info('target topic %s', done)
                self._topic_changes.append(done)
        return cannot

    def _refuse(self, name: str, info: TopicInfo, current: TopicInfo | None, exc: Errors.KafkaError) -> range:
        """Why ``name``'s partitions the target cannot hold are not copied; returns those partitions."""
        target_name = self.target_prefix + name
        if current is None:
            self._refusals[name] = (f'the target topic {target_name} does not exist and could not be created '
                                    f'({type(exc).__name__}: {exc}); create it with {info.partitions} '
                                    'partitions (or give the mirror the right to) and restart the mirror')
            return range(info.partitions)
        self._refusals[name] = (f'the target topic {target_name} has {current.partitions} partitions and could '
                                f'not be grown to {info.partitions} ({type(exc).__name__}: {exc}); grow it (or '
                                'mirror to a target that can) and restart the mirror')
        return range(current.partitions, info.partitions)

    def _end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The source's end offsets now (last stable offsets when read-committed): where ``stop_at_end`` stops."""
        lookups = Lookups(self._net, _RETRY_BACKOFF_MS, self.source.request_timeout_ms)
        read_committed = self.isolation_level == READ_COMMITTED

        async def ends() -> list[int]:
            return await lookups.gather(lookups.end_offset(self.source, tp, read_committed=read_committed)
                                        for tp in tps)

        return dict(zip(tps, self._net.run(ends), strict=True))

    # -- housekeeping --------------------------------------------------------------------------

    def _housekeeping(self, task: Callable[[], None]) -> None:
        try:
            task()
        except Errors.KafkaError as exc:
            log.warning('%s failed (retried later): %s', task.__name__.strip('_'), exc)

    def _sync_groups(self, retry_for_s: float = 0.0) -> None:
        result = self._group_sync.sync(self.copier.translate, copied_to=self.copier.copied_to,
                                       retry_for_s=retry_for_s)
        self._groups_result.merge(result)
