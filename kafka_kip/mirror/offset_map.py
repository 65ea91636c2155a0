"""The offset map: which source offsets the records of a target partition have, kept on the target cluster.

In ``translated`` mode the target assigns its own offsets, so the mirror records the mapping as it
writes. It is exact and compact: a :class:`Run` says that source offsets ``[source, source + count)`` are
target offsets ``[target, target + count)``; a new run starts wherever the source has a gap (compaction,
transaction markers, aborted records, retention) -- one entry per run of consecutive offsets, not one per
record. The first run of a partition is its *origin*, possibly empty (``count`` 0): where copying began.

The map lives in a compacted topic on the target (:data:`MAP_TOPIC`, one partition), so a restarted or
relocated mirror, or :func:`kafka_kip.mirror.translate.translate_offsets`, needs no local file. Its
records, keys and JSON values (one record per run, rewritten as the run grows; compaction keeps the
latest):

* ``partition/<target topic>/<partition>``: ``{"mode", "source_topic", "source_partition",
  "source_topic_id"}``, the source a target partition copies and how (written in every mode);
* ``run/<target topic>/<partition>/<source offset>``: ``{"source", "target", "count"}``; a tombstone
  (null value) removes a run.

**Crash safety: the map is written ahead.** A run's record is on the target before the records it
covers are produced, so every record the mirror wrote is covered by the map; the map can only claim
more than the target has (its produce never landed, or is not yet replicated). The target's high
watermark settles it: on start and after a failed write the mirror cuts the runs at the target's high
watermark (:meth:`PartitionMap.cut_target`), writes the cut back, and continues from the source offset
after the target's last record -- no duplicate, nothing lost, whether a crash (``kill -9``) came
between a map write and its produce or after both. Readers apply the same cut: nothing is translated
beyond the target's high watermark. The mirror must be the only writer of its target partitions.
"""
from __future__ import annotations

import bisect
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.future import Future
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.mirror import answers
from kafka_kip.mirror.batches import iter_batches
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.topics import MIRROR_TOPIC_PREFIX, TopicInfo, create_topic, describe_topics
from kafka_kip.policies import TRANSLATED
from kafka_kip.protocol import constants, requests
from kafka_kip.protocol.record_batch import CONTROL_MASK
from kafka_kip.protocol.retry import SYSTEM_CLOCK, Clock, RetryPolicy

log = logging.getLogger(__name__)

#: The offset map topic on the target (MirrorMaker 2 also names its internal topics ``*.internal``).
MAP_TOPIC = MIRROR_TOPIC_PREFIX + 'offset-map.internal'
MAP_TOPIC_CONFIGS = {'cleanup.policy': 'compact'}
_MAX_ROUND_RECORDS = 10_000
_LOAD_FETCH_BYTES = 4 * 2**20


@dataclass(frozen=True)
class Run:
    """Source offsets ``[source, source + count)`` are target offsets ``[target, target + count)``."""

    source: int
    target: int
    count: int

    @property
    def source_end(self) -> int:
        return self.source + self.count

    @property
    def target_end(self) -> int:
        return self.target + self.count


