"""KIP-253 in the producer: every batch carries the partition count its records were partitioned with.

A record's count is read from the producer's metadata *before* its partition is chosen (``send()`` sets
:data:`SENDING`), so a batch's count is never newer than the count its records were partitioned with: a leader
advertising ``kip.253`` refuses the batch with INVALID_PARTITION_COUNT rather than accept a record placed for
another count. Records given an explicit partition (and records with offsets) carry :data:`EXPLICIT`: they
stay in their partition whatever the count. A batch only takes records of its own count.

When a topic's count changes (a metadata update, or a batch created with a count that is no longer the
producer's), or a leader refuses a batch of it, the topic is **held**: none of its batches is drained, so no
record partitioned with the new count can overtake a record of the same key partitioned with the old one.
Once none of its batches is in flight (the refusals are back) and the metadata was refreshed after the last
refusal, the topic is **re-partitioned** and released (:meth:`PartitionCounts.resolve`): the refused batches,
then the queued batches whose count is not the current one, are taken apart in order; each record goes
through the partitioner again (explicitly partitioned ones stay), into new batches queued by age (ahead of the
batches of records sent after theirs, behind those re-partitioned before); the record futures are rebound to the new batches. The partitions that had refused
batches get their idempotent sequence back (the broker appended nothing), so the new batches continue it.

Everything but :meth:`PartitionCounts.batch_created` runs on the sender thread.
"""
from __future__ import annotations

import enum
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka.future import Future
from kafka.producer.producer_batch import ProducerBatch
from kafka.record.memory_records import MemoryRecords
from kafka.structs import TopicPartition

log = logging.getLogger(__name__)

#: The count of records whose partition was given (or of unknown origin): they are never re-partitioned.
EXPLICIT = -1
#: The count of a record whose topic's metadata ``send()`` is still waiting for (then read from it).
PENDING = -2


class _Sending(threading.local):
    """The partition count the current thread's ``send()`` read before partitioning (see module docstring)."""

    count = EXPLICIT


#: Per thread: the count of the record being appended; read when a batch is created or joined.
SENDING = _Sending()


def count_of(batch: ProducerBatch) -> int:
    """The partition count ``batch``'s records were partitioned with (:data:`EXPLICIT` if not partitioned)."""
    return getattr(batch, 'partition_count', EXPLICIT)


class Phase(enum.Enum):
    """Where a held topic stands."""

    #: batches of it are in flight: their answers (accepted or refused) must come back first
    AWAITING_RESPONSES = 'awaiting responses'
    #: a leader refused a batch: the metadata must be refreshed after that before re-partitioning
    AWAITING_METADATA = 'awaiting metadata'


@dataclass
class _Held:
    refused: list[ProducerBatch] = field(default_factory=list)
    refreshed: Future | None = None  # the metadata update asked for after the last refusal


