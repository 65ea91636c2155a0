"""What a partition task asks the clusters about its partition, and the offset map writes it waits for.

One :class:`PartitionQuestions` serves a copier's tasks (:mod:`kafka_kip.mirror.recovery`,
:mod:`kafka_kip.mirror.alignment`): the partition's ends on both clusters, the records of a batch, a new
producer session, the writes in flight drained, the offset map written and cut. Every request is retried
until a usable answer (:class:`~kafka_kip.mirror.lookups.Lookups`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import NamedTuple

from kafka.future import Future
from kafka.record.default_records import DefaultRecordBatch
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.mirror import answers
from kafka_kip.mirror.batches import PLACEHOLDER_HEADERS, iter_batches
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.coalesce import FetchKind
from kafka_kip.mirror.lookups import Lookups
from kafka_kip.mirror.offset_map import (
    OffsetMapStore,
    PartitionMap,
    Run,
    partition_records,
    run_records,
)
from kafka_kip.mirror.sessions import ProducerIds
from kafka_kip.mirror.settings import CopySettings
from kafka_kip.mirror.state import IncidentKind, PartitionCopy
from kafka_kip.policies import TRANSLATED
from kafka_kip.protocol import constants, requests
from kafka_kip.protocol.record_batch import CONTROL_MASK

log = logging.getLogger(__name__)

Report = Callable[..., None]  # report(partition, kind, message, *, stopped=False, **ranges)


class Unreadable(Exception):
    """A record that was asked for cannot be read (below the log start)."""


class Batch(NamedTuple):
    """What :meth:`PartitionQuestions.records_at` read: ``records`` of one batch as ``{offset: (key, value,
    headers)}`` and its leader ``epoch`` (empty and -1 when no batch of records was there), ``known``: the
    offsets the answer speaks for (the batch, and the offsets from the one asked for up to it: where
    ``records`` has none, the log has none -- compacted away, control records), and ``end``: the partition's
    high watermark."""

    records: dict[int, tuple]
    epoch: int
    known: range
    end: int


class PartitionQuestions:
    """The questions of a copier's partition tasks (see the module docstring).

    ``store`` is the offset map on the target (None: the copier keeps none); ``stop`` stops a partition
    with an incident.
    """

    def __init__(self, source: ClusterClient, target: ClusterClient, settings: CopySettings,
                 store: OffsetMapStore | None, stop: Report) -> None:
        self.source, self.target = source, target
        self.settings = settings
        self.store = store
        self.lookups = Lookups(source.net, settings.retry_backoff_ms, settings.recovery_timeout_ms)
        self.producer_ids = ProducerIds(target, self.lookups, source.net, enabled=settings.idempotent)
        self._stop = stop

    def source_leader(self, p: PartitionCopy) -> tuple[int, int]:
        """The source leader of ``p`` and the highest leader epoch seen for it."""
        node, epoch = self.source.leader(p.source)
        p.cursor.leader_epoch = max(p.cursor.leader_epoch, epoch)
        return node, p.cursor.leader_epoch

    async def target_end(self, p: PartitionCopy) -> int:
        """The target partition's high watermark (what is durably there)."""
        return await self.lookups.high_watermark(self.target, p.target)

    async def target_start(self, p: PartitionCopy) -> int:
        """The target partition's log start offset."""
        return await self.lookups.listed_offset(self.target, p.target, constants.EARLIEST_TIMESTAMP)

    async def source_start(self, p: PartitionCopy) -> int:
        """The source partition's log start offset."""
        return await self.lookups.listed_offset(self.source, p.source, constants.EARLIEST_TIMESTAMP,
                                                leader=lambda: self.source_leader(p))

    async def new_session(self, p: PartitionCopy) -> None:
        """A producer id the partition has not written with (:mod:`kafka_kip.mirror.sessions`); its sequence
        starts at 0 (no id when the target cannot give one)."""
        used = p.session.producer_id
        p.session.renew()
        p.session.renew(*await self.producer_ids.fresh(used))

    async def drain(self, p: PartitionCopy) -> None:
        """Wait until no write of the partition is in flight."""
        if p.outbox.in_flight:
            p.outbox.drained = Future()
            await p.outbox.drained

    async def write_map(self, records: Mapping[bytes, bytes | None]) -> None:
        if records:  # nothing to write would wait for another partition's round
            await self.store.write(records)

    async def begin_map(self, p: PartitionCopy, runs: list[Run]) -> None:
        """The partition is copied in translated mode from now on, its offset map ``runs``.

        The runs are written ahead of the partition record that says so, in one round unless the round is
        full: a crash between two rounds leaves the partition record as it was (the start finds what it
        found before and does it again).
        """
        p.mode = TRANSLATED
        p.offset_map = PartitionMap(p.source, p.source_topic_id, TRANSLATED, list(runs))
        await self.write_map({**run_records(p.target, runs), **partition_records(p.target, p.offset_map)})

    async def cut_map(self, p: PartitionCopy, end: int) -> int | None:
        """Cut the partition's map at the target's end (writing the cut); the source offset to read on."""
        known = p.offset_map
        shortened, removed = known.cut_target(end)
        if shortened or removed:
            await self.write_map(run_records(p.target, shortened, removed))
        resume = known.resume_source(end)
        if resume is None:
            origin = known.origin
            self._stop(p, IncidentKind.ERROR, f'{p.target.topic}-{p.target.partition} ends at offset {end}, below '
                       f'offset {origin.target if origin else 0} where the mirror began writing it: the target lost '
                       'records; the offset map cannot say what to copy again')
        return resume

    async def records_at(self, client: ClusterClient, tp: TopicPartition, offset: int,
                         p: PartitionCopy | None) -> Batch:
        """The records of the batch holding ``offset`` (or of the first batch after it), with what the answer
        says of the offsets around it (:class:`Batch`); raises :class:`Unreadable` below the log start.
        """
        def leader() -> tuple[int, int]:
            return self.source_leader(p) if p is not None else client.leader(tp)

        settings = self.settings
        seen, end = offset, -1  # the offset after the last batch answered; the high watermark
        # asked together with other partitions' first; alone if the answer left the batch out (a fetch
        # returns a batch larger than the limits only for its first partition)
        for kind in (FetchKind(constants.READ_UNCOMMITTED, settings.max_partition_fetch_bytes, settings.fetch_max_bytes),
                     FetchKind(constants.READ_UNCOMMITTED, settings.max_partition_fetch_bytes,
                               settings.max_partition_fetch_bytes)):
            data = await self.lookups.ask_partition(client, tp, kind, leader, offset, tolerate=(constants.OFFSET_OUT_OF_RANGE,),
                                                    alone=kind.max_bytes == settings.max_partition_fetch_bytes)
            end = data.high_watermark
            if data.error_code == constants.OFFSET_OUT_OF_RANGE:
                if offset < data.log_start_offset or data.high_watermark < 0:
                    raise Unreadable(offset)
                return Batch({}, -1, range(offset, offset), end)
            for header, view in iter_batches(data.records or b''):
                last = header.base_offset + header.last_offset_delta
                if last >= offset and not header.attributes & CONTROL_MASK:
                    records = {r.offset: (r.key, r.value, list(r.headers)) for r in DefaultRecordBatch(bytes(view))}
                    return Batch(records, header.partition_leader_epoch,
                                 range(min(header.base_offset, offset), last + 1), end)
                seen = max(seen, last + 1)
            if offset >= data.high_watermark:
                break
        return Batch({}, -1, range(offset, seen), end)

    async def placeholders_end(self, p: PartitionCopy, log_start: int, end: int) -> bool:
        """True if the target partition holds only placeholder records (an alignment under way)."""
        if end <= log_start:
            return False
        try:
            batch = await self.records_at(self.target, p.target, end - 1, None)
        except Unreadable:
            return False
        key, value, headers = batch.records.get(end - 1, (b'', b'', []))
        return key is None and value is None and headers == PLACEHOLDER_HEADERS

    async def can_delete_records(self, p: PartitionCopy, log_start: int) -> str | None:
        """None if the target can delete records of the partition, else why not.

        Asked with a DeleteRecords that deletes nothing (up to the log start), once: a broker may list the
        API and not implement it (Tansu 0.6's memory storage drops the connection).
        """
        node = self.target.leader(p.target)[0]
        if node < 0 or requests.DELETE_RECORDS_KEY not in self.target.api_versions(node):
            return 'the target does not offer DeleteRecords'
        try:
            response = await self.target.send(requests.delete_records(p.target, log_start, self.target.request_timeout_ms),
                                              node)
        except Errors.KafkaError as exc:
            return f'DeleteRecords failed on the target ({type(exc).__name__}: {exc})'
        answer = answers.only_partition(response.topics)
        if answer is None or answer.error_code:
            why = answers.error_name(answer.error_code) if answer else 'no answer'
            return f'DeleteRecords failed on the target ({why})'
        return None
