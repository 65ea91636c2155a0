"""The partition tasks: start, recovery after failed writes, mode changes, source validation and truncation.

A task is a coroutine on the clients' event loop that owns its partition (see
:mod:`kafka_kip.mirror.state`) and asks the clusters through :class:`~kafka_kip.mirror.questions.PartitionQuestions`:

* **start**: a producer session, the offset mode (:meth:`Recovery.choose_mode`), where to start.
  ``broker``/``checked`` resume from the target's end, ``translated`` from its offset map cut at the
  target's end; before that, the target's last copied record is compared with the source's
  (:meth:`Recovery.verify_resume`; in translated mode, the last record the map maps), which also finds a
  truncation that happened while no mirror ran;
* **recover**: after failed or uncertain writes, continue from the target's end with a new session
  (records below it are on the target: "already there");
* **validate** (KIP-320): after a source leader change, does the new leader still have what was read?
* **out of range**: investigated, never answered by resetting to the log start (retention is reported);
* **truncated**: the source lost records that were read: report the exact ranges, then stop or continue
  from the divergence point, the target keeping what it already has; where it keeps copies of lost records,
  the source's new records follow its end and the partition goes on in translated mode. A source topic
  deleted or recreated (another topic id) is never taken for a truncation: the partition stops (``recreated``).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kafka_kip.mirror.client import topic_id_text
from kafka_kip.mirror.offset_map import (
    PartitionMap,
    Run,
    partition_records,
    run_records,
)
from kafka_kip.mirror.questions import Batch, PartitionQuestions, Unreadable
from kafka_kip.mirror.settings import CopySettings
from kafka_kip.mirror.state import CopyState, IncidentKind, PartitionCopy
from kafka_kip.policies import AUTO, BROKER, CHECKED, STOP, TRANSLATED
from kafka_kip.protocol import constants, requests

log = logging.getLogger(__name__)

_RESUME_SEARCH_READS = 128  # batches read (of both clusters) at most when a resume point does not match
UNKNOWN_TOPIC = constants.UNKNOWN_TOPIC_OR_PARTITION
Report = Callable[..., None]  # report(partition, kind, message, *, stopped=False, **ranges)


def _same_offset(offset: int) -> int:
    return offset


class Recovery:
    """The tasks of a copier's partitions (a checked partition's gap is :mod:`kafka_kip.mirror.alignment`'s).

    ``questions.store`` is the offset map on the target (None: no map; translated mode is then refused).
    """

    def __init__(self, questions: PartitionQuestions, settings: CopySettings, report: Report, stop: Report) -> None:
        self.questions = questions
        self.source, self.target = questions.source, questions.target
        self.settings = settings
        self.store = questions.store
        self._report = report
        self._stop = stop

    # -- start ---------------------------------------------------------------------------------

    async def start(self, p: PartitionCopy, kip391: bool) -> None:
        """Open a session, choose the mode (``kip391``: the target leader advertises it), find where to start."""
        if not self._same_source(p):
            return
        await self.questions.new_session(p)
        mode = self.choose_mode(p, kip391)
        if mode is None:
            return
        p.mode = mode
        end = await self.questions.target_end(p)
        if mode == TRANSLATED:
            await self._start_translated(p, end)
            return
        await self._record_partition(p)
        if mode == BROKER:
            await self._start_with_offsets(p, end)
        else:
            await self._start_checked(p, end)

    def _same_source(self, p: PartitionCopy) -> bool:
        """What the offset map says the target partition holds is what is copied to it now."""
        known = p.offset_map
        if known is None:
            return True
        if known.source != p.source:
            self._stop(p, IncidentKind.ERROR, f'{p.target.topic}-{p.target.partition} holds a copy of '
                       f'{known.source.topic}-{known.source.partition} (says the offset map), not of {p.name}')
            return False
        if known.source_topic_id and p.source_topic_id and known.source_topic_id != p.source_topic_id:
            self.recreated(p, known.source_topic_id, p.source_topic_id)
            return False
        return True

    def choose_mode(self, p: PartitionCopy, kip391: bool) -> str | None:
        """The partition's mode: auto is broker > checked > translated; a translated partition stays so."""
        requested = self.settings.offset_mode
        known = p.offset_map
        if known is not None and known.mode == TRANSLATED:
            if requested in (AUTO, TRANSLATED):
                return TRANSLATED
            self._stop(p, IncidentKind.ERROR, f'{p.target.topic}-{p.target.partition} was copied in translated '
                       f"mode (its offsets are not the source's): offset mode {requested!r} cannot continue it; "
                       "use 'auto' or 'translated'")
            return None
        if requested == TRANSLATED and self.store is None:
            self._stop(p, IncidentKind.ERROR, f'{p.name}: translated mode needs the offset map on the target')
            return None
        if requested == AUTO:
            return BROKER if kip391 else CHECKED
        return requested

    async def _start_with_offsets(self, p: PartitionCopy, end: int) -> None:
        cursor, acked = p.cursor, p.acked
        if cursor.position is None:
            cursor.position = end if end > 0 else await self.questions.source_start(p)
        acked.source = acked.target = cursor.position
        p.outbox.restart_at(cursor.position)
        if 0 < cursor.position <= end:
            await self.verify_resume(p)

    async def _start_checked(self, p: PartitionCopy, end: int) -> None:
        """Resume at the target's end; the first batch that cannot land at its source offset is a gap."""
        cursor, acked = p.cursor, p.acked
        log_start = await self.questions.target_start(p)
        aligning = await self.questions.placeholders_end(p, log_start, end)
        if cursor.position is None:
            cursor.position = end if end > 0 and not aligning else await self.questions.source_start(p)
        elif cursor.position < end and not aligning:
            cursor.position = end  # below the end: on the target already
        acked.source, acked.target = cursor.position, end
        p.outbox.restart_at(end)
        if not aligning and end > log_start and cursor.position == end:
            await self.verify_resume(p)

    async def _start_translated(self, p: PartitionCopy, end: int) -> None:
        """Resume from the offset map cut at the target's end, or begin a map; resuming at what the map
        says, first check the last record it maps (:meth:`verify_resume`)."""
        cursor, acked = p.cursor, p.acked
        known, asked = p.offset_map, cursor.position
        if known is not None and known.mode == TRANSLATED and known.runs:
            resume = await self.questions.cut_map(p, end)
            if resume is None:
                return
            position = resume if asked is None else max(resume, asked)
        else:
            if known is not None and known.mode in (BROKER, CHECKED) and end > 0:
                # copied in place so far: the same offsets below the end
                log_start = await self.questions.target_start(p)
                origin = Run(log_start, log_start, end - log_start)
            else:
                first = await self.questions.source_start(p) if asked is None else asked
                origin = Run(first, end, 0)
            await self.questions.begin_map(p, [origin])
            position = origin.source_end
        cursor.position = acked.source = position
        acked.target = end
        p.outbox.restart_at(end)
        if asked is None or asked <= position:  # a fresh map maps nothing: no check
            await self.verify_resume(p)

    async def _record_partition(self, p: PartitionCopy) -> None:
        """Write the partition record (source, topic id, mode) when the map does not have it yet."""
        if self.store is None:
            return
        recorded = PartitionMap(p.source, p.source_topic_id, p.mode)
        known = p.offset_map
        if known is None or (known.mode, known.source_topic_id) != (recorded.mode, recorded.source_topic_id):
            await self.questions.write_map(partition_records(p.target, recorded))
        p.offset_map = recorded


    # -- failed writes and mode changes ----------------------------------------------------------

    async def recover(self, p: PartitionCopy) -> None:
        """After failed or uncertain writes: continue from what the target has, with a new session."""
        cursor, acked, session = p.cursor, p.acked, p.session
        p.outbox.clear_queue()
        if p.mode == TRANSLATED:
            end = await self.questions.target_end(p)
            resume = await self.questions.cut_map(p, end)
            if resume is None:
                return
            known = resume == acked.source
            cursor.position = acked.source = resume
            acked.target = end
            p.outbox.restart_at(end)
            cursor.epochs.truncate_from_end(resume)
            if known:
                cursor.epochs.note(acked.epoch, resume - 1)
        else:
            end = session.end_hint if session.end_hint >= 0 else await self.questions.target_end(p)
            known = end == acked.source
            cursor.position = acked.source = acked.target = end
            p.outbox.restart_at(end)
            cursor.epochs.truncate_from_end(end)
            if known:
                cursor.epochs.note(acked.epoch, end - 1)
            elif end > 0:
                await self.verify_resume(p)
        await self.questions.new_session(p)







    # -- the source --------------------------------------------------------------------------------

    async def validate(self, p: PartitionCopy) -> None:
        """KIP-320: after a source leader change, check that the new leader still has what was read."""
        if p.state is not CopyState.VALIDATING:
            p.take_over(CopyState.VALIDATING)
        cursor = p.cursor
        epoch = cursor.epochs.latest_epoch
        answer = await self.questions.lookups.epoch_end(self.source, p.source, epoch,
                                                        lambda: self.questions.source_leader(p))
        if answer.end_offset < 0 or answer.leader_epoch < 0:
            await self.truncated(p, None, f'OffsetForLeaderEpoch (the leader has no epoch at or below {epoch})')
        elif answer.end_offset < cursor.position or answer.leader_epoch < epoch:
            point = cursor.epochs.divergence_point(cursor.position, answer.leader_epoch, answer.end_offset)
            if point < cursor.position:
                await self.truncated(p, point, 'OffsetForLeaderEpoch')

    async def out_of_range(self, p: PartitionCopy) -> None:
        """A fetch offset out of range is investigated, never answered by resetting to the log start."""
        if not await self.same_incarnation(p):
            return
        cursor = p.cursor
        start = await self.questions.source_start(p)
        if cursor.position < start:
            self._report(p, IncidentKind.RETENTION, f'{p.name}: records {cursor.position}..{start - 1} were deleted '
                         'on the source before they were copied', lost=(cursor.position, start))
            cursor.position = start
            cursor.epochs.truncate_from_end(0)
            return
        end = await self.questions.lookups.end_offset(self.source, p.source,
                                                      read_committed=self.settings.read_committed,
                                                      leader=lambda: self.questions.source_leader(p))
        if cursor.position > end and cursor.epochs:
            await self.validate(p)
        if p.state is not CopyState.STOPPED:
            # the source has not reached the position yet (or a stale broker answered): ask again later
            cursor.retry_at = time.monotonic() + 10 * self.settings.backoff

    async def unknown_topic(self, p: PartitionCopy) -> None:
        """The source answered UNKNOWN_TOPIC_OR_PARTITION: deleted, recreated, or stale metadata?"""
        if await self.same_incarnation(p):
            p.cursor.retry_at = time.monotonic() + self.settings.backoff

    async def same_incarnation(self, p: PartitionCopy) -> bool:
        """True if the source topic still has the id the partition started with; else it is stopped."""
        topic = await self.questions.lookups.ask(self.source, lambda _: requests.metadata([p.source.topic]),
                                                 lambda: (self.source.manager.least_loaded_node(), -1),
                                                 lambda r: r.topics[0] if r.topics else None, tolerate=(UNKNOWN_TOPIC,))
        if topic.error_code == UNKNOWN_TOPIC:
            self._stop(p, IncidentKind.RECREATED, f'{p.name}: the source topic {p.source.topic} was deleted; the '
                       'partition stopped, the target keeps what was copied')
            return False
        now = topic_id_text(getattr(topic, 'topic_id', None))
        if p.source_topic_id and now and now != p.source_topic_id:
            self.recreated(p, p.source_topic_id, now)
            return False
        return True

    def recreated(self, p: PartitionCopy, old: str, new: str) -> None:
        self._stop(p, IncidentKind.RECREATED,
                   f'{p.name}: the source topic {p.source.topic} was recreated (topic id {old} is now {new}); the '
                   f'mirror never merges two incarnations into one target log: {p.target.topic}-{p.target.partition} '
                   'keeps the old one and the partition stopped. To copy the new incarnation, delete the target '
                   'topic (or mirror with another topic prefix) and restart the mirror')

    async def truncated(self, p: PartitionCopy, point: int | None, found_by: str) -> None:
        """The source lost records at or above ``point`` that were read: report, then stop or continue.

        ``closest`` continues from the truncation point, after what was read below it and is not on the
        target yet. Where the target keeps copies of lost records (``divergent``), the source's new records
        cannot take their offsets: they follow the target's end, the partition in translated mode
        (:meth:`follow_target_end`); ``broker`` and ``checked`` offset modes stop the partition instead.
        """
        if p.state is not CopyState.TRUNCATING:
            p.take_over(CopyState.TRUNCATING)
        if not await self.same_incarnation(p):
            return
        cursor, acked = p.cursor, p.acked
        read_end = cursor.position
        p.outbox.clear_queue()
        await self.questions.drain(p)
        if point is None:
            self._stop(p, IncidentKind.TRUNCATION, f'{p.name}: the source truncated its log below offset {read_end} '
                       f'(found by {found_by}); the divergence point is unknown; partition stopped')
            return
        end = await self.questions.target_end(p)
        translated = p.mode == TRANSLATED
        if translated:
            resume = await self.questions.cut_map(p, end)  # the source offset after the target's last record
            if resume is None:
                return
            first = p.offset_map.translate(point, copied_to=point, target_end=end)
        else:
            resume, first = end, point  # the target's offsets are the source's
        divergent = (first, end) if end > first else None
        ranges = {'lost': (point, read_end), 'divergent': divergent, 'truncated_at': point}
        message = (f'{p.name}: the source truncated its log at offset {point} (found by {found_by}): '
                   f'records {point}..{read_end - 1} that were read are gone from the source')
        if divergent:
            message += (f'; the target keeps its copies at target offsets {divergent[0]}..{divergent[1] - 1}' if
                        translated else f'; the target keeps its copies at offsets {divergent[0]}..{divergent[1] - 1}, '
                        'where the source now has other records or none')
        position = min(point, resume)
        why = self._cannot_translate() if divergent and not translated else None
        if self.settings.on_truncation == STOP or why:
            if why:
                message += (f"; the source's records from {point} on cannot be copied at their offsets, which the "
                            f'target holds: {why}')
            acked.source = min(acked.source, position)  # the source's records from there on are not copied
            self._stop(p, IncidentKind.TRUNCATION, message + '; partition stopped', **ranges)
            return
        if divergent and not translated:
            await self.follow_target_end(p, point, end)
            message += (f'; continuing from the truncation point in translated mode: the source\'s records from '
                        f'{point} on follow at target offset {end}, their offsets in the offset map (the '
                        "partition's offsets cannot equal the source's again)")
        elif divergent:
            await self.questions.write_map(run_records(p.target, *p.offset_map.diverge(point, end)))
            message += f'; continuing from the truncation point: its records follow at target offset {end}'
        else:
            if translated:  # nothing is mapped past the target's end: at most an origin emptied
                await self.questions.write_map(run_records(p.target, *p.offset_map.cut_source(point)))
            message += ('; continuing from the truncation point' if position == point else
                        f'; continuing from offset {position}, the end of what the target has')
        self._report(p, IncidentKind.TRUNCATION, message, continued_at=end, **ranges)
        cursor.position = acked.source = position
        cursor.epochs.truncate_from_end(position)
        acked.target = end
        p.outbox.restart_at(end)
        await self.questions.new_session(p)

    def _cannot_translate(self) -> str | None:
        """Why a partition copied at the source's offsets cannot go on in translated mode (None: it can)."""
        mode = self.settings.offset_mode
        if mode != AUTO:
            return (f"offset mode {mode!r} keeps the source's offsets (offset mode 'auto' copies them after the "
                    "target's end, in translated mode)")
        if self.store is None:
            return "copying them after the target's end (translated mode) needs the offset map on the target"
        return None

    async def follow_target_end(self, p: PartitionCopy, point: int, end: int) -> None:
        """``closest``: the source's records from ``point`` on follow the target's end ``end``, which keeps
        copies of lost records at ``point..end-1`` (broker and checked modes): the partition goes on in
        translated mode, for good (REMAPPING).

        Its offset map begins with the offsets the target shares with the source (from its log start up to
        ``point``) and an empty run ``point`` -> ``end``, written before any new record is produced (see
        :mod:`kafka_kip.mirror.offset_map` for the crash rules).
        """
        p.take_over(CopyState.REMAPPING)
        log_start = await self.questions.target_start(p)
        shared = PartitionMap(p.source, p.source_topic_id, TRANSLATED, [Run(log_start, log_start, end - log_start)])
        shared.diverge(point, end)
        await self.questions.begin_map(p, shared.runs)
        log.info('%s: the source\'s records from %d on follow at target offset %d; translated mode from here on',
                 p.name, point, end)

    # -- resume checks -------------------------------------------------------------------------

    async def verify_resume(self, p: PartitionCopy) -> None:
        """Check that the target's last copied record below the position is the source's; learn its epoch.

        Where offsets are the source's that is the target's record at ``position - 1``; in translated mode,
        the last record the offset map maps, compared with the source's record at its source offset (records
        the map does not name, such as copies of lost records kept after a truncation, are not compared).
        A mismatch means the source truncated while nothing was copying: the divergence point is found by
        comparing records backwards (:meth:`_compare_backwards`) and handled like any truncation. An offset
        where the source now has no record below its end (compacted away, a control record) says nothing and
        is passed over. When the source no longer has the record (retention moved its log start past it)
        there is nothing to compare; the copy continues and a retention gap is reported if records are missing.
        """
        if p.mode == TRANSLATED:
            copied, source_of = p.offset_map.copied(), p.offset_map.source_offsets()
        else:
            copied, source_of = range(p.cursor.position), _same_offset
        if not copied:
            return
        match, diverged, every_copy = await self._compare_backwards(p, copied, source_of)
        if not diverged:
            if match is None:
                log.info('%s: the resume point cannot be checked: the source has none of the records compared',
                         p.name)
            return
        if match is not None:
            point = match + 1  # the source's log differs from the copies after the match
        elif every_copy:
            point = source_of(copied.start)  # from the first copy on
        else:
            point = None  # beyond the search: unknown
        await self.truncated(p, point, 'comparing the target with the source on resume')

    async def _compare_backwards(self, p: PartitionCopy, copied: range, source_of: Callable[[int], int | None]
                                 ) -> tuple[int | None, bool, bool]:
        """Compare the target's copies (target offsets ``copied``, ``source_of`` their source offsets) with the
        source's records from the last copy down, until one is the same.

        Returns the source offset of that copy (None: none found), whether a copy above it differs from the
        source's record or lies past the source's end, and whether every copy was compared. At most
        ``_RESUME_SEARCH_READS`` reads of either cluster; an offset below a log start ends the search.
        """
        source = Batch({}, -1, range(0), -1)
        diverged, reads, offset = False, 0, copied[-1]
        try:
            while offset >= copied.start and reads < _RESUME_SEARCH_READS:
                target = await self.questions.records_at(self.target, p.target, offset, None)
                reads += 1
                mine = sorted((o for o in target.records if o <= offset), reverse=True)
                if not mine:
                    break
                for o in mine:
                    at = source_of(o)
                    if at is None:
                        continue
                    if at not in source.known:
                        if reads == _RESUME_SEARCH_READS:
                            return None, diverged, False
                        source = await self.questions.records_at(self.source, p.source, at, p)
                        reads += 1
                    theirs = source.records.get(at)
                    if theirs == target.records[o]:
                        p.cursor.epochs.note(source.epoch, at)
                        return at, diverged, False
                    diverged = diverged or theirs is not None or at >= source.end
                offset = mine[-1] - 1
        except Unreadable as unreadable:
            log.info('%s: offset %d is below the log start: records are compared no further back', p.name,
                     unreadable.args[0])
            return None, diverged, False
        return None, diverged, offset < copied.start


    # -- single requests with retries ----------------------------------------------------------




