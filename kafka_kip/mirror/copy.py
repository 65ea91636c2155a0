"""The copy core: record batches of source partitions written to the target at the same offsets.

A :class:`Copier` copies a set of source partitions (each optionally bounded to ``[start, end)``) to
target partitions. It fetches raw batches (Fetch v12, read-committed) and writes them as they are
(:mod:`kafka_kip.mirror.batches`), one producer session per partition:

* **Offsets.** ``offset_mode='broker'`` produces with KIP-391 ``use_offset``, so every record lands at
  its source offset (gaps included); ``'checked'`` lets the broker assign offsets (stock brokers) and
  stops the partition the moment one differs from the source's; ``'off'`` does not preserve offsets.
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
  the target keeping what it already has; either way an :class:`Incident` reports the exact ranges.
* **Resume.** A partition started without an explicit offset resumes from the target's end. Before the
  first write the target's record just below the start is compared with the source's, which also finds
  a truncation that happened while no mirror ran (or between two ranges).

The copier has no global state and drives its clients' shared event loop in :meth:`Copier.poll`; the
caller owns the clients. :func:`copy_range` wraps it for one bounded range (e.g. a Spark task).
"""
from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from kafka.future import Future
from kafka.net.selector import NetworkSelector
from kafka.record.default_records import DefaultRecordBatch
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.mirror import wire
from kafka_kip.mirror.batches import (
    AbortedTransactions,
    Piece,
    iter_batches,
    rebuild,
    restamp,
)
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.protocol.features import KIP_391
from kafka_kip.protocol.record_batch import CONTROL_MASK, parse_header

log = logging.getLogger(__name__)

BROKER, CHECKED, OFF = 'broker', 'checked', 'off'
#: How target offsets relate to source offsets (see the module docstring).
OFFSET_MODES = (BROKER, CHECKED, OFF)
STOP, CLOSEST = 'stop', 'closest'
#: What a partition does when the source truncates below what was read.
TRUNCATION_POLICIES = (STOP, CLOSEST)

_EPOCH_CACHE = 32  # source epochs remembered per partition (divergence search)
_RESUME_SEARCH_BATCHES = 64  # target batches compared at most when a resume point does not match
_SEQUENCE_MODULUS = 2**31


@dataclass(frozen=True)
class Incident:
    """Data the copier could not copy as the source had it, reported instead of hidden.

    ``kind``: ``'truncation'`` (the source lost records the mirror had read: unclean election),
    ``'retention'`` (records deleted on the source before they were copied), ``'offset-gap'`` /
    ``'offset-mismatch'`` (``checked`` mode: the target cannot hold a record at its source offset) or
    ``'error'``. Ranges are ``[start, end)`` offsets: ``lost`` in the source's numbering, ``divergent``
    the target offsets that hold records the source no longer has at those offsets (records the source
    now has there are not on the target). ``truncated_at`` is None when the divergence point is unknown.
    """

    kind: str
    source: TopicPartition
    target: TopicPartition
    stopped: bool
    message: str
    lost: tuple[int, int] | None = None
    divergent: tuple[int, int] | None = None
    truncated_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out['source'] = f'{self.source.topic}-{self.source.partition}'
        out['target'] = f'{self.target.topic}-{self.target.partition}'
        return out


class PartitionProgress(NamedTuple):
    """A partition's copy state at one moment."""

    source: TopicPartition
    target: TopicPartition
    state: str  # 'starting', 'copying', 'recovering', 'stopped', 'done'
    position: int  # next source offset to read (-1 before the start is known)
    copied_to: int  # every source offset below this is on the target, skipped or reported
    target_end: int  # the target offset after the last acknowledged write
    source_end: int  # the source's high watermark as last fetched (-1 unknown)
    records: int  # records written by this copier
    bytes: int

    @property
    def lag(self) -> int:
        """Source records (offsets) not yet on the target; -1 when unknown."""
        if self.source_end < 0 or self.copied_to < 0:
            return -1
        return max(0, self.source_end - self.copied_to)


def _name(tp: TopicPartition) -> str:
    return f'{tp.topic}-{tp.partition}'


class _Unreadable(Exception):
    """A record needed for a resume check cannot be read (below the log start)."""


