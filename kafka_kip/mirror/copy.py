"""The copy core: record batches of source partitions written to the target at the same offsets.

A :class:`Copier` copies a set of source partitions (each optionally bounded to ``[start, end)``) to
target partitions. It fetches raw batches (Fetch v12, read-committed) and writes them as they are
(:mod:`kafka_kip.mirror.batches`), one producer session per partition:

* **Offsets.** ``offset_mode`` is an :class:`~kafka_kip.policies.OffsetMode` (what each one does:
  :mod:`kafka_kip.policies` and docs/KIP-391.md).
* **Exactly once.** Each partition writes with its own idempotent producer id (InitProducerId), the
  first batch of a session alone, then up to ``max_in_flight`` pipelined. Any failed or uncertain
  write ends the session: once the partition's writes are all answered, the copy resumes from the
  target's end (records below it are on the target: "already there") with a new producer id.
  INVALID_PRODUCE_OFFSET(log_end_offset) is that same signal with the end included.
* **Source safety (KIP-232/320).** Fetches carry the highest leader epoch seen (``current_leader_epoch``)
  and the epoch of the last batch read (``last_fetched_epoch``); the metadata cache refuses outdated
  metadata; an out-of-range fetch never resets to the log start, it is investigated. A partition keeps a
  small cache of the source epochs it read, so a truncation's divergence point is exact. On truncation
  the partition stops (``on_truncation='stop'``) or continues from the divergence point (``'closest'``),
  the target keeping what it already has: where that includes copies of lost records, the source's new
  records follow the target's end in translated mode (``auto``). Either way an :class:`Incident` reports
  the exact ranges.
* **Resume.** A partition started without an explicit offset resumes from the target's end. Before the
  first write the target's record just below the start is compared with the source's, which also finds
  a truncation that happened while no mirror ran (or between two ranges).

The copier has no global state and drives its clients' shared event loop in :meth:`Copier.poll`; the
caller owns the clients. :func:`copy_range` wraps it for one bounded range (e.g. a Spark task).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple

from kafka.net.selector import NetworkSelector
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.mirror import answers
from kafka_kip.mirror.alignment import Alignment
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.offset_map import MAP_TOPIC, OffsetMapStore, translate_offset
from kafka_kip.mirror.questions import PartitionQuestions
from kafka_kip.mirror.reader import SourceReader
from kafka_kip.mirror.recovery import Recovery
from kafka_kip.mirror.settings import CopySettings
from kafka_kip.mirror.state import (
    CopyState,
    Incident,
    IncidentKind,
    PartitionCopy,
    PartitionProgress,
    ReadCursor,
)
from kafka_kip.mirror.stats import CopyStats
from kafka_kip.mirror.writer import TargetWriter, plan_ahead
from kafka_kip.policies import AUTO, BROKER, STOP, TRANSLATED, parse_offset_mode
from kafka_kip.protocol.features import KIP_391

log = logging.getLogger(__name__)

_STOPPED_ENDS_EVERY_S = 2.0  # how often the source's end of stopped partitions is read (their lag)


class Copier:
    """Copies source partitions to target partitions, batch for batch, at the same offsets.

    ``source`` and ``target`` must share one event loop (``ClusterClient(..., net=same_selector)``) and
    be bootstrapped. Add partitions with :meth:`add`, then call :meth:`poll` until :attr:`done` (bounded
    partitions) or for as long as the mirror runs; :meth:`flush` finishes the writes in progress.
    ``on_incident`` is called with every :class:`Incident` (they are also kept in :attr:`incidents`).
    The other keyword arguments are :class:`~kafka_kip.mirror.settings.CopySettings` fields.
    """

    def __init__(self, source: ClusterClient, target: ClusterClient, *, offset_map: OffsetMapStore | None = None,
                 on_incident: Callable[[Incident], None] | None = None, **settings: Any) -> None:
        self.settings = CopySettings(**settings)
        if source.net is not target.net:
            raise ValueError('source and target clients must share one NetworkSelector')
        limit = source.manager.config['receive_message_max_bytes']
        if self.settings.fetch_max_bytes + 2**20 > limit:
            raise ValueError(f'fetch_max_bytes {self.settings.fetch_max_bytes} does not fit the source '
                             f"connections' receive_message_max_bytes {limit}")
        self.source, self.target = source, target
        self._net: NetworkSelector = source.net
        self._on_incident = on_incident
        self.incidents: list[Incident] = []
        self._partitions: dict[TopicPartition, PartitionCopy] = {}
        self._fetching = True
        self._error: BaseException | None = None
        self.offset_map = offset_map
        self.stats = CopyStats()
        questions = PartitionQuestions(source, target, self.settings, offset_map, self._stop)
        self._reader = SourceReader(source, self.settings, self, self._guarded, self.stats,
                                    questions.lookups.coalescer)
        self._writer = TargetWriter(target, self.settings, self._stop, self._gap, self._guarded, self.stats)
        self._ends_read_at = 0.0  # when the source's ends of stopped partitions were last read
        self._recovery = Recovery(questions, self.settings, self._report, self._stop)
        self._alignment = Alignment(questions, self.settings, self._stop)

    @property
    def offset_mode(self) -> str:
        return self.settings.offset_mode

    # -- public API ----------------------------------------------------------------------------

    def add(self, source_tp: TopicPartition, *, start: int | None = None, end: int | None = None,
            target_tp: TopicPartition | None = None) -> None:
        """Copy ``source_tp`` from ``start`` up to ``end`` (exclusive; None: for as long as the copier runs).

        ``start`` None resumes from the target's end (an empty target starts at the source's log start).
        Whenever the target already holds the record before the start, it is first compared with the
        source's, so a truncation the source had meanwhile is reported. In translated mode the offset map
        says where the copy stands (a ``start`` below it is skipped). Ranges of one partition must be
        copied in order: the copier does not fill the target below ``start``.
        """
        if source_tp in self._partitions:
            raise ValueError(f'{source_tp} is already being copied')
        target_tp = target_tp or source_tp
        with_offsets = self._target_supports_offsets(target_tp)  # may raise: then the partition is not added
        p = PartitionCopy(source_tp, target_tp, ReadCursor(start, end),
                          offset_map=self.offset_map.maps.get(target_tp) if self.offset_map else None,
                          source_topic_id=self.source.topic_id(source_tp.topic))
        self._partitions[source_tp] = p
        self._run_task(p, self._recovery.start(p, with_offsets))

    def _target_supports_offsets(self, tp: TopicPartition) -> bool:
        node = self.target.leader(tp)[0]
        if node < 0:
            self.target.refresh()
            node = self.target.leader(tp)[0]
        return node >= 0 and self.target.supports(node, KIP_391)

    def refuse(self, source_tp: TopicPartition, reason: str, *, target_tp: TopicPartition | None = None) -> None:
        """List ``source_tp`` as not copied, for ``reason`` (reported as a ``not-copied`` incident)."""
        if source_tp in self._partitions:
            raise ValueError(f'{source_tp} is already being copied')
        p = self._partitions[source_tp] = PartitionCopy(source_tp, target_tp or source_tp, ReadCursor(None, None))
        self._stop(p, IncidentKind.NOT_COPIED, reason)

    @property
    def partitions(self) -> list[TopicPartition]:
        return list(self._partitions)

    @property
    def done(self) -> bool:
        """True when every partition reached its end (or stopped). Unbounded partitions never do."""
        return all(p.state.final for p in self._partitions.values())

    def poll(self, timeout_ms: int = 100) -> None:
        """Send what can be sent, then wait up to ``timeout_ms`` for answers and handle them."""
        self._raise_error()
        self._dispatch()
        self._net.poll(timeout_ms=timeout_ms)
        self._raise_error()

    def flush(self, timeout_ms: int = 30000) -> bool:
        """Stop reading and write everything already read; True if it all got answered in time."""
        self._fetching = False
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            if all(p.idle for p in self._partitions.values()) and (self.offset_map is None or self.offset_map.idle):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.poll(min(50, int(left * 1000) + 1))

    def translate(self, source_tp: TopicPartition, offset: int) -> tuple[TopicPartition, int] | None:
        """The target partition and offset of the first record at or after source ``offset`` that is copied.

        Never beyond what is copied (an offset past it is taken to the end of what is). None when the
        partition is not copied here, is stopped, has copied nothing yet, or a task is settling it (a
        truncation being handled makes what was acknowledged stale).
        """
        p = self._partitions.get(source_tp)
        if p is None or p.state is CopyState.STOPPED or p.state.owned or p.acked.source < 0 or not p.mode:
            return None
        acked = p.acked
        found = translate_offset(p.mode, p.offset_map, offset, copied_to=acked.source, target_end=acked.target)
        return None if found is None else (p.target, found)

    def progress(self) -> list[PartitionProgress]:
        """The state of every partition."""
        return [p.progress() for p in list(self._partitions.values())]

    def copied_to(self, source_tp: TopicPartition) -> int:
        """Every source offset below this is on the target (-1: not copied here, or nothing known yet)."""
        p = self._partitions.get(source_tp)
        return -1 if p is None else p.acked.source

    # -- dispatch ------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        """One pass over the partitions (the hot loop at thousands of partitions: cluster lookups are
        memoized per topic and bound locally)."""
        now = time.monotonic()
        settings = self.settings
        fetching, buffer_bytes, max_in_flight = self._fetching, settings.buffer_bytes, settings.max_in_flight
        source_ids: dict[str, str | None] = {}
        target_cluster = self.target.cluster
        source_leader = self.source.leader
        target_leader = target_cluster.leader_for_partition
        wants_to_write = self._writer.wants_to_write
        fetch_by_node: dict[Any, list[PartitionCopy]] = {}
        produce_by_node: dict[Any, list[PartitionCopy]] = {}
        refresh_ends = now - self._ends_read_at >= _STOPPED_ENDS_EVERY_S
        stopped: list[PartitionCopy] = []  # their lag: the source's end read again
        for p in self._partitions.values():
            state = p.state
            if state.final:
                if refresh_ends and state is CopyState.STOPPED and p.acked.source >= 0:
                    stopped.append(p)
                continue
            if p.source_topic_id:
                topic = p.source.topic
                topic_id = source_ids[topic] if topic in source_ids else \
                    source_ids.setdefault(topic, self.source.topic_id(topic))
                if topic_id and topic_id != p.source_topic_id:
                    self._recovery.recreated(p, p.source_topic_id, topic_id)
                    continue
            if state is CopyState.BROKEN:
                if not p.outbox.in_flight:
                    self._run_task(p, self._recovery.recover(p), CopyState.RECOVERING)
                continue
            if state is not CopyState.COPYING or p.finish():
                continue
            cursor, outbox = p.cursor, p.outbox
            if not outbox.queue and not outbox.in_flight and cursor.position is not None:
                p.acked.source = max(p.acked.source, cursor.position)  # what is left was skipped (markers, gaps)
            node, epoch = source_leader(p.source)
            if epoch > cursor.leader_epoch:
                validate = cursor.leader_epoch >= 0 and cursor.epochs
                cursor.leader_epoch = epoch
                if validate:
                    self._run_task(p, self._recovery.validate(p), CopyState.VALIDATING)
                    continue
            if (fetching and not cursor.fetching and now >= cursor.retry_at and outbox.queued_bytes < buffer_bytes
                    and cursor.wants_more and node >= 0):
                fetch_by_node.setdefault(node, []).append(p)
            if p.mode == TRANSLATED:
                plan_ahead(p, self.offset_map, self._guarded(self._mapped), self._guarded(self._map_failed))
            if outbox.queue and wants_to_write(p, max_in_flight):
                target_node = target_leader(p.target)
                if target_node is not None and target_node >= 0:
                    produce_by_node.setdefault(target_node, []).append(p)
                else:
                    target_cluster.request_update()
        for node, parts in fetch_by_node.items():
            if self._reader.can_fetch(node):
                self._reader.send(node, parts)
        if refresh_ends:
            self._ends_read_at = now
            self._reader.refresh_ends(p for p in stopped  # not another incarnation's (recreated)
                                      if self.source.topic_id(p.source.topic) in (p.source_topic_id, None))
        for node, parts in produce_by_node.items():
            self._writer.send(node, parts)
        if self.offset_map is not None:
            self.offset_map.dispatch()

    def _mapped(self, p: PartitionCopy, generation: int, count: int, _: Any) -> None:
        if p.generation == generation:
            p.outbox.mapped += count

    def _map_failed(self, p: PartitionCopy, exc: BaseException) -> None:
        self._stop(p, IncidentKind.ERROR, f'{p.name}: the offset map cannot be written: {exc}')

    # -- what the reader cannot settle (FetchEvents) -------------------------------------------

    def diverged(self, p: PartitionCopy, epoch: int, end_offset: int) -> None:
        """The fetch answer names a diverging epoch: a truncation, or an answer to check with the leader."""
        point = p.cursor.epochs.divergence_point(p.cursor.position, epoch, end_offset)
        if point < p.cursor.position:
            self._run_task(p, self._recovery.truncated(p, point, 'the fetch response (diverging epoch)'),
                           CopyState.TRUNCATING)
        else:  # the answer contradicts what was read: ask the leader directly
            self._run_task(p, self._recovery.validate(p), CopyState.VALIDATING)

    def out_of_range(self, p: PartitionCopy) -> None:
        self._run_task(p, self._recovery.out_of_range(p), CopyState.INVESTIGATING)

    def unknown_topic(self, p: PartitionCopy) -> None:
        self._run_task(p, self._recovery.unknown_topic(p), CopyState.INVESTIGATING)

    def _gap(self, p: PartitionCopy) -> None:
        """Checked mode: the next batch cannot land at its source offset (it stays queued, unsent)."""
        self._run_task(p, self._alignment.remap(p), CopyState.REMAPPING)

    def fetch_failed(self, p: PartitionCopy, error_code: int) -> None:
        self._stop(p, IncidentKind.ERROR, f'fetching {p.name} failed: {answers.error_name(error_code)}')

    # -- tasks ---------------------------------------------------------------------------------

    def _run_task(self, p: PartitionCopy, coro: Coroutine, state: CopyState | None = None) -> None:
        """Run ``coro`` as the partition's owner (in ``state``; None: it already is in its task state)."""
        if state is not None:
            p.take_over(state)

        async def owner() -> None:
            try:
                await coro
            except Errors.KafkaError as exc:
                self._stop(p, IncidentKind.ERROR, f'{p.name}: {type(exc).__name__}: {exc}')
            except BaseException as exc:  # a bug: surface it from poll()
                self._error = exc
            finally:
                p.hand_back()

        self._net.call_soon(owner)

    # -- reports -------------------------------------------------------------------------------

    def _report(self, p: PartitionCopy, kind: IncidentKind, message: str, *, stopped: bool = False,
                lost: tuple[int, int] | None = None, divergent: tuple[int, int] | None = None,
                truncated_at: int | None = None, continued_at: int | None = None) -> None:
        incident = Incident(kind, p.source, p.target, stopped, message, lost, divergent, truncated_at, continued_at)
        (log.error if stopped else log.warning)('%s', message)
        self.incidents.append(incident)
        if self._on_incident is not None:
            self._on_incident(incident)

    def _stop(self, p: PartitionCopy, kind: IncidentKind, message: str, **ranges: Any) -> None:
        if p.stop():
            self._report(p, kind, message, stopped=True, **ranges)

    def _guarded(self, callback: Callable[..., None]) -> Callable[..., None]:
        """kafka-python logs and swallows callback exceptions; keep them to raise from poll()."""
        def run(*args: Any) -> None:
            try:
                callback(*args)
            except BaseException as exc:
                self._error = exc
        return run

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class RangeResult(NamedTuple):
    """What :func:`copy_range` did."""

    progress: PartitionProgress
    incidents: list[Incident]