class PartitionCounts:
    """KIP-253 state of one producer: held topics, refused batches, and the re-partitioning (see module doc).

    ``partition(topic, key, value)`` chooses a record's partition with the producer's partitioner;
    ``new_batch(tp, created)`` builds an empty batch of the current count for ``tp``; ``queue(tp)`` is the
    partition's batch deque and ``lock(tp)`` its lock (the accumulator's); ``in_flight(topic)`` says whether
    a batch of the topic is awaiting its response (the sender's).
    """

    def __init__(self) -> None:
        self.cluster: Any = None
        self.partition: Callable[[str, bytes | None, bytes | None], int | None] | None = None
        self.in_flight: Callable[[str], bool] = lambda topic: False
        self._counts: dict[str, int] = {}       # last count seen per topic (metadata updates)
        self._changed: set[str] = set()         # topics to hold at the next drain (any thread adds)
        self._held: dict[str, _Held] = {}

    # -- counts ------------------------------------------------------------------------------------------

    def current(self, topic: str, unknown: int = EXPLICIT) -> int:
        """The topic's partition count in the producer's metadata (``unknown`` if it has none)."""
        partitions = self._partitions_of(topic) if self.cluster is not None else None
        return unknown if partitions is None else len(partitions)

    def watch(self, cluster: Any) -> None:
        """Follow ``cluster`` (the producer's metadata): its partition counts and their changes."""
        self.cluster = cluster
        # kafka_kip's metadata lends its own dict; kafka-python's builds a set
        self._partitions_of = getattr(cluster, 'known_partitions', cluster.partitions_for_topic)
        cluster.add_listener(self.metadata_updated)

    def batch_created(self, topic: str, count: int) -> None:
        """(Any thread.) A batch of ``topic`` was created for ``count``: hold the topic if that is stale."""
        if count != EXPLICIT and self.cluster is not None and count != self.current(topic):
            self._changed.add(topic)

    def metadata_updated(self, cluster: Any) -> None:
        """A metadata listener: topics whose partition count changed are held."""
        for topic in cluster.topics():
            count = self.current(topic)
            previous = self._counts.get(topic)
            if previous is not None and previous != count:
                log.info('Topic %s now has %d partitions (had %d): holding its records until those partitioned '
                         'for %d partitions are resolved', topic, count, previous, previous)
                self._changed.add(topic)  # before the count: may_drain() reads them in the other order
            self._counts[topic] = count

    def refused(self, batch: ProducerBatch) -> None:
        """A leader refused ``batch`` with INVALID_PARTITION_COUNT: hold its topic and refresh the metadata."""
        held = self._hold(batch.topic_partition.topic)
        held.refused.append(batch)
        held.refreshed = self.cluster.request_update()

    # -- holding -----------------------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """True while no topic is held or about to be (the common case: nothing to do)."""
        return not self._held and not self._changed

    def held_topics(self) -> frozenset[str]:
        """The topics none of whose batches may be drained now (after taking in new changes)."""
        while self._changed:
            self._hold(self._changed.pop())
        return frozenset(self._held)

    def _hold(self, topic: str) -> _Held:
        held = self._held.get(topic)
        if held is None:
            held = self._held[topic] = _Held()
        return held

    def may_drain(self, batch: ProducerBatch) -> bool:
        """(Sender thread, under ``batch``'s partition lock, right before it is taken.) Whether ``batch`` may be
        sent: its topic is neither held nor about to be, and its count is the one the metadata listener last saw.

        A drain looks the held topics up once, before it takes any batch; meanwhile a ``send()`` that read the
        count before it changed can queue a batch of the old count (its topic is held only from the next drain),
        and one that read the new count before the listener ran, a batch of the new count. Either, taken then,
        would reach its partition ahead of older records of its keys still to be re-partitioned.
        """
        topic = batch.topic_partition.topic
        seen = self._counts.get(topic)  # read before _changed: metadata_updated() adds to _changed first
        if topic in self._changed or topic in self._held:
            return False
        count = count_of(batch)
        return count == EXPLICIT or seen is None or count == seen

    def phase(self, topic: str) -> Phase | None:
        """Why ``topic`` is still held, or None when it can be re-partitioned (or is not held)."""
        held = self._held.get(topic)
        if held is None:
            return None
        if self.in_flight(topic):
            return Phase.AWAITING_RESPONSES
        if held.refreshed is not None and not held.refreshed.is_done:
            return Phase.AWAITING_METADATA
        return None

    def resolve(self, queues: BatchQueues) -> None:
        """Re-partition and release every held topic that can be (see the module docstring)."""
        for topic in list(self.held_topics()):
            if self.phase(topic) is not None:
                continue
            held = self._held.pop(topic)
            count = self.current(topic)
            stale = list(held.refused)
            for tp in queues.partitions_of(topic):
                with queues.lock(tp):
                    batches = queues.batches(tp)
                    keep = [b for b in batches if count_of(b) in (EXPLICIT, count)]
                    stale.extend(b for b in batches if count_of(b) not in (EXPLICIT, count))
                    batches.clear()
                    batches.extend(keep)
            if stale:
                self._repartition(topic, stale, count, queues)
                log.info('Re-partitioned %d batches of topic %s for its %d partitions (%d refused by a leader)',
                         len(stale), topic, count, len(held.refused))

    def _repartition(self, topic: str, stale: list[ProducerBatch], count: int, queues: BatchQueues) -> None:
        """The records of ``stale`` (in order) in new batches of their partitions for ``count``, queued first;
        their futures follow them."""
        by_partition: dict[tuple[TopicPartition, bool], list[ProducerBatch]] = {}
        moves = []
        for batch in stale:
            explicit = count_of(batch) == EXPLICIT
            batch.records.close()
            records = [record for record_batch in MemoryRecords(bytes(batch.records.buffer()))
                       for record in record_batch]
            # a prebuilt batch (kafka_kip.producer.prebuilt) has no record futures: its writer follows the batch
            futures = list(batch._record_futures) or [None] * len(records)
            for record, future in zip(records, futures, strict=True):
                partition = None if explicit else self.partition(topic, record.key, record.value)
                if partition is None:
                    partition = batch.topic_partition.partition
                batches = by_partition.setdefault((TopicPartition(topic, partition), explicit), [])
                appended = batches[-1].records.append(record.timestamp, record.key, record.value,
                                                      list(record.headers)) if batches else None
                if appended is None:
                    batches.append(queues.new_batch(TopicPartition(topic, partition),
                                                    EXPLICIT if explicit else count, batch.created))
                    appended = batches[-1].records.append(record.timestamp, record.key, record.value,
                                                          list(record.headers))
                moves.append((future, batches[-1], appended.offset))
        created = [batch for batches in by_partition.values() for batch in batches]
        queues.replace(stale, created)  # before any future moves: flush() follows the old batches to these
        for future, batch, index in moves:
            if future is not None:
                future.rebind(batch.produce_future, index)
        for (tp, _), batches in by_partition.items():
            with queues.lock(tp):
                _queue_by_age(queues.batches(tp), batches)


def _queue_by_age(queue: deque[ProducerBatch], batches: list[ProducerBatch]) -> None:
    """Put ``batches`` (re-partitioned records, oldest first) into ``queue`` where their records were sent: after
    the batches created before theirs (records re-partitioned by an earlier resolve that are still queued, retries
    holding a sequence), before those created after. Ahead of everything, a record of a late stale batch would
    overtake older records of its key that an earlier resolve moved to the same partition."""
    merged: list[ProducerBatch] = []
    waiting = deque(batches)
    for queued in queue:
        while waiting and not queued.has_sequence and waiting[0].created < queued.created:
            merged.append(waiting.popleft())
        merged.append(queued)
    merged.extend(waiting)
    queue.clear()
    queue.extend(merged)


class BatchQueues(Protocol):
    """What re-partitioning needs of the accumulator."""

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        """The topic's partitions that have a batch queue."""

    def lock(self, tp: TopicPartition) -> Any:
        """The lock of ``tp``'s queue."""

    def batches(self, tp: TopicPartition) -> deque[ProducerBatch]:
        """``tp``'s queue (under its lock)."""

    def new_batch(self, tp: TopicPartition, count: int, created: float) -> ProducerBatch:
        """An empty, registered batch for ``tp`` of partition count ``count``, as old as ``created``."""

    def replace(self, stale: list[ProducerBatch], created: list[ProducerBatch]) -> None:
        """The records of ``stale`` move to ``created``: let go of ``stale`` without completing it."""


__all__ = ['EXPLICIT', 'PENDING', 'SENDING', 'BatchQueues', 'PartitionCounts', 'Phase', 'count_of']