@dataclass(eq=False)
class _Partition:
    source: TopicPartition
    target: TopicPartition
    position: int | None
    end: int | None
    skip_records: int = 0
    leader_epoch: int = -1  # highest source leader epoch seen: fetched with as current_leader_epoch
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (source epoch, start offset) read
    skip_below: int = 0  # 'closest': source records below this stay as the target has them
    queue: deque = field(default_factory=deque)
    queued_bytes: int = 0
    in_flight: list = field(default_factory=list)
    next_write: int = 0  # 'checked': the target offset the next write must land at
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = 0
    probe: bool = True  # the first write of a producer session goes alone
    acked_source: int = -1
    acked_target: int = -1
    acked_epoch: int = -1
    source_end: int = -1
    records: int = 0
    bytes: int = 0
    fetching: bool = False
    retry_at: float = 0.0
    busy: bool = True  # a coroutine owns the partition (start, recovery, validation)
    failed: bool = False
    end_hint: int = -1  # the target's log end offset from INVALID_PRODUCE_OFFSET
    stopped: bool = False
    generation: int = 0
    drained: Future | None = None

    @property
    def last_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else -1

    def clear_queue(self) -> None:
        self.queue.clear()
        self.queued_bytes = 0

    def note_epoch(self, epoch: int, offset: int) -> None:
        if epoch >= 0 and epoch > self.last_epoch:
            self.epochs.append((epoch, offset))
            del self.epochs[:-_EPOCH_CACHE]

    def truncate_epochs(self, offset: int) -> None:
        self.epochs = [entry for entry in self.epochs if entry[1] < offset]

    @property
    def done(self) -> bool:
        return self.stopped or (self.end is not None and self.position is not None and self.position >= self.end
                                and not self.queue and not self.in_flight and not self.busy and not self.failed)


