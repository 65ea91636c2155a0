"""The partition tasks: start, recovery after failed writes, source validation and truncation handling.

A task is a coroutine on the clients' event loop that owns its partition (see
:mod:`kafka_kip.mirror.state`) and asks single questions with retries (:meth:`Recovery.ask`):

* **start**: a producer session, the target's end, where to start; resuming below the target's end
  first compares the target's last record with the source's (:meth:`Recovery.verify_resume`), which
  also finds a truncation that happened while no mirror ran;
* **recover**: after failed or uncertain writes, continue from the target's end with a new session
  (records below it are on the target: "already there");
* **validate** (KIP-320): after a source leader change, does the new leader still have what was read?
* **out of range**: investigated, never answered by resetting to the log start (retention is reported);
* **truncated**: the source lost records that were read: report the exact ranges, then stop or continue
  from the divergence point, the target keeping what it already has.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kafka.future import Future
from kafka.net.selector import NetworkSelector
from kafka.record.default_records import DefaultRecordBatch
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.mirror import wire
from kafka_kip.mirror.batches import iter_batches
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.settings import OFF, STOP, CopySettings
from kafka_kip.mirror.state import CopyState, IncidentKind, PartitionCopy
from kafka_kip.protocol.record_batch import CONTROL_MASK

log = logging.getLogger(__name__)

_RESUME_SEARCH_BATCHES = 64  # target batches compared at most when a resume point does not match
Report = Callable[..., None]  # report(partition, kind, message, *, stopped=False, **ranges)


def answer_code(answer: Any) -> int:
    return getattr(answer, 'error_code', wire.NONE)


class _Unreadable(Exception):
    """A record needed for a resume check cannot be read (below the log start)."""


class Recovery:
    """The tasks of a copier's partitions, and the single requests they make."""

    def __init__(self, source: ClusterClient, target: ClusterClient, settings: CopySettings,
                 report: Report, stop: Report) -> None:
        self.source, self.target = source, target
        self.settings = settings
        self._net: NetworkSelector = source.net
        self._report = report
        self._stop = stop

    # -- tasks ---------------------------------------------------------------------------------

    async def start(self, p: PartitionCopy) -> None:
        """Open a session, then find where to start (``cursor.position`` None: the target's end)."""
        await self.new_session(p)
        target_end = await self.target_end(p)
        cursor, acked = p.cursor, p.acked
        if self.settings.offset_mode == OFF:
            if cursor.position is None:
                cursor.position = await self.source_offset(p, wire.EARLIEST)
            cursor.skip_records = max(0, target_end - acked.target) if acked.target >= 0 else 0
            acked.target = target_end
        else:
            if cursor.position is None:
                cursor.position = target_end if target_end > 0 else await self.source_offset(p, wire.EARLIEST)
            acked.target = cursor.position
        acked.source = p.outbox.next_write = cursor.position
        if self.settings.offset_mode != OFF and 0 < cursor.position <= target_end:
            await self.verify_resume(p)

    async def new_session(self, p: PartitionCopy) -> None:
        """A fresh idempotent producer id for the partition (none when the target cannot give one)."""
        p.session.renew()
        if not self.settings.idempotent:
            return
        try:
            response = await self.ask(self.target, lambda _: wire.init_producer_id(),
                                      lambda: (self.target.manager.least_loaded_node(), -1), lambda r: r)
        except Errors.KafkaError as exc:
            if exc.retriable:
                raise
            log.warning('%s: the target gives no producer id (%s); writing one batch at a time without '
                        'idempotence', p.target, exc)
            return
        p.session.renew(response.producer_id, response.producer_epoch)

    async def recover(self, p: PartitionCopy) -> None:
        """After failed or uncertain writes: continue from what the target has, with a new session."""
        cursor, acked, session = p.cursor, p.acked, p.session
        p.outbox.clear_queue()
        if self.settings.offset_mode == OFF:
            end = await self.target_end(p)
            cursor.position = acked.source
            cursor.skip_records += max(0, end - acked.target)
            acked.target = max(end, acked.target)
        else:
            end = session.end_hint if session.end_hint >= 0 else await self.target_end(p)
            known = end == acked.source
            cursor.position = acked.source = acked.target = p.outbox.next_write = end
            cursor.epochs.truncate(end)
            if known:
                cursor.epochs.note(acked.epoch, end - 1)
            elif end > 0:
                await self.verify_resume(p)
        await self.new_session(p)

    async def validate(self, p: PartitionCopy) -> None:
        """KIP-320: after a source leader change, check that the new leader still has what was read."""
        if p.state is not CopyState.VALIDATING:
            p.take_over(CopyState.VALIDATING)
        cursor = p.cursor
        epoch = cursor.epochs.last_epoch
        answer = await self.ask(
            self.source, lambda leader_epoch: wire.offset_for_leader_epoch(p.source, leader_epoch, epoch),
            lambda: self.source_leader(p), lambda r: wire.only_partition(r.topics))
        if answer.end_offset < 0 or answer.leader_epoch < 0:
            await self.truncated(p, None, f'OffsetForLeaderEpoch (the leader has no epoch at or below {epoch})')
        elif answer.end_offset < cursor.position or answer.leader_epoch < epoch:
            point = cursor.epochs.divergence_point(cursor.position, answer.leader_epoch, answer.end_offset)
            if point < cursor.position:
                await self.truncated(p, point, 'OffsetForLeaderEpoch')

    async def out_of_range(self, p: PartitionCopy) -> None:
        """A fetch offset out of range is investigated, never answered by resetting to the log start."""
        cursor = p.cursor
        start = await self.source_offset(p, wire.EARLIEST)
        if cursor.position < start:
            self._report(p, IncidentKind.RETENTION, f'{p.name}: records {cursor.position}..{start - 1} were deleted '
                         'on the source before they were copied', lost=(cursor.position, start))
            cursor.position = start
            cursor.epochs.truncate(0)
            return
        end = await self.source_offset(p, wire.LATEST)
        if cursor.position > end and cursor.epochs:
            await self.validate(p)
        if p.state is not CopyState.STOPPED:
            # the source has not reached the position yet (or a stale broker answered): ask again later
            cursor.retry_at = time.monotonic() + 10 * self.settings.backoff

    async def truncated(self, p: PartitionCopy, point: int | None, found_by: str) -> None:
        """The source lost records at or above ``point`` that were read: report, then stop or continue."""
        if p.state is not CopyState.TRUNCATING:
            p.take_over(CopyState.TRUNCATING)
        cursor, acked = p.cursor, p.acked
        read_end = cursor.position
        p.outbox.clear_queue()
        await self.drain(p)
        off = self.settings.offset_mode == OFF
        target_end = acked.source if off else max(await self.target_end(p), acked.source)
        if point is None:
            self._stop(p, IncidentKind.TRUNCATION, f'{p.name}: the source truncated its log below offset {read_end} '
                       f'(found by {found_by}); the divergence point is unknown; partition stopped')
            return
        divergent = (point, target_end) if target_end > point and not off else None
        message = (f'{p.name}: the source truncated its log at offset {point} (found by {found_by}): '
                   f'records {point}..{read_end - 1} that were read are gone from the source')
        if divergent:
            message += (f'; the target keeps its copies at offsets {point}..{target_end - 1}, where the source '
                        'now has other records or none')
        if self.settings.on_truncation == STOP:
            self._stop(p, IncidentKind.TRUNCATION, message + '; partition stopped', lost=(point, read_end),
                       divergent=divergent, truncated_at=point)
            return
        if divergent:
            message += f'; continuing from the truncation point: source records from {target_end} on are copied'
        else:
            message += '; continuing from the truncation point'
        self._report(p, IncidentKind.TRUNCATION, message, lost=(point, read_end), divergent=divergent,
                     truncated_at=point)
        cursor.position = point
        cursor.epochs.truncate(point)
        if not off:
            cursor.skip_below = max(cursor.skip_below, target_end)
            acked.source = acked.target = p.outbox.next_write = target_end
        await self.new_session(p)

    async def drain(self, p: PartitionCopy) -> None:
        """Wait until no write of the partition is in flight."""
        if p.outbox.in_flight:
            p.outbox.drained = Future()
            await p.outbox.drained

    # -- resume checks -------------------------------------------------------------------------

    async def verify_resume(self, p: PartitionCopy) -> None:
        """Check that the target's last record (below the position) is the source's; learn its epoch.

        A mismatch means the source truncated while nothing was copying: the divergence point is found
        by comparing records backwards (batch by batch, up to a limit) and handled like any truncation.
        When the source no longer has the record (retention moved its log start past it) there is
        nothing to compare; the copy continues and a retention gap is reported if records are missing.
        """
        resume = p.cursor.position
        source: dict[int, tuple] = {}
        source_epoch = -1
        offset = resume - 1
        try:
            for _ in range(_RESUME_SEARCH_BATCHES):
                target, _ = await self.records_at(self.target, p.target, offset, None)
                mine = sorted((o for o in target if o <= offset), reverse=True)
                if not mine:
                    break
                for o in mine:
                    if o not in source:
                        source, source_epoch = await self.records_at(self.source, p.source, o, p)
                    if source.get(o) == target[o]:
                        p.cursor.epochs.note(source_epoch, o)
                        if o + 1 < resume:
                            await self.truncated(p, o + 1, 'comparing the target with the source on resume')
                        return
                offset = mine[-1] - 1
                if offset < 0:
                    await self.truncated(p, 0, 'comparing the target with the source on resume')
                    return
        except _Unreadable as unreadable:
            if unreadable.args[0] == resume - 1:
                log.info('%s: the source no longer has offset %d; the resume point cannot be checked',
                         p.name, resume - 1)
                return
        await self.truncated(p, None, 'comparing the target with the source on resume')

    async def records_at(self, client: ClusterClient, tp: TopicPartition, offset: int,
                         p: PartitionCopy | None) -> tuple[dict[int, tuple], int]:
        """The records of the batch holding ``offset`` as ``{offset: (key, value, headers)}`` + its epoch.

        Empty when the log has no record there (gap or past the end); raises _Unreadable below the start.
        """
        def leader() -> tuple[int, int]:
            return self.source_leader(p) if p is not None else client.leader(tp)

        max_bytes = self.settings.max_partition_fetch_bytes
        request = wire.fetch({tp.topic: [(tp.partition, -1, offset, -1)]}, max_wait_ms=wire.SINGLE_READ_MAX_WAIT_MS,
                             max_bytes=max_bytes, partition_max_bytes=max_bytes, min_bytes=0)

        def build(leader_epoch: int) -> Any:
            request.topics[0].partitions[0].current_leader_epoch = leader_epoch
            return request

        data = await self.ask(client, build, leader, lambda r: wire.only_partition(r.responses),
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

    def source_leader(self, p: PartitionCopy) -> tuple[int, int]:
        """The source leader of ``p`` and the highest leader epoch seen for it."""
        node, epoch = self.source.leader(p.source)
        p.cursor.leader_epoch = max(p.cursor.leader_epoch, epoch)
        return node, p.cursor.leader_epoch

    async def target_end(self, p: PartitionCopy) -> int:
        """The target partition's high watermark (what is durably there).

        ListOffsets(latest) is the high watermark on Apache Kafka, but Tansu 0.6 answers its last batch's
        base offset + 1; a Fetch from there reports the high watermark on both.
        """
        tp = p.target

        def leader() -> tuple[int, int]:
            return self.target.leader(tp)

        listed = await self.ask(
            self.target, lambda leader_epoch: wire.list_offsets([(tp, leader_epoch)], wire.LATEST), leader,
            lambda r: wire.only_partition(r.topics))
        fetched = await self.ask(
            self.target, lambda leader_epoch: wire.fetch(
                {tp.topic: [(tp.partition, leader_epoch, listed.offset, -1)]}, max_wait_ms=wire.SINGLE_READ_MAX_WAIT_MS,
                max_bytes=1, partition_max_bytes=1, isolation_level=wire.READ_UNCOMMITTED, min_bytes=0),
            leader, lambda r: wire.only_partition(r.responses))
        return fetched.high_watermark

    async def source_offset(self, p: PartitionCopy, timestamp: int) -> int:
        answer = await self.ask(
            self.source, lambda leader_epoch: wire.list_offsets([(p.source, leader_epoch)], timestamp,
                                                                wire.READ_COMMITTED),
            lambda: self.source_leader(p), lambda r: wire.only_partition(r.topics))
        return answer.offset

    async def ask(self, client: ClusterClient, build: Callable[..., Any], leader: Callable[[], tuple[int, int]],
                  pick: Callable[[Any], Any], tolerate: tuple[int, ...] = ()) -> Any:
        """Send ``build(leader_epoch)`` to ``leader()``'s node until it answers without a retriable error.

        ``pick`` selects the part of the response whose ``error_code`` counts (None: the broker left it
        out, retried). Raises the Kafka error for a non-retriable code, or KafkaTimeoutError after
        ``recovery_timeout_ms``.
        """
        deadline = time.monotonic() + self.settings.recovery_timeout_ms / 1000
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
                    if answer is None:
                        failure = 'an answer without the partition'
                    elif answer_code(answer) in (wire.NONE, *tolerate):
                        return answer
                    elif wire.is_retriable(answer_code(answer)):
                        failure = wire.error_name(answer_code(answer))
                    else:
                        code = answer_code(answer)
                        raise Errors.for_code(code)(f'{client.name} cluster answered {wire.error_name(code)}')
            client.cluster.request_update()
            if time.monotonic() >= deadline:
                raise Errors.KafkaTimeoutError(f'{client.name} cluster: no usable answer ({failure})')
            await self._net.sleep(self.settings.backoff)