@dataclass
class PartitionMap:
    """The runs of one target partition, in source (and target) order, and what it copies."""

    source: TopicPartition
    source_topic_id: str | None = None
    mode: str = ''
    runs: list[Run] = field(default_factory=list)

    @property
    def origin(self) -> Run | None:
        return self.runs[0] if self.runs else None

    @property
    def target_end(self) -> int:
        """The target offset after the last mapped record (-1 when nothing is mapped)."""
        return self.runs[-1].target_end if self.runs else -1

    def place(self, base_offset: int, count: int, target: int) -> Run:
        """Map ``count`` consecutive source offsets from ``base_offset`` to target offsets from ``target``.

        Extends the last run when both sides continue it, else starts a run; returns the run to write.
        """
        last = self.runs[-1] if self.runs else None
        if last is not None and last.source_end == base_offset and last.target_end == target:
            run = self.runs[-1] = Run(last.source, last.target, last.count + count)
        else:
            if last is not None and (base_offset < last.source_end or target < last.target_end):
                raise ValueError(f'{self.source}: source {base_offset} -> target {target} goes back from {last}')
            run = Run(base_offset, target, count)
            self.runs.append(run)
        return run

    def cut_target(self, end: int) -> tuple[list[Run], list[Run]]:
        """Forget what is mapped at or beyond target offset ``end``: (runs shortened, runs removed).

        The origin run is kept (shortened to nothing at worst): it says where copying began.
        """
        return self._cut(lambda run: run.target, end)

    def cut_source(self, point: int) -> tuple[list[Run], list[Run]]:
        """Forget what is mapped at or beyond source offset ``point`` (the source truncated there)."""
        return self._cut(lambda run: run.source, point)

    def diverge(self, point: int, target: int) -> tuple[list[Run], list[Run]]:
        """The source's records from offset ``point`` on follow at target offset ``target``: (runs changed,
        runs removed).

        After a truncation at ``point`` whose lost records the target keeps below ``target``: what is mapped
        at or past source ``point`` is forgotten, and an empty run (``point`` -> ``target``) marks where the
        new history begins, so ``point`` and what follows translate past the lost records before any new
        record is copied. An origin the cut leaves empty at or past ``point`` gives way to the mark.
        """
        shortened, removed = self.cut_source(point)
        emptied = [run for run in self.runs if run.source >= point]
        mark = Run(point, target, 0)
        self.runs = [run for run in self.runs if run.source < point] + [mark]
        return [run for run in shortened if run not in emptied] + [mark], removed + emptied

    def _cut(self, start_of: Any, at: int) -> tuple[list[Run], list[Run]]:
        shortened, removed = [], []
        kept = []
        for index, run in enumerate(self.runs):
            if start_of(run) + run.count <= at:
                kept.append(run)
            elif start_of(run) < at or index == 0:
                run = Run(run.source, run.target, max(0, at - start_of(run)))
                kept.append(run)
                shortened.append(run)
            else:
                removed.append(run)
        self.runs = kept
        return shortened, removed

    def resume_source(self, target_end: int) -> int | None:
        """The source offset after everything mapped below target offset ``target_end`` (where to read
        on when the target ends there); None when nothing is mapped at or below it."""
        found = [run.source + min(run.count, target_end - run.target) for run in self.runs if run.target <= target_end]
        return max(found) if found else None

    def copied(self) -> range:
        """The target offsets from the first mapped record to the last (empty when nothing is mapped)."""
        mapped = [run for run in self.runs if run.count]
        return range(mapped[0].target, mapped[-1].target_end) if mapped else range(0)

    def source_offsets(self) -> Callable[[int], int | None]:
        """Target offset -> the source offset of the mapped record there (None: none), per the runs now."""
        runs = list(self.runs)
        ends = [run.target_end for run in runs]

        def source_of(target: int) -> int | None:
            index = bisect.bisect_right(ends, target)
            if index == len(runs) or runs[index].target > target:
                return None
            return runs[index].source + target - runs[index].target

        return source_of

    def translate(self, offset: int, *, copied_to: int, target_end: int) -> int | None:
        """The target offset of the first copied record at or after source ``offset``.

        Never beyond what is copied: ``offset`` is taken at most to ``copied_to`` (every source offset
        below it is on the target) and the answer at most to ``target_end`` (the target's high watermark
        or acknowledged end). None when nothing is mapped.
        """
        if not self.runs:
            return None
        offset = min(offset, copied_to)
        index = bisect.bisect_right([run.source_end for run in self.runs], offset)
        if index == len(self.runs):
            found = self.runs[-1].target_end
        else:
            run = self.runs[index]
            found = run.target + max(0, offset - run.source)
        return min(found, target_end)


def translate_offset(mode: str, offset_map: PartitionMap | None, offset: int, *, copied_to: int,
                     target_end: int) -> int | None:
    """The target offset of the first copied record at or after source ``offset``, for a partition copied in
    ``mode``: through ``offset_map`` in translated mode, else the same number; never beyond ``copied_to`` (every
    source offset below it is on the target) nor ``target_end``. None when a translated partition maps nothing."""
    if mode == TRANSLATED:
        return None if offset_map is None else offset_map.translate(offset, copied_to=copied_to,
                                                                    target_end=target_end)
    return min(offset, copied_to, target_end)


# -- records ---------------------------------------------------------------------------------------


def partition_key(tp: TopicPartition) -> bytes:
    return f'partition/{tp.topic}/{tp.partition}'.encode()


def partition_records(tp: TopicPartition, m: PartitionMap) -> dict[bytes, bytes | None]:
    """The map record of target partition ``tp``'s map ``m`` (its runs have records of their own)."""
    return {partition_key(tp): partition_value(m)}