class Copier:
    """Copies source partitions to target partitions, batch for batch, at the same offsets.

    ``source`` and ``target`` must share one event loop (``ClusterClient(..., net=same_selector)``) and
    be bootstrapped. Add partitions with :meth:`add`, then call :meth:`poll` until :attr:`done` (bounded
    partitions) or for as long as the mirror runs; :meth:`flush` finishes the writes in progress.
    ``on_incident`` is called with every :class:`Incident` (they are also kept in :attr:`incidents`).
    """

    def __init__(self, source: ClusterClient, target: ClusterClient, *, offset_mode: str = BROKER,
                 on_truncation: str = STOP, idempotent: bool = True, acks: int = -1,
                 fetch_max_wait_ms: int = 500, fetch_max_bytes: int = 50 * 2**20,
                 max_partition_fetch_bytes: int = 2**20, buffer_bytes: int = 8 * 2**20,
                 max_in_flight: int = 5, retry_backoff_ms: int = 100, recovery_timeout_ms: int = 120_000,
                 on_incident: Callable[[Incident], None] | None = None) -> None:
        if offset_mode not in OFFSET_MODES:
            raise ValueError(f'offset_mode must be one of {OFFSET_MODES}, got {offset_mode!r}')
        if on_truncation not in TRUNCATION_POLICIES:
            raise ValueError(f'on_truncation must be one of {TRUNCATION_POLICIES}, got {on_truncation!r}')
        if source.net is not target.net:
            raise ValueError('source and target clients must share one NetworkSelector')
        limit = source.manager.config['receive_message_max_bytes']
        if fetch_max_bytes + 2**20 > limit:
            raise ValueError(f'fetch_max_bytes {fetch_max_bytes} does not fit the source connections\' '
                             f'receive_message_max_bytes {limit}')
        if not 1 <= max_in_flight <= 5:
            raise ValueError('max_in_flight must be 1..5 (idempotent producers allow at most 5)')
        self.source, self.target = source, target
        self._net: NetworkSelector = source.net
        self.offset_mode = offset_mode
        self.on_truncation = on_truncation
        self.idempotent = idempotent
        self.acks = acks
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.buffer_bytes = buffer_bytes
        self.max_in_flight = max_in_flight
        self._backoff = retry_backoff_ms / 1000
        self._recovery_timeout = recovery_timeout_ms / 1000
        self._on_incident = on_incident
        self.incidents: list[Incident] = []
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._fetches: dict[Any, int] = {}
        self._fetch_failures: dict[Any, int] = {}
        self._produces: dict[Any, int] = {}
        self._fetching = True
        self._error: BaseException | None = None

    # -- public API ----------------------------------------------------------------------------

    def add(self, source_tp: TopicPartition, *, start: int | None = None, end: int | None = None,
            target_tp: TopicPartition | None = None, target_start: int | None = None) -> None:
        """Copy ``source_tp`` from ``start`` up to ``end`` (exclusive; None: for as long as the copier runs).

        ``start`` None resumes from the target's end (an empty target starts at the source's log start).
        Whenever the target already holds the record before the start, it is first compared with the
        source's, so a truncation the source had meanwhile is reported. With ``offset_mode='off'``,
        ``start`` None is the source's log start, and ``target_start`` is the target's end offset when
        every source record below ``start`` was on it (a checkpoint): records the target gained since are
        taken to be the next source records and are not written again. Ranges of one partition must be
        copied in order: the copier does not fill the target below ``start``.
        """
        if source_tp in self._partitions:
            raise ValueError(f'{source_tp} is already being copied')
        p = _Partition(source_tp, target_tp or source_tp, start, end,
                       acked_target=-1 if target_start is None else target_start)
        self._partitions[source_tp] = p
        self._spawn(p, self._start(p))

    @property
    def partitions(self) -> list[TopicPartition]:
        return list(self._partitions)

    @property
    def done(self) -> bool:
        """True when every partition reached its end (or stopped). Unbounded partitions never do."""
        return all(p.done for p in self._partitions.values())

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
        while time.monotonic() < deadline:
            if all(p.stopped or (not p.queue and not p.in_flight and not p.busy and not p.failed)
                   for p in self._partitions.values()):
                return True
            self.poll(50)
        return False

    def progress(self) -> list[PartitionProgress]:
        """The state of every partition."""
        out = []
        for p in self._partitions.values():
            if p.stopped:
                state = 'stopped'
            elif p.done:
                state = 'done'
            elif p.position is None:
                state = 'starting'
            elif p.busy or p.failed:
                state = 'recovering'
            else:
                state = 'copying'
            # 'off' mode: records still to be skipped are on the target but not yet below acked_source
            target_end = p.acked_target - p.skip_records if p.acked_target >= 0 else -1
            out.append(PartitionProgress(p.source, p.target, state, -1 if p.position is None else p.position,
                                         p.acked_source, target_end, p.source_end, p.records, p.bytes))
        return out

    # -- dispatch ------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        now = time.monotonic()
        fetch_by_node: dict[Any, list[_Partition]] = {}
        produce_by_node: dict[Any, list[_Partition]] = {}
        for p in self._partitions.values():
            if p.stopped or p.busy:
                continue
            if p.failed:
                if not p.in_flight:
                    self._spawn(p, self._recover(p))
                continue
            node, epoch = self.source.leader(p.source)
            if epoch > p.leader_epoch:
                validate = p.leader_epoch >= 0 and p.epochs
                p.leader_epoch = epoch
                if validate:
                    self._spawn(p, self._validate(p))
                    continue
            if (self._fetching and not p.fetching and node >= 0 and now >= p.retry_at
                    and p.queued_bytes < self.buffer_bytes and (p.end is None or p.position < p.end)):
                fetch_by_node.setdefault(node, []).append(p)
            if p.queue and len(p.in_flight) < (1 if p.probe or p.producer_id < 0 else self.max_in_flight):
                target_node = self.target.leader(p.target)[0]
                if target_node >= 0:
                    produce_by_node.setdefault(target_node, []).append(p)
                else:
                    self.target.cluster.request_update()
        for node, parts in fetch_by_node.items():
            if self._fetches.get(node, 0) < 2:
                self._send_fetch(node, parts)
        for node, parts in produce_by_node.items():
            self._send_produces(node, parts)

    # -- reading the source --------------------------------------------------------------------

    def _send_fetch(self, node: Any, parts: list[_Partition]) -> None:
        by_topic: dict[str, list[tuple[int, int, int, int]]] = {}
        sent = {}
        for p in parts:
            p.fetching = True
            by_topic.setdefault(p.source.topic, []).append(
                (p.source.partition, p.leader_epoch, p.position, p.last_epoch))
            sent[(p.source.topic, p.source.partition)] = (p, p.generation, p.position)
        request = wire.fetch(by_topic, max_wait_ms=self.fetch_max_wait_ms, max_bytes=self.fetch_max_bytes,
                             partition_max_bytes=self.max_partition_fetch_bytes)
        self._fetches[node] = self._fetches.get(node, 0) + 1
        self.source.send(request, node).add_both(self._guarded(self._on_fetch), node, sent)

    def _on_fetch(self, node: Any, sent: dict, result: Any) -> None:
        self._fetches[node] -= 1
        for p, _, _ in sent.values():
            p.fetching = False
        if isinstance(result, BaseException):
            failures = self._fetch_failures[node] = self._fetch_failures.get(node, 0) + 1
            (log.warning if failures % 100 == 1 else log.debug)(
                'fetching from source node %s failed (%d in a row): %s', node, failures, result)
            self._source_trouble(p for p, _, _ in sent.values())
            return
        self._fetch_failures.pop(node, None)
        if result.error_code:
            self._source_trouble(p for p, _, _ in sent.values())
            return
        for topic in result.responses:
            for data in topic.partitions:
                p, generation, offset = sent[(topic.topic, data.partition_index)]
                if p.generation != generation or p.busy or p.stopped or p.position != offset:
                    continue
                code = data.error_code
                if code == wire.NONE:
                    diverging = data.diverging_epoch
                    if diverging is not None and diverging.end_offset >= 0:
                        point = self._divergence_point(p, diverging.epoch, diverging.end_offset)
                        if point < p.position:
                            self._spawn(p, self._truncated(p, point, 'the fetch response (diverging epoch)'))
                        else:  # the answer contradicts what was read: ask the leader directly
                            self._spawn(p, self._validate(p))
                        continue
                    if data.high_watermark >= 0:
                        p.source_end = data.high_watermark
                    if data.records:
                        aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
                        self._read(p, data.records, aborted)
                elif code == wire.OFFSET_OUT_OF_RANGE:
                    self._spawn(p, self._out_of_range(p))
                elif wire.is_retriable(code):
                    self._source_trouble([p])
                else:
                    self._stop(p, 'error', f'fetching {_name(p.source)} failed: {wire.error_name(code)}')

    def _source_trouble(self, parts: Any) -> None:
        retry_at = time.monotonic() + self._backoff
        for p in parts:
            p.retry_at = retry_at
        self.source.cluster.request_update()

    def _read(self, p: _Partition, records: bytes, aborted: list[tuple[int, int]]) -> None:
        """Queue the batches of a fetched blob from ``p.position`` on; the hot path decodes no record."""
        position, end, skip_below = p.position, p.end, p.skip_below
        txn = AbortedTransactions(aborted) if aborted else None
        queue = p.queue
        queued = 0
        for header, view in iter_batches(records):
            base = header.base_offset
            last = base + header.last_offset_delta
            if last < position:
                continue
            if end is not None and base >= end:
                position = max(position, end)
                break
            p.note_epoch(header.partition_leader_epoch, base)
            if ((txn is not None and txn.is_aborted(header, view)) or header.attributes & CONTROL_MASK
                    or header.records_count == 0 or last < skip_below):
                position = last + 1
                continue
            if (base >= position and base >= skip_below and not p.skip_records
                    and header.records_count == header.last_offset_delta + 1 and (end is None or last < end)):
                queue.append(Piece(base, last, header.records_count, view, header.partition_leader_epoch))
                queued += len(view)
            else:
                queued += self._read_slow(p, header, view, max(position, skip_below))
            position = last + 1
        p.position = position
        p.queued_bytes += queued

    def _read_slow(self, p: _Partition, header: Any, view: memoryview, low: int) -> int:
        """Cut a batch at ``low`` / ``p.end`` / its gaps / ``p.skip_records`` (decodes its records)."""
        if p.skip_records:
            # 'off' mode resume: these records reached the target before the checkpoint was written
            offsets = [record.offset for record in DefaultRecordBatch(bytes(view))
                       if record.offset >= low and (p.end is None or record.offset < p.end)]
            skipped = offsets[:p.skip_records]
            p.skip_records -= len(skipped)
            if skipped and not p.queue and not p.in_flight:
                p.acked_source = skipped[-1] + 1
            if len(skipped) == len(offsets):
                return 0
            low = offsets[len(skipped)]
        queued = 0
        for data in rebuild(view, header, low, p.end):
            piece = parse_header(data)
            p.queue.append(Piece(piece.base_offset, piece.last_offset, piece.records_count, data,
                                 header.partition_leader_epoch))
            queued += len(data)
        return queued

    # -- writing the target --------------------------------------------------------------------

    def _send_produces(self, node: Any, parts: list[_Partition]) -> None:
        use_offset = self.offset_mode == BROKER
        if use_offset and not self.target.supports(node, KIP_391):
            for p in parts:
                self._stop(p, 'error', f'target broker {node} does not support producing with offsets '
                                       f"(feature {KIP_391!r}); use offset_mode 'checked' or 'off'")
            return
        while self._produces.get(node, 0) < self.max_in_flight:
            batches: dict[str, list[tuple[int, bytearray]]] = {}
            sent = {}
            for p in parts:
                limit = 1 if p.probe or p.producer_id < 0 else self.max_in_flight
                if p.stopped or p.busy or p.failed or not p.queue or len(p.in_flight) >= limit:
                    continue
                piece = p.queue.popleft()
                p.queued_bytes -= len(piece.data)
                if self.offset_mode == CHECKED:
                    if piece.base_offset != p.next_write:
                        self._stop(p, 'offset-gap', f'{_name(p.source)} has no records at offsets {p.next_write}..'
                                   f'{piece.base_offset - 1}; a target without produce-with-offsets cannot keep '
                                   'the offsets after a gap', lost=(p.next_write, piece.base_offset))
                        continue
                    p.next_write = piece.last_offset + 1
                if p.producer_id >= 0:
                    data = restamp(piece.data, p.producer_id, p.producer_epoch, p.sequence)
                    p.sequence = (p.sequence + piece.records) % _SEQUENCE_MODULUS
                else:
                    data = restamp(piece.data, -1, -1, -1)
                p.in_flight.append(piece)
                batches.setdefault(p.target.topic, []).append((p.target.partition, data))
                sent[(p.target.topic, p.target.partition)] = (p, piece)
            if not sent:
                return
            request = wire.produce(batches, acks=self.acks, timeout_ms=self.target.request_timeout_ms,
                                   use_offset=use_offset)
            self._produces[node] = self._produces.get(node, 0) + 1
            self.target.send(request, node).add_both(self._guarded(self._on_produce), node, sent)

    def _on_produce(self, node: Any, sent: dict, result: Any) -> None:
        self._produces[node] -= 1
        if isinstance(result, BaseException):
            log.debug('produce to target node %s failed: %s', node, result)
            self.target.cluster.request_update()
            for p, piece in sent.values():
                self._write_failed(p, piece, -1)
            return
        for topic in result.responses:
            for answer in topic.partition_responses:
                p, piece = sent.pop((topic.name, answer.index))
                self._answered(p, piece, answer)
        for p, piece in sent.values():  # a broker that left a partition out of its answer
            self._write_failed(p, piece, -1)

    def _answered(self, p: _Partition, piece: Piece, answer: Any) -> None:
        code = answer.error_code
        if code in (wire.NONE, wire.DUPLICATE_SEQUENCE_NUMBER):
            p.in_flight.remove(piece)
            if self.offset_mode == CHECKED and code == wire.NONE and answer.base_offset != piece.base_offset:
                self._stop(p, 'offset-mismatch', f'{_name(p.target)} wrote source offsets {piece.base_offset}..'
                           f'{piece.last_offset} at offset {answer.base_offset}',
                           divergent=(answer.base_offset, answer.base_offset + piece.records))
            if self.offset_mode == OFF:
                base = answer.base_offset if code == wire.NONE else p.acked_target
                p.acked_target = base + piece.records
            else:
                p.acked_target = piece.last_offset + 1
            p.acked_source = max(p.acked_source, piece.last_offset + 1)
            p.acked_epoch = piece.leader_epoch
            p.records += piece.records
            p.bytes += len(piece.data)
            p.probe = False
            self._maybe_drained(p)
        elif code in wire.SESSION_ERRORS or wire.is_retriable(code):
            if code not in wire.SESSION_ERRORS:
                self.target.cluster.request_update()
            self._write_failed(p, piece, getattr(answer, 'log_end_offset', -1)
                               if code == wire.INVALID_PRODUCE_OFFSET else -1)
        else:
            p.in_flight.remove(piece)
            self._stop(p, 'error', f'writing {_name(p.target)} failed: {wire.error_name(code)}'
                       f'{": " + answer.error_message if getattr(answer, "error_message", None) else ""}')
            self._maybe_drained(p)

    def _write_failed(self, p: _Partition, piece: Piece, end_hint: int) -> None:
        p.in_flight.remove(piece)
        p.failed = True
        p.end_hint = max(p.end_hint, end_hint)
        self._maybe_drained(p)

    def _maybe_drained(self, p: _Partition) -> None:
        if not p.in_flight and p.drained is not None:
            drained, p.drained = p.drained, None
            drained.success(None)

    # -- partition coroutines ------------------------------------------------------------------

    def _spawn(self, p: _Partition, coro: Coroutine) -> None:
        """Run ``coro`` as the partition's owner: no reads or writes of it until it ends."""
        p.busy = True
        p.generation += 1

        async def owner() -> None:
            try:
                await coro
            except Errors.KafkaError as exc:
                self._stop(p, 'error', f'{_name(p.source)}: {type(exc).__name__}: {exc}')
            except BaseException as exc:  # a bug: surface it from poll()
                self._error = exc
            finally:
                p.busy = False

        self._net.call_soon(owner)

    async def _start(self, p: _Partition) -> None:
        await self._new_session(p)
        target_end = await self._target_end(p)
        if self.offset_mode == OFF:
            if p.position is None:
                p.position = await self._source_offset(p, wire.EARLIEST)
            p.skip_records = max(0, target_end - p.acked_target) if p.acked_target >= 0 else 0
            p.acked_target = target_end
        else:
            if p.position is None:
                p.position = target_end if target_end > 0 else await self._source_offset(p, wire.EARLIEST)
            p.acked_target = p.position
        p.acked_source = p.next_write = p.position
        if self.offset_mode != OFF and 0 < p.position <= target_end:
            await self._verify_resume(p)

    async def _new_session(self, p: _Partition) -> None:
        """A fresh idempotent producer id for the partition (none when the target cannot give one)."""
        p.sequence, p.probe = 0, True
        p.producer_id = p.producer_epoch = -1
        if not self.idempotent:
            return
        try:
            response = await self._ask(self.target, lambda _: wire.init_producer_id(),
                                       lambda: (self.target.manager.least_loaded_node(), -1), lambda r: r)
        except Errors.KafkaError as exc:
            if exc.retriable:
                raise
            log.warning('%s: the target gives no producer id (%s); writing one batch at a time without '
                        'idempotence', p.target, exc)
            return
        p.producer_id, p.producer_epoch = response.producer_id, response.producer_epoch

    async def _recover(self, p: _Partition) -> None:
        """After failed or uncertain writes: continue from what the target has, with a new session."""
        p.clear_queue()
        if self.offset_mode == OFF:
            end = await self._target_end(p)
            p.position = p.acked_source
            p.skip_records += max(0, end - p.acked_target)
            p.acked_target = max(end, p.acked_target)
        else:
            end = p.end_hint if p.end_hint >= 0 else await self._target_end(p)
            known = end == p.acked_source
            p.position = p.acked_source = p.acked_target = p.next_write = end
            p.truncate_epochs(end)
            if known:
                p.note_epoch(p.acked_epoch, end - 1)
            elif end > 0:
                await self._verify_resume(p)
        p.failed, p.end_hint = False, -1
        await self._new_session(p)

    async def _validate(self, p: _Partition) -> None:
        """KIP-320: after a source leader change, check that the new leader still has what was read."""
        epoch = p.last_epoch
        answer = await self._ask(
            self.source, lambda leader_epoch: wire.offset_for_leader_epoch(p.source, leader_epoch, epoch),
            lambda: self._source_leader(p), lambda r: r.topics[0].partitions[0])
        if answer.end_offset < 0 or answer.leader_epoch < 0:
            await self._truncated(p, None, 'OffsetForLeaderEpoch (the leader has no epoch at or below '
                                           f'{epoch})')
        elif answer.end_offset < p.position or answer.leader_epoch < epoch:
            point = self._divergence_point(p, answer.leader_epoch, answer.end_offset)
            if point < p.position:
                await self._truncated(p, point, 'OffsetForLeaderEpoch')

    async def _out_of_range(self, p: _Partition) -> None:
        """A fetch offset out of range is investigated, never answered by resetting to the log start."""
        start = await self._source_offset(p, wire.EARLIEST)
        if p.position < start:
            self._report(p, 'retention', f'{_name(p.source)}: records {p.position}..{start - 1} were deleted on the '
                         'source before they were copied', lost=(p.position, start))
            p.position = start
            p.truncate_epochs(0)
            return
        end = await self._source_offset(p, wire.LATEST)
        if p.position > end and p.epochs:
            await self._validate(p)
        if not p.stopped:
            # the source has not reached the position yet (or a stale broker answered): ask again later
            p.retry_at = time.monotonic() + 10 * self._backoff

    async def _truncated(self, p: _Partition, point: int | None, found_by: str) -> None:
        """The source lost records at or above ``point`` that were read: report, then stop or continue."""
        read_end = p.position
        p.clear_queue()
        await self._drain(p)
        if self.offset_mode == OFF:
            target_end = p.acked_source
        else:
            target_end = max(await self._target_end(p), p.acked_source)
        if point is None:
            self._stop(p, 'truncation', f'{_name(p.source)}: the source truncated its log below offset {read_end} '
                       f'(found by {found_by}); the divergence point is unknown; partition stopped')
            return
        divergent = (point, target_end) if target_end > point and self.offset_mode != OFF else None
        message = (f'{_name(p.source)}: the source truncated its log at offset {point} (found by {found_by}): '
                   f'records {point}..{read_end - 1} that were read are gone from the source')
        if divergent:
            message += (f'; the target keeps its copies at offsets {point}..{target_end - 1}, where the source '
                        'now has other records or none')
        if self.on_truncation == STOP:
            self._stop(p, 'truncation', message + '; partition stopped', lost=(point, read_end),
                       divergent=divergent, truncated_at=point)
            return
        if divergent:
            message += f'; continuing from the truncation point: source records from {target_end} on are copied'
        else:
            message += '; continuing from the truncation point'
        self._report(p, 'truncation', message, lost=(point, read_end), divergent=divergent, truncated_at=point)
        p.position = point
        p.truncate_epochs(point)
        if self.offset_mode != OFF:
            p.skip_below = max(p.skip_below, target_end)
            p.acked_source = p.acked_target = p.next_write = target_end
        p.failed, p.end_hint = False, -1
        await self._new_session(p)

    async def _drain(self, p: _Partition) -> None:
        if p.in_flight:
            p.drained = Future()
            await p.drained

    def _divergence_point(self, p: _Partition, leader_epoch: int, end_offset: int) -> int:
        """Where our read log and the leader's part (Kafka's follower truncation rule, from our epoch cache)."""
        ours_end = p.position
        for epoch, start in p.epochs:
            if epoch > leader_epoch:
                ours_end = start
                break
        return min(end_offset, ours_end, p.position)

    # -- resume checks -------------------------------------------------------------------------

    async def _verify_resume(self, p: _Partition) -> None:
        """Check that the target's last record (below ``p.position``) is the source's; learn its epoch.

        A mismatch means the source truncated while nothing was copying: the divergence point is found
        by comparing records backwards (batch by batch, up to a limit) and handled like any truncation.
        When the source no longer has the record (retention moved its log start past it) there is
        nothing to compare; the copy continues and a retention gap is reported if records are missing.
        """
        resume = p.position
        source: dict[int, tuple] = {}
        source_epoch = -1
        offset = resume - 1
        try:
            for _ in range(_RESUME_SEARCH_BATCHES):
                target, _ = await self._records_at(self.target, p.target, offset, None)
                mine = sorted((o for o in target if o <= offset), reverse=True)
                if not mine:
                    break
                for o in mine:
                    if o not in source:
                        source, source_epoch = await self._records_at(self.source, p.source, o, p)
                    if source.get(o) == target[o]:
                        p.note_epoch(source_epoch, o)
                        if o + 1 < resume:
                            await self._truncated(p, o + 1, 'comparing the target with the source on resume')
                        return
                offset = mine[-1] - 1
                if offset < 0:
                    await self._truncated(p, 0, 'comparing the target with the source on resume')
                    return
        except _Unreadable as unreadable:
            if unreadable.args[0] == resume - 1:
                log.info('%s: the source no longer has offset %d; the resume point cannot be checked',
                         _name(p.source), resume - 1)
                return
        await self._truncated(p, None, 'comparing the target with the source on resume')

    async def _records_at(self, client: ClusterClient, tp: TopicPartition, offset: int,
                          p: _Partition | None) -> tuple[dict[int, tuple], int]:
        """The records of the batch holding ``offset`` as ``{offset: (key, value, headers)}`` + its epoch.

        Empty when the log has no record there (gap or past the end); raises _Unreadable below the start.
        """
        def leader() -> tuple[int, int]:
            return self._source_leader(p) if p is not None else client.leader(tp)

        request = wire.fetch({tp.topic: [(tp.partition, -1, offset, -1)]}, max_wait_ms=0,
                             max_bytes=self.max_partition_fetch_bytes,
                             partition_max_bytes=self.max_partition_fetch_bytes)

        def build(leader_epoch: int) -> Any:
            request.topics[0].partitions[0].current_leader_epoch = leader_epoch
            return request

        data = await self._ask(client, build, leader, lambda r: r.responses[0].partitions[0],
                               tolerate=(wire.OFFSET_OUT_OF_RANGE,))
        if data.error_code == wire.OFFSET_OUT_OF_RANGE:
            if offset < data.log_start_offset or data.high_watermark < 0:
                raise _Unreadable(offset)
            return {}, -1
        for header, view in iter_batches(data.records or b''):
            if header.base_offset + header.last_offset_delta >= offset and not header.attributes & CONTROL_MASK:
                records = {r.offset: (r.key, r.value, list(r.headers)) for r in DefaultRecordBatch(bytes(view))}
                return records, header.partition_leader_epoch
        return {}, -1

    # -- single requests with retries ----------------------------------------------------------

    def _source_leader(self, p: _Partition) -> tuple[int, int]:
        node, epoch = self.source.leader(p.source)
        p.leader_epoch = max(p.leader_epoch, epoch)
        return node, p.leader_epoch

    async def _target_end(self, p: _Partition) -> int:
        """The target partition's high watermark (what is durably there)."""
        answer = await self._ask(
            self.target, lambda leader_epoch: wire.list_offsets([(p.target, leader_epoch)], wire.LATEST),
            lambda: self.target.leader(p.target), lambda r: r.topics[0].partitions[0])
        return answer.offset

    async def _source_offset(self, p: _Partition, timestamp: int) -> int:
        answer = await self._ask(
            self.source, lambda leader_epoch: wire.list_offsets([(p.source, leader_epoch)], timestamp,
                                                                wire.READ_COMMITTED),
            lambda: self._source_leader(p), lambda r: r.topics[0].partitions[0])
        return answer.offset

    async def _ask(self, client: ClusterClient, build: Callable[..., Any], leader: Callable[[], tuple[int, int]],
                   pick: Callable[[Any], Any], tolerate: tuple[int, ...] = ()) -> Any:
        """Send ``build(leader_epoch)`` to ``leader()``'s node until it answers without a retriable error.

        ``pick`` selects the part of the response whose ``error_code`` counts. Raises the Kafka error
        for a non-retriable code, or KafkaTimeoutError after ``recovery_timeout_ms``.
        """
        deadline = time.monotonic() + self._recovery_timeout
        while True:
            node, epoch = leader()
            failure: Any = None
            if node is not None and node != -1:
                try:
                    answer = pick(await client.send(build(epoch), node))
                except Errors.KafkaError as exc:
                    if not exc.retriable:
                        raise
                    failure = exc
                else:
                    code = getattr(answer, 'error_code', 0)
                    if code == wire.NONE or code in tolerate:
                        return answer
                    if not wire.is_retriable(code):
                        raise Errors.for_code(code)(f'{client.name} cluster answered {wire.error_name(code)}')
                    failure = wire.error_name(code)
            client.cluster.request_update()
            if time.monotonic() >= deadline:
                raise Errors.KafkaTimeoutError(f'{client.name} cluster: no usable answer ({failure})')
            await self._net.sleep(self._backoff)

    # -- reports -------------------------------------------------------------------------------

    def _report(self, p: _Partition, kind: str, message: str, *, stopped: bool = False,
                lost: tuple[int, int] | None = None, divergent: tuple[int, int] | None = None,
                truncated_at: int | None = None) -> None:
        incident = Incident(kind, p.source, p.target, stopped, message, lost, divergent, truncated_at)
        (log.error if stopped else log.warning)('%s', message)
        self.incidents.append(incident)
        if self._on_incident is not None:
            self._on_incident(incident)

    def _stop(self, p: _Partition, kind: str, message: str, **ranges: Any) -> None:
        if p.stopped:
            return
        p.stopped = True
        p.clear_queue()
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
               target_configs: dict[str, Any] | None = None, **copier_configs: Any) -> RangeResult:
    """Copy source offsets ``[start, end)`` of one partition to the target and return when done.

    Self-contained (own connections, no shared state), so it can run in a worker process. Records
    already on the target (below its end) are left as they are. Raises KafkaTimeoutError if the range
    is not done within ``timeout_ms``.
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
        copier = Copier(source, target, offset_mode=offset_mode, on_truncation=on_truncation, **copier_configs)
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
