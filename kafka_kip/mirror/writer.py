"""Writing the target: queued batches restamped for the partition's producer session and produced.

One produce request per target node carries at most one batch per partition; a partition has up to
``max_in_flight`` batches in flight (one while its session's first write is unanswered). An answer
acknowledges the batch (the partition's :class:`~kafka_kip.mirror.state.Acknowledged` moves on), breaks
the session (the write may or may not have landed: the partition recovers from the target's end), or
stops the partition.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any, NamedTuple

import kafka_kip.errors as Errors
from kafka_kip.mirror import answers
from kafka_kip.mirror.batches import Piece, restamp
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.offset_map import OffsetMapStore, Run, run_records
from kafka_kip.mirror.settings import CopySettings
from kafka_kip.mirror.state import CopyState, IncidentKind, PartitionCopy
from kafka_kip.mirror.stats import CopyStats
from kafka_kip.policies import BROKER, CHECKED, TRANSLATED
from kafka_kip.protocol import constants, requests
from kafka_kip.protocol.features import KIP_391

log = logging.getLogger(__name__)

_SEQUENCE_MODULUS = 2**31
Stop = Callable[..., None]  # stop(partition, kind, message, **ranges)


class WrittenPiece(NamedTuple):
    """One batch of a produce in flight: its partition and the target offset it must land at."""

    partition: PartitionCopy
    piece: Piece
    target_offset: int


@dataclass(frozen=True)
class ProduceInFlight:
    """A produce sent to a target node: its batches by target ``(topic, partition)``."""

    node: Any
    batches: dict[tuple[str, int], WrittenPiece]
    sent_at: float


class TargetWriter:
    """Sends queued batches to the target and settles the answers.

    ``gap(p)`` is called when a checked-mode partition's next batch cannot land at its source offset
    (it stays queued, unsent).
    """

    def __init__(self, target: ClusterClient, settings: CopySettings, stop: Stop, gap: Callable[[PartitionCopy], None],
                 guarded: Any, stats: CopyStats) -> None:
        self.target = target
        self._stats = stats
        self.settings = settings
        self._stop = stop
        self._gap = gap
        self._guarded = guarded
        self._in_flight: dict[Any, int] = {}

    @staticmethod
    def wants_to_write(p: PartitionCopy, max_in_flight: int) -> bool:
        outbox = p.outbox
        return (bool(outbox.queue) and len(outbox.in_flight) < p.session.limit(max_in_flight)
                and (p.mode != TRANSLATED or outbox.mapped > 0))

    def send(self, node: Any, parts: list[PartitionCopy]) -> None:
        with_offsets = [p for p in parts if p.mode == BROKER]
        try:
            speaks_offsets = bool(with_offsets) and self.target.supports(node, KIP_391)
        except Errors.KafkaError as exc:  # the leader is down and the metadata still names it
            if not exc.retriable:
                raise
            self._stats.produce_errors[type(exc).__name__] += 1
            log.debug('connecting to target node %s failed (written after a metadata update): %s', node, exc)
            self.target.cluster.request_update()
            return
        if with_offsets and not speaks_offsets:
            for p in with_offsets:
                self._stop(p, IncidentKind.ERROR, f'target broker {node} does not support producing with offsets '
                                                  f"(feature {KIP_391!r}); use offset_mode 'auto' or 'translated'")
            with_offsets = []
        for group, use_offset in ((with_offsets, True), ([p for p in parts if p.mode != BROKER], False)):
            if group:
                self._send(node, group, use_offset)

    def _send(self, node: Any, parts: list[PartitionCopy], use_offset: bool) -> None:
        settings = self.settings
        while self._in_flight.get(node, 0) < settings.max_in_flight:
            batches: dict[str, list[tuple[int, bytearray]]] = {}
            sent = {}
            for p in parts:
                if p.state is not CopyState.COPYING or not self.wants_to_write(p, settings.max_in_flight):
                    continue
                written = self._next_batch(p)
                if written is None:
                    continue
                batches.setdefault(p.target.topic, []).append((p.target.partition, written[1]))
                sent[(p.target.topic, p.target.partition)] = written[0]
            if not sent:
                return
            request = requests.produce(batches, acks=settings.acks, timeout_ms=self.target.request_timeout_ms,
                                   use_offset=use_offset)
            self._in_flight[node] = self._in_flight.get(node, 0) + 1
            self.target.send(request, node).add_both(self._guarded(self._answered),
                                                     ProduceInFlight(node, sent, time.monotonic()))

    def _next_batch(self, p: PartitionCopy) -> tuple[WrittenPiece, bytearray] | None:
        """The head of the queue, restamped and moved in flight (None if it may not be written)."""
        outbox, session = p.outbox, p.session
        piece = outbox.queue[0]
        if p.mode == CHECKED and piece.base_offset != outbox.next_write:
            self._gap(p)
            return None
        outbox.queue.popleft()
        outbox.queued_bytes -= len(piece.data)
        if p.mode == TRANSLATED:
            outbox.mapped -= 1
            outbox.planned -= 1
            target_offset = outbox.next_write
        else:
            target_offset = piece.base_offset
        outbox.next_write = target_offset + piece.records
        keep_offset = p.mode == BROKER
        if session.producer_id >= 0:
            data = restamp(piece.data, session.producer_id, session.producer_epoch, session.sequence,
                           keep_offset=keep_offset)
            session.sequence = (session.sequence + piece.records) % _SEQUENCE_MODULUS
        else:
            data = restamp(piece.data, -1, -1, -1, keep_offset=keep_offset)
        outbox.in_flight.append(piece)
        return WrittenPiece(p, piece, target_offset), data

    def _answered(self, produce: ProduceInFlight, result: Any) -> None:
        self._in_flight[produce.node] -= 1
        pending = dict(produce.batches)
        if isinstance(result, BaseException):
            self._stats.produce_errors[type(result).__name__] += 1
            log.debug('produce to target node %s failed: %s', produce.node, result)
            self.target.cluster.request_update()
            for written in pending.values():
                self._failed(written, -1)
            return
        self._stats.produce_latency.observe(time.monotonic() - produce.sent_at)
        for topic in result.responses:
            for answer in topic.partition_responses:
                written = pending.pop((topic.name, answer.index), None)
                if written is not None:
                    self._settle(written, answer)
        for written in pending.values():  # a broker that left a partition out of its answer
            self._failed(written, -1)

    def _settle(self, written: WrittenPiece, answer: Any) -> None:
        p, piece, _ = written
        code = answer.error_code
        if code != constants.NONE:
            self._stats.produce_errors[answers.error_name(code)] += 1
        if code in (constants.NONE, constants.DUPLICATE_SEQUENCE_NUMBER):
            p.outbox.in_flight.remove(piece)
            self._acknowledged(written, answer.base_offset if code == constants.NONE else -1)
        elif code in answers.SESSION_ERRORS or answers.is_retriable(code):
            if code not in answers.SESSION_ERRORS:
                self.target.cluster.request_update()
            self._failed(written, getattr(answer, 'log_end_offset', -1) if code == constants.INVALID_PRODUCE_OFFSET else -1)
        else:
            p.outbox.in_flight.remove(piece)
            message = getattr(answer, 'error_message', None)
            self._stop(p, IncidentKind.ERROR, f'writing {p.target.topic}-{p.target.partition} failed: '
                       f'{answers.error_name(code)}{": " + message if message else ""}')
            drained(p)

    def _acknowledged(self, written: WrittenPiece, base_offset: int) -> None:
        """The batch is on the target at ``base_offset`` (-1: a duplicate, where it was written before)."""
        p, piece, target_offset = written
        acked = p.acked
        if base_offset >= 0 and base_offset != target_offset:
            self._stop(p, IncidentKind.OFFSET_MISMATCH, f'{p.target.topic}-{p.target.partition}: source offsets '
                       f'{piece.base_offset}..{piece.last_offset} were written at target offset {base_offset}, not '
                       f'{target_offset} (another writer on the target partition?)',
                       divergent=(base_offset, base_offset + piece.records))
        acked.target = target_offset + piece.records
        acked.source = max(acked.source, piece.last_offset + 1)
        acked.epoch = piece.leader_epoch
        acked.add(piece.records, len(piece.data), time.monotonic())
        p.session.probe = False
        drained(p)

    def _failed(self, written: WrittenPiece, end_hint: int) -> None:
        p, piece, _ = written
        p.outbox.in_flight.remove(piece)
        p.write_failed(end_hint)
        drained(p)


def plan_ahead(p: PartitionCopy, store: OffsetMapStore, mapped: Callable[..., None],
               failed: Callable[..., None]) -> None:
    """Translated mode: write the map records of the queued batches not planned yet, ahead of the batches.

    ``mapped(p, generation, count, _)`` runs once the records are on the target (the batches become
    writable); ``failed(p, exception)`` if they cannot be written.
    """
    outbox = p.outbox
    count = len(outbox.queue) - outbox.planned
    if count <= 0:
        return
    changed: dict[int, Run] = {}
    for piece in islice(outbox.queue, outbox.planned, None):
        run = p.offset_map.place(piece.base_offset, piece.records, outbox.plan_target)
        changed[run.source] = run
        outbox.plan_target += piece.records
    outbox.planned += count
    (store.write(run_records(p.target, changed.values()))
        .add_callback(mapped, p, p.generation, count)
        .add_errback(failed, p))


def drained(p: PartitionCopy) -> None:
    """Resolve the partition's ``drained`` future once no write is in flight."""
    outbox = p.outbox
    if not outbox.in_flight and outbox.drained is not None:
        future, outbox.drained = outbox.drained, None
        future.success(None)