def copy_range(source_bootstrap: str, target_bootstrap: str, source_tp: TopicPartition, start: int, end: int, *,
               target_tp: TopicPartition | None = None, offset_mode: str = BROKER, on_truncation: str = STOP,
               timeout_ms: int = 300_000, source_configs: dict[str, Any] | None = None,
               target_configs: dict[str, Any] | None = None, offset_map_topic: str = MAP_TOPIC,
               **copier_configs: Any) -> RangeResult:
    """Copy source offsets ``[start, end)`` of one partition to the target and return when done.

    Self-contained (own connections, no shared state), so it can run in a worker process. Records
    already on the target (below its end, or in translated mode below where its offset map ends) are
    left as they are. ``auto`` and ``translated`` keep the offset map in ``offset_map_topic`` on the
    target. Raises KafkaTimeoutError if the range is not done within ``timeout_ms``.
    """
    net = NetworkSelector()
    source = ClusterClient('source', source_bootstrap, net, **(source_configs or {}))
    target = ClusterClient('target', target_bootstrap, net, **(target_configs or {}))
    try:
        source.bootstrap()
        target.bootstrap()
        target_tp = target_tp or source_tp
        source.track_topics([source_tp.topic])
        target.track_topics([target_tp.topic])
        store = None
        if parse_offset_mode(offset_mode) in (AUTO, TRANSLATED):
            store = OffsetMapStore(target, offset_map_topic)
            store.open()
        copier = Copier(source, target, offset_map=store, offset_mode=offset_mode, on_truncation=on_truncation,
                        **copier_configs)
        copier.add(source_tp, start=start, end=end, target_tp=target_tp)
        deadline = time.monotonic() + timeout_ms / 1000
        while not copier.done:
            if time.monotonic() > deadline:
                raise Errors.KafkaTimeoutError(f'copying {source_tp} [{start}, {end}) took over {timeout_ms} ms')
            copier.poll(100)
        return RangeResult(copier.progress()[0], list(copier.incidents))
    finally:
        source.close()
        target.close()
        net.close()