def run_key(tp: TopicPartition, run: Run) -> bytes:
    return f'run/{tp.topic}/{tp.partition}/{run.source}'.encode()


def partition_value(m: PartitionMap) -> bytes:
    return json.dumps({'mode': m.mode, 'source_topic': m.source.topic, 'source_partition': m.source.partition,
                       'source_topic_id': m.source_topic_id}, sort_keys=True).encode()


def run_value(run: Run) -> bytes:
    return json.dumps({'source': run.source, 'target': run.target, 'count': run.count}, sort_keys=True).encode()


def run_records(tp: TopicPartition, changed: Iterable[Run], removed: Iterable[Run] = ()) -> dict[bytes, bytes | None]:
    """The map records for runs of target partition ``tp`` that changed (and tombstones for removed ones)."""
    out: dict[bytes, bytes | None] = {run_key(tp, run): None for run in removed}
    out.update((run_key(tp, run), run_value(run)) for run in changed)
    return out


def parse_map(entries: Mapping[bytes, bytes]) -> dict[TopicPartition, PartitionMap]:
    """Partition maps (by target partition) from the map topic's latest value per key."""
    maps: dict[TopicPartition, PartitionMap] = {}
    runs: dict[TopicPartition, list[Run]] = {}
    for key, value in entries.items():
        kind, _, rest = key.decode().partition('/')
        topic, _, tail = rest.partition('/')
        partition, _, _ = tail.partition('/')
        tp = TopicPartition(topic, int(partition))
        data = json.loads(value)
        if kind == 'partition':
            maps[tp] = PartitionMap(TopicPartition(data['source_topic'], data['source_partition']),
                                    data.get('source_topic_id'), data.get('mode', ''))
        elif kind == 'run':
            runs.setdefault(tp, []).append(Run(data['source'], data['target'], data['count']))
    for tp, found in runs.items():
        if tp in maps:
            maps[tp].runs = sorted(found, key=lambda run: run.source)
    return maps


# -- the topic -------------------------------------------------------------------------------------


