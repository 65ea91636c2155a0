"""Checked mode's gaps: a batch that cannot land at its source offset on a target without KIP-391.

The batch stays unsent. An *empty* target partition below the batch is aligned -- placeholder records up to
the batch's offset, deleted at once with DeleteRecords, when that takes at most ``max_alignment_records``
and the target can delete records -- and the batch then lands at its offset. Otherwise ``auto`` goes on in
translated mode (the target's offsets equal the source's below its end: the offset map's first run) and
``checked`` stops the partition with an ``offset-gap`` incident saying why and what to do. A crash during an
alignment is finished on restart (the target then holds placeholders only).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from kafka_kip.mirror import answers
from kafka_kip.mirror.batches import placeholders, restamp
from kafka_kip.mirror.offset_map import Run
from kafka_kip.mirror.questions import PartitionQuestions
from kafka_kip.mirror.settings import CopySettings
from kafka_kip.mirror.state import IncidentKind, PartitionCopy
from kafka_kip.policies import AUTO
from kafka_kip.protocol import requests

log = logging.getLogger(__name__)

_PLACEHOLDERS_PER_BATCH = 10_000
_SEQUENCE_MODULUS = 2**31


class Alignment:
    """The task that handles a checked partition's gap (see the module docstring)."""

    def __init__(self, questions: PartitionQuestions, settings: CopySettings, stop: Callable[..., None]) -> None:
        self.questions = questions
        self.target = questions.target
        self.settings = settings
        self._stop = stop

    async def remap(self, p: PartitionCopy) -> None:
        """Checked mode: the head batch cannot land at its source offset (nothing of it was sent)."""
        outbox, settings = p.outbox, self.settings
        base = outbox.queue[0].base_offset
        await self.questions.drain(p)
        if p.session.broken:
            return  # a write failed meanwhile: recovery first, then the batch is looked at again
        end, log_start = outbox.next_write, await self.questions.target_start(p)
        aligning = await self.questions.placeholders_end(p, log_start, end)
        empty = log_start == end or aligning
        if end >= base:
            why = 'the target is past that offset already'
        elif not empty:
            why = f'its log is not empty (offsets {log_start}..{end - 1}), so it cannot be aligned'
        elif base - end > settings.max_alignment_records:
            why = (f'aligning the empty partition would take {base - end} placeholder records, more than '
                   f'max_alignment_records={settings.max_alignment_records}')
        else:
            why = await self.questions.can_delete_records(p, log_start)
            if why is None:
                await self.align(p, end, base)
                return
            why = f'the empty partition cannot be aligned: {why}'
        if settings.offset_mode == AUTO and not aligning:
            await self.go_translated(p, log_start, end)
            return
        self._stop(p, IncidentKind.OFFSET_GAP,
                   f'{p.name}: the next source record is at offset {base} but the target partition '
                   f'{p.target.topic}-{p.target.partition} ends at offset {end}, and a target without '
                   f'produce-with-offsets (KIP-391) appends at its end: {why}. Nothing was written at a wrong '
                   "offset. Use offset mode 'translated' (or 'auto'), or a target that supports KIP-391")

    async def go_translated(self, p: PartitionCopy, log_start: int, end: int) -> None:
        """Auto mode: the target's offsets equal the source's below ``end``; from there on they are mapped."""
        outbox = p.outbox
        await self.questions.begin_map(p, [Run(log_start, log_start, end - log_start)])
        outbox.planned = outbox.mapped = 0
        outbox.plan_target = outbox.next_write = end
        log.info('%s: source offsets from %d on cannot keep their numbers on the target (ends at %d); '
                 'continuing in translated mode', p.name, outbox.queue[0].base_offset, end)

    async def align(self, p: PartitionCopy, end: int, to: int) -> None:
        """Write placeholders at target offsets ``end..to-1``, then delete them: the target's log starts at ``to``."""
        session, tp = p.session, p.target
        log.info('%s: moving the empty target partition %s-%d from offset %d to %d (%d placeholder records, '
                 'deleted at once)', p.name, tp.topic, tp.partition, end, to, to - end)
        written = end
        while written < to:
            count = min(_PLACEHOLDERS_PER_BATCH, to - written)
            batch = restamp(placeholders(count), session.producer_id, session.producer_epoch,
                            session.sequence if session.producer_id >= 0 else -1)
            answer = await self.questions.lookups.ask(
                self.target, lambda _, batch=batch: requests.produce(
                    {tp.topic: [(tp.partition, batch)]}, acks=-1, timeout_ms=self.target.request_timeout_ms,
                    use_offset=False),
                lambda: self.target.leader(tp), answers.only_produced)
            if answer.base_offset != written:
                self._stop(p, IncidentKind.OFFSET_MISMATCH, f'{p.name}: aligning {tp.topic}-{tp.partition}, '
                           f'placeholders for offsets {written}.. landed at {answer.base_offset} (another writer on '
                           'the target partition?)')
                return
            session.sequence = (session.sequence + count) % _SEQUENCE_MODULUS
            session.probe = False
            written += count
        deleted = await self.questions.lookups.ask(
            self.target, lambda _: requests.delete_records(tp, to, self.target.request_timeout_ms),
            lambda: self.target.leader(tp), lambda r: answers.only_partition(r.topics))
        if deleted.low_watermark != to:
            self._stop(p, IncidentKind.ERROR, f'{p.name}: aligning {tp.topic}-{tp.partition}: DeleteRecords({to}) '
                       f'left the log start at {deleted.low_watermark}')
            return
        p.acked.target = to
        p.outbox.next_write = p.outbox.plan_target = to
