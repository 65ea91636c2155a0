"""``spark-mirror --group-sync``: the mirror's group offset sync, run on the driver beside the query.

:class:`~kafka_kip.mirror.groups.GroupSync` copies the committed offsets of matching source groups to the
target, translated exactly, as ``kafka-kip mirror`` does. In the mirror, the copier says where each partition
stands; here the query's tasks copy and the driver does not see them, so each round reads it from the target,
which is always consistent with what the tasks wrote (a micro-batch's ranges are written in order, the offset
map ahead of its records): a partition's offset map (``auto`` and ``translated`` modes; the map records every
partition's mode) and its high watermark. Broker and checked partitions translate 1:1 up to the high
watermark; translated ones through the map up to it (:func:`~kafka_kip.mirror.offset_map.translate_offset`,
the copier's rule). A partition the target holds nothing of yet is not synced.

Rounds run every ``group_sync_interval_ms`` on a daemon thread with its own connections, whether or not
micro-batches run (a group may commit while the source is idle), and once more when the query ends.
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any

from kafka.net.selector import NetworkSelector
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.groups import GroupSync, GroupSyncResult
from kafka_kip.mirror.lookups import Lookups
from kafka_kip.mirror.offset_map import MAP_TOPIC, OffsetMapStore, PartitionMap, translate_offset
from kafka_kip.mirror.topics import MIRROR_TOPIC_PREFIX
from kafka_kip.policies import AUTO, TRANSLATED, parse_offset_mode

log = logging.getLogger(__name__)

_RETRY_BACKOFF_MS = 100


class _Standing:
    """Where one target partition stands: how it is copied, its offset map and high watermark."""

    __slots__ = ('target', 'mode', 'offset_map', 'end')

    def __init__(self, target: TopicPartition, mode: str, offset_map: PartitionMap | None, end: int) -> None:
        self.target, self.mode, self.offset_map, self.end = target, mode, offset_map, end

    @property
    def copied_to(self) -> int:
        """Every source offset below this is on the target (-1: nothing mapped)."""
        if self.mode != TRANSLATED:
            return self.end
        resumed = self.offset_map.resume_source(self.end) if self.offset_map is not None else None
        return -1 if resumed is None else resumed


class TargetPositions:
    """One round's view of the target: translates source offsets of mirrored partitions (see the module doc).

    ``maps`` is the offset map as read at the start of the round; ``mode`` the requested offset mode, used for
    partitions the map does not name (``broker`` / ``checked`` runs keep no map).
    """

    def __init__(self, target: ClusterClient, lookups: Lookups, maps: Mapping[TopicPartition, PartitionMap],
                 mode: str, topic_prefix: str) -> None:
        self._target, self._lookups, self._maps = target, lookups, maps
        self._mode, self._prefix = mode, topic_prefix
        self._known: dict[TopicPartition, _Standing | None] = {}
        self._tracked: set[str] = set()

    def _standing(self, source_tp: TopicPartition) -> _Standing | None:
        if source_tp not in self._known:
            self._known[source_tp] = self._look_up(source_tp)
        return self._known[source_tp]

    def _look_up(self, source_tp: TopicPartition) -> _Standing | None:
        target_tp = TopicPartition(self._prefix + source_tp.topic, source_tp.partition)
        offset_map = self._maps.get(target_tp)
        if offset_map is not None and offset_map.source != source_tp:
            return None  # the target partition copies another source partition
        mode = offset_map.mode if offset_map is not None else '' if self._mode in (AUTO, TRANSLATED) else self._mode
        if not mode:
            return None  # not copied yet
        if target_tp.topic not in self._tracked:
            self._target.track_topics([target_tp.topic])
            self._tracked.add(target_tp.topic)
        if self._target.leader(target_tp)[0] < 0:
            return None  # no such target partition (yet)
        end = self._target.net.run(self._lookups.high_watermark, self._target, target_tp)
        return _Standing(target_tp, mode, offset_map, end)

    def translate(self, source_tp: TopicPartition, offset: int) -> tuple[TopicPartition, int] | None:
        """The target partition and offset of the first copied record at or after source ``offset`` (None: none)."""
        standing = self._standing(source_tp)
        if standing is None or standing.copied_to < 0:
            return None
        found = translate_offset(standing.mode, standing.offset_map, offset, copied_to=standing.copied_to,
                                 target_end=standing.end)
        return None if found is None else (standing.target, found)

    def copied_to(self, source_tp: TopicPartition) -> int:
        standing = self._standing(source_tp)
        return -1 if standing is None else standing.copied_to


class QueryGroupSync:
    """Syncs the committed offsets of source groups matching ``groups`` (a regex) for a spark-mirror query.

    ``topics`` is the query's source topic regex, ``topic_prefix`` its target topic prefix, ``offset_mode`` and
    ``offset_map_topic`` its offset mode and map topic; ``source_configs`` / ``target_configs`` are kafka-python
    connection configs. :meth:`start` runs rounds every ``interval_ms`` on a thread; :meth:`stop` ends it (with
    a last round); :attr:`result` holds every round's outcome as the mirror keeps it.
    """

    def __init__(self, source: str, target: str, groups: str, topics: str, *, topic_prefix: str = '',
                 offset_mode: str = AUTO, offset_map_topic: str = MAP_TOPIC, interval_ms: int = 5000,
                 source_configs: Mapping[str, Any] | None = None,
                 target_configs: Mapping[str, Any] | None = None) -> None:
        self._net = NetworkSelector()
        self.source = ClusterClient('source', source, self._net, **dict(source_configs or {}))
        self.target = ClusterClient('target', target, self._net, **dict(target_configs or {}))
        self._topics = re.compile(topics)
        self._prefix = topic_prefix
        self._mode = parse_offset_mode(offset_mode)
        self._store = OffsetMapStore(self.target, offset_map_topic) if self._mode in (AUTO, TRANSLATED) else None
        self._lookups = Lookups(self._net, _RETRY_BACKOFF_MS, self.target.request_timeout_ms)
        self._sync = GroupSync(self.source, self.target, groups, self.target_topic)
        self._interval_s = interval_ms / 1000
        self._bootstrapped = False
        self._round = threading.Lock()  # one round at a time (the thread's, the last one)
        self._lock = threading.Lock()  # the result, merged by rounds, read by the metrics and the summary
        self._result = GroupSyncResult()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def target_topic(self, source_topic: str) -> str | None:
        """The target topic of a source topic the query copies (None: it copies no such topic)."""
        if source_topic.startswith(MIRROR_TOPIC_PREFIX) or not self._topics.fullmatch(source_topic):
            return None
        return self._prefix + source_topic

    @property
    def result(self) -> GroupSyncResult:
        """Every round so far, merged (a snapshot)."""
        with self._lock:
            return self._result.snapshot()

    def sync_once(self, retry_for_s: float = 0.0) -> GroupSyncResult:
        """One round: every matching group's offsets translated from the target and committed there."""
        with self._round:
            try:
                if not self._bootstrapped:
                    self.source.bootstrap()
                    self.target.bootstrap()
                    self._bootstrapped = True
                maps = self._maps()
            except Errors.KafkaError as exc:
                found = GroupSyncResult(failed={'*': f'reading the target failed: {type(exc).__name__}: {exc}'})
            else:
                positions = TargetPositions(self.target, self._lookups, maps, self._mode, self._prefix)
                found = self._sync.sync(positions.translate, copied_to=positions.copied_to, retry_for_s=retry_for_s)
            for group, why in found.failed.items():
                log.warning('group sync: %s: %s', group, why)
            with self._lock:
                self._result.merge(found)
            return found

    def _maps(self) -> dict[TopicPartition, PartitionMap]:
        if self._store is None:
            return {}
        try:
            return self._store.load()
        except Errors.UnknownTopicOrPartitionError:
            return {}  # no task has opened the map yet: nothing is copied

    def start(self) -> None:
        """Run a round now and then every ``interval_ms`` on a daemon thread, until :meth:`stop`."""
        def rounds() -> None:
            while True:
                self.sync_once()
                if self._stopping.wait(self._interval_s):
                    return

        self._thread = threading.Thread(target=rounds, name='kafka-kip spark-mirror group sync', daemon=True)
        self._thread.start()

    def stop(self, *, last_round_retry_s: float | None = None) -> None:
        """End the rounds; with ``last_round_retry_s``, run one more (retriable errors retried that long)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        if last_round_retry_s is not None:
            self.sync_once(retry_for_s=last_round_retry_s)

    def close(self) -> None:
        self.source.close()
        self.target.close()
        self._net.close()