class OffsetMapStore:
    """The map topic on the target: created and read before copying, then written in ordered rounds.

    :meth:`write` queues records for the next round and returns a future resolved once they are on the
    target (acks=all). One round is in flight at a time, so rounds land in order; a failed round is sent
    again (map records are idempotent: the same key and value). The copier calls :meth:`dispatch`.
    """

    def __init__(self, target: ClusterClient, topic: str = MAP_TOPIC, *, retry_backoff_ms: int = 100,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.target = target
        self.topic = topic
        self.tp = TopicPartition(topic, 0)
        self._backoff = retry_backoff_ms / 1000
        #: set-up reads and waits: within the target's request timeout, backing off from ``retry_backoff_ms``
        self.set_up_retry = RetryPolicy(timeout_s=target.request_timeout_ms / 1000, backoff_s=self._backoff,
                                        max_backoff_s=max(self._backoff, 1.0))
        self._clock = clock
        self._pending: dict[bytes, bytes | None] = {}
        self._waiting: list[Future] = []
        self._in_flight = False
        self._retry_at = 0.0
        self.maps: dict[TopicPartition, PartitionMap] = {}

    # -- set-up (blocking) ---------------------------------------------------------------------

    def open(self) -> dict[TopicPartition, PartitionMap]:
        """Create the topic if missing, then read it whole; returns the maps by target partition."""
        create_topic(self.target, self.topic, TopicInfo(1, 3), MAP_TOPIC_CONFIGS)
        return self.load(wait_for_topic=True)

    def load(self, wait_for_topic: bool = False) -> dict[TopicPartition, PartitionMap]:
        """Read the topic whole (it must exist, or appear within the request timeout if ``wait_for_topic``);
        returns the maps by target partition."""
        attempts = self.set_up_retry.begin(f'waiting for the offset map topic {self.topic} on the target',
                                           clock=self._clock)
        while not describe_topics(self.target, [self.topic], include_mirror_topics=True):
            missing = Errors.UnknownTopicOrPartitionError(f'the target has no offset map topic {self.topic}: no '
                                                          'kafka-kip mirror wrote to it')
            if not wait_for_topic:
                raise missing
            attempts.failed(missing)  # a topic just created reaches the brokers' metadata a moment later
        self.target.track_topics([self.topic])
        self.maps = parse_map(self._read_all())
        return self.maps

    def _read_all(self) -> dict[bytes, bytes]:
        entries: dict[bytes, bytes] = {}
        offset = 0
        attempts = self.set_up_retry.begin(f'reading the offset map {self.tp.topic}-{self.tp.partition} on the '
                                           'target', clock=self._clock)
        while True:
            node, epoch = self.target.leader(self.tp)
            if node < 0:
                attempts.failed(Errors.LeaderNotAvailableError(f'no leader known for {self.tp.topic}-'
                                                               f'{self.tp.partition}'))
                self._refresh_metadata()
                continue
            request = requests.fetch({self.topic: [(0, epoch, offset, -1)]}, max_wait_ms=answers.SINGLE_READ_MAX_WAIT_MS,
                                 max_bytes=_LOAD_FETCH_BYTES, partition_max_bytes=_LOAD_FETCH_BYTES,
                                 isolation_level=constants.READ_UNCOMMITTED, min_bytes=0)
            data = answers.only_partition(self.target.request(request, node).responses)
            if data is None or answers.is_retriable(data.error_code):
                where = f'{self.tp.topic}-{self.tp.partition}'
                attempts.failed(Errors.UnknownTopicOrPartitionError(f'an answer without {where}') if data is None
                                else Errors.for_code(data.error_code)(f'fetching {where}'))
                self._refresh_metadata()
                continue
            if data.error_code == constants.OFFSET_OUT_OF_RANGE and offset < data.log_start_offset:
                offset = data.log_start_offset
                continue
            if data.error_code:
                raise Errors.for_code(data.error_code)(f'reading the offset map {self.topic} on the target failed')
            for header, view in iter_batches(data.records or b''):
                if header.attributes & CONTROL_MASK:
                    offset = header.last_offset + 1
                    continue
                for record in DefaultRecordBatch(bytes(view)):
                    if record.offset >= offset:
                        if record.value is None:
                            entries.pop(record.key, None)
                        else:
                            entries[record.key] = record.value
                offset = header.last_offset + 1
            if offset >= data.high_watermark:
                return entries

    def _refresh_metadata(self) -> None:
        """Ask for new metadata; a refresh that times out counts as nothing learnt (the retry's deadline rules)."""
        try:
            self.target.refresh()
        except Errors.KafkaTimeoutError:
            pass

    # -- writing (on the event loop) -----------------------------------------------------------

    def write(self, records: Mapping[bytes, bytes | None]) -> Future:
        """Queue ``records`` for the next round; the future resolves when they are on the target."""
        self._pending.update(records)
        future = Future()
        self._waiting.append(future)
        return future

    @property
    def idle(self) -> bool:
        return not self._pending and not self._in_flight

    def dispatch(self) -> None:
        """Send the next round if there is one and none is in flight."""
        if self._in_flight or not self._pending or time.monotonic() < self._retry_at:
            return
        node = self.target.leader(self.tp)[0]
        if node < 0:
            self.target.cluster.request_update()
            return
        keys = list(self._pending)[:_MAX_ROUND_RECORDS]
        round_ = {key: self._pending.pop(key) for key in keys}
        waiting = self._waiting if not self._pending else []
        self._waiting = self._waiting if self._pending else []
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**31 - 1)
        now = int(time.time() * 1000)
        for delta, (key, value) in enumerate(round_.items()):
            builder.append(delta, now, key, value, [])
        request = requests.produce({self.topic: [(0, builder.build())]}, acks=-1,
                               timeout_ms=self.target.request_timeout_ms, use_offset=False)
        self._in_flight = True
        self.target.send(request, node).add_both(self._answered, round_, waiting)

    def _answered(self, round_: dict[bytes, bytes | None], waiting: list[Future], result: Any) -> None:
        self._in_flight = False
        error: Any = result if isinstance(result, BaseException) else None
        if error is None:
            answer = answers.only_produced(result)
            code = -1 if answer is None else answer.error_code
            if code == constants.NONE:
                for future in waiting:
                    future.success(None)
                return
            error = answers.error_name(code) if code >= 0 else 'an answer without the partition'
            if code >= 0 and not answers.is_retriable(code):
                failure = Errors.for_code(code)(f'writing the offset map {self.topic} on the target failed')
                for future in waiting + self._waiting:
                    future.failure(failure)
                self._waiting = []
                return
        log.debug('writing the offset map failed (retried): %s', error)
        self.target.cluster.request_update()
        self._pending = {**round_, **self._pending}
        self._waiting = waiting + self._waiting
        self._retry_at = time.monotonic() + self._backoff
