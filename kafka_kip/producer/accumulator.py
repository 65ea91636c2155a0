"""The record accumulator, extended with records that carry offsets (KIP-391).

kafka-python's ``RecordAccumulator`` keeps a queue of batches per partition; this subclass adds batches of
records with offsets to the same queues (so a partition's records go out in ``send()`` order, whatever
their kind) and changes two things:

- ``append_with_offset``: a record joins the partition's newest batch only if that batch holds records
  with offsets and the record's offset is the next one; a gap or a non-increasing offset starts a new
  batch (whether it is acceptable is the broker's call). Plain records never join such a batch.
- ``drain_batches_for_one_node``: each drain for a node takes one kind of batch only — the kind of the
  oldest batch at the head of the node's partitions — because ``use_offset`` is a flag of the whole
  ProduceRequest. Before a batch of offset records is drained, :class:`OffsetAdmission` decides
  whether its leader may get it (and how); a refused batch is failed here, unsent. kafka-python's drain
  then runs over exactly the partitions whose heads were chosen, so what it takes is what was decided
  whatever application threads append meanwhile (they only ever add to the tail of a queue; heads leave a
  queue only on the sender thread, which runs the decision and the drain).

A producer that never sends a record with an offset takes kafka-python's own drain, which stops before a
batch with offsets (that producer's first, appended while the drain ran) and leaves it to the next drain.

KIP-253: plain records go into batches of their partition count (:class:`~kafka_kip.producer.records.
CompiledProducerBatch`); while a topic's count is being resolved (:mod:`kafka_kip.producer.partition_counts`)
``ready()`` and the drain leave its partitions alone, and ``ready()`` re-partitions it once it can.
"""
from __future__ import annotations

import logging
import time
import weakref
from collections import deque
from collections.abc import Collection
from itertools import islice
from operator import attrgetter
from typing import Any

import kafka.errors as Errors
from kafka.cluster import ClusterMetadata
from kafka.producer.producer_batch import ProducerBatch
from kafka.producer.record_accumulator import RecordAccumulator
from kafka.record.memory_records import MemoryRecordsBuilder
from kafka.structs import TopicPartition

from kafka_kip import _codec
from kafka_kip._patch import accumulator_append, transaction_partitions
from kafka_kip.producer.admission import Admit, OffsetAdmission
from kafka_kip.producer.batch import OffsetProducerBatch, OffsetRecordFuture
from kafka_kip.producer.partition_counts import SENDING, PartitionCounts
from kafka_kip.producer.records import CompiledProducerBatch, records_builder

log = logging.getLogger(__name__)
_join_transaction = transaction_partitions.install()
_append_counted_batches = accumulator_append.install(records_builder=records_builder, batch=CompiledProducerBatch)

#: How often a wait for a batch looks whether it was replaced (its future then never completes).
_REPLACED_POLL_S = 0.05


class OffsetRecordAccumulator(RecordAccumulator):
    """kafka-python's ``RecordAccumulator`` that also accumulates records with offsets."""

    def __init__(self, **configs: Any) -> None:
        super().__init__(**configs)
        #: Set by :class:`~kafka_kip.producer.sender.OffsetSender`, which owns the client admission needs.
        self.admission: OffsetAdmission | None = None
        self._offset_partitions: set[TopicPartition] = set()  # partitions that ever had an offset record
        # the partitions whose head batch of offset records the running drain may take (sender thread only)
        self._admitted_heads: frozenset[TopicPartition] = frozenset()
        #: KIP-253: batch partition counts and held topics; the sender and the producer complete its wiring.
        self.partition_counts = PartitionCounts()
        #: a re-partitioned batch -> the batches its records moved to (while someone still holds the old one)
        self.replaced: weakref.WeakKeyDictionary[ProducerBatch, list[ProducerBatch]] = weakref.WeakKeyDictionary()
        if _codec.compiled is not None:
            # the counter kafka-python guards with a lock is a compiled one (its updates run under the GIL)
            self._appends_in_progress = _codec.compiled.Counter()

    def append(self, tp: TopicPartition, timestamp_ms: int | None, key: bytes | None, value: bytes | None,
               headers: list, now: float | None = None, abort_on_new_batch: bool = False) -> tuple:
        """kafka-python's append of a plain record, into a batch of the record's partition count (KIP-253) built
        with the compiled codec where it is built; a new batch of a count that is no longer current holds its
        topic."""
        result = _append_counted_batches(self, tp, timestamp_ms, key, value, headers, now=now,
                                         abort_on_new_batch=abort_on_new_batch)
        if result[2]:
            self.partition_counts.batch_created(tp.topic, SENDING.count)
        return result

    def _new_records(self) -> MemoryRecordsBuilder:
        # the compiled codec's builder when it is built (the same interface and bytes), else kafka-python's
        return records_builder(self.config['message_version'], self.config['compression_attrs'],
                               self.config['batch_size'])

    def append_with_offset(self, tp: TopicPartition, offset: int, timestamp_ms: int | None,
                           key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]],
                           now: float | None = None) -> tuple[OffsetRecordFuture, bool, bool]:
        """Add a record to be written at ``offset``; returns (future, batch_is_full, new_batch_created)."""
        if self.config['message_version'] < 2:
            raise Errors.UnsupportedVersionError(
                'Records with offsets need message format v2 (brokers 0.11 or later)')
        now = time.monotonic() if now is None else now
        # abort_incomplete_batches() waits for appends in progress before it gives up on new batches.
        self._appends_in_progress.increment()
        try:
            with self._tp_lock(tp):
                if self._closed:
                    raise Errors.IllegalStateError('RecordAccumulator is closed')
                queue = self._batches[tp]
                batch = queue[-1] if queue else None
                future = None
                if isinstance(batch, OffsetProducerBatch):
                    future = batch.try_append_at(offset, timestamp_ms, key, value, headers, now=now)
                created = future is None
                if created:
                    batch = OffsetProducerBatch(tp, self._new_records(), offset, now=now)
                    future = batch.try_append_at(offset, timestamp_ms, key, value, headers, now=now)
                    queue.append(batch)
                    self._incomplete.add(batch)
                    self._offset_partitions.add(tp)
                return future, len(queue) > 1 or batch.records.is_full(), created
        finally:
            self._appends_in_progress.decrement()

    def append_prebuilt(self, batch: ProducerBatch) -> None:
        """Queue a batch built elsewhere (:mod:`kafka_kip.producer.prebuilt`) after the partition's others."""
        tp = batch.topic_partition
        self._appends_in_progress.increment()
        try:
            with self._tp_lock(tp):
                if self._closed:
                    raise Errors.IllegalStateError('RecordAccumulator is closed')
                self._batches[tp].append(batch)
                self._incomplete.add(batch)
                if isinstance(batch, OffsetProducerBatch):
                    self._offset_partitions.add(tp)
        finally:
            self._appends_in_progress.decrement()
        if not isinstance(batch, OffsetProducerBatch):
            self.partition_counts.batch_created(tp.topic, batch.partition_count)

    def drain_batches_for_one_node(self, cluster: ClusterMetadata, node_id: int, max_size: int,
                                   now: float | None = None) -> list[ProducerBatch]:
        """kafka-python's drain, limited to one kind of batch and to the offset batches admission lets go, and
        leaving the partitions of held topics (KIP-253) alone."""
        held = self.partition_counts.held_topics()
        if held:
            cluster = _Partitions([tp for tp in cluster.partitions_for_broker(node_id) if tp.topic not in held])
        if not self._offset_partitions:
            return super().drain_batches_for_one_node(cluster, node_id, max_size, now=now)
        now = time.monotonic() if now is None else now
        chosen, offsets = self._choose_heads(cluster, node_id, now)
        if not chosen:
            return []
        self._admitted_heads = frozenset(chosen) if offsets else frozenset()
        try:
            return super().drain_batches_for_one_node(_Partitions(chosen), node_id, max_size, now=now)
        finally:
            self._admitted_heads = frozenset()

    def _should_stop_drain_batches_for_partition(self, first: ProducerBatch, tp: TopicPartition) -> bool:
        # kafka-python asks this under the partition's lock right before it takes ``first``: a batch of offset
        # records no decision let go (the producer's first, appended while a plain drain ran) waits.
        if isinstance(first, OffsetProducerBatch) and tp not in self._admitted_heads:
            return True
        if not self.partition_counts.may_drain(first):
            return True  # KIP-253: a count changed after this drain looked the held topics up
        return super()._should_stop_drain_batches_for_partition(first, tp)

    def _choose_heads(self, cluster: ClusterMetadata, node_id: int, now: float) -> tuple[list[TopicPartition], bool]:
        """The partitions whose head batch this drain takes, and whether those are batches of offset records.

        The kind is that of the oldest head not backing off; offset heads are admitted (a refused one is
        failed here, unsent, and one that must wait is left out).
        """
        retry_backoff = self.config['retry_backoff_ms'] / 1000
        heads: dict[TopicPartition, ProducerBatch] = {}  # the heads this drain could take
        for tp in cluster.partitions_for_broker(node_id):
            if tp not in self.muted and tp in self._batches:
                with self._tp_lock(tp):
                    queue = self._batches[tp]
                    if queue and not (queue[0].attempts and queue[0].last_attempt + retry_backoff > now):
                        heads[tp] = queue[0]
        if not heads:
            return [], False
        offsets = isinstance(min(heads.values(), key=attrgetter('created')), OffsetProducerBatch)
        chosen = []
        for tp, head in heads.items():
            if isinstance(head, OffsetProducerBatch) != offsets:
                continue
            if offsets:
                verdict = self.admission.admit(head, node_id)
                if verdict is Admit.WAIT:  # admission muted the partition
                    continue
                if verdict is not Admit.SEND:
                    self._refuse_head(tp, head, verdict)
                    continue
            chosen.append(tp)
        return chosen, offsets

    def _refuse_head(self, tp: TopicPartition, head: OffsetProducerBatch, error: Errors.KafkaError) -> None:
        if head.in_retry() and self._transaction_manager is not None:
            self._abandon_sequences(error)
        with self._tp_lock(tp):
            log_end = getattr(error, 'log_end_offset', -1)
            if head.base_offset < log_end < head.next_offset:
                head.drop_below(log_end, error, self._new_records())  # stays first, now from log_end
                return
            self._batches[tp].popleft()
            head.records.close()
        head.complete_exceptionally(error, lambda _: error)
        self.deallocate(head)

    def _abandon_sequences(self, error: Errors.KafkaError) -> None:
        # The refused batch was sent before, so whether the broker kept its sequence is unknown: start over
        # with a new producer id, as kafka-python does for a batch in retry that expires. A transaction
        # cannot: it must be aborted.
        if self._transaction_manager.is_transactional():
            self._transaction_manager.transition_to_abortable_error(error)
        else:
            self._transaction_manager.reset_producer_id()

    def split_and_reenqueue(self, batch: ProducerBatch, now: float | None = None) -> int:
        """kafka-python's split of a batch the broker found too large; a batch of offset records splits into
        two that keep their offsets."""
        tp = batch.topic_partition
        if not isinstance(batch, OffsetProducerBatch):
            count = super().split_and_reenqueue(batch, now=now)
            with self._tp_lock(tp):  # (kafka-python put them first; only this thread takes heads)
                self.replaced[batch] = list(islice(self._batches[tp], count))
            return count
        now = time.monotonic() if now is None else now
        if self._transaction_manager and batch.has_sequence:
            # nothing was appended: the halves take sequences from the refused batch's first one
            self._transaction_manager.set_sequence_number(tp, batch.base_sequence)
        halves = batch.split_in_two(self._new_records, now)
        self.replaced[batch] = halves  # flush() and the Arrow writer follow the records there
        with self._tp_lock(tp):
            for half in reversed(halves):
                half.attempts, half.last_attempt = batch.attempts, now
                self._batches[tp].appendleft(half)
                self._incomplete.add(half)
        return len(halves)

    def requeue_from(self, batch: OffsetProducerBatch, log_end_offset: int, error: Errors.KafkaError) -> int:
        """For a drained batch the broker refused: fail its records below ``log_end_offset``, put the rest
        back first in the partition's queue (see :meth:`OffsetProducerBatch.drop_below`). Returns the
        number of records failed."""
        with self._tp_lock(batch.topic_partition):
            dropped = batch.drop_below(log_end_offset, error, self._new_records())
            self._batches[batch.topic_partition].appendleft(batch)
        return dropped

    def ready(self, cluster: ClusterMetadata, now: float | None = None) -> tuple[set[int], float, bool]:
        """kafka-python's ready(), after unmuting partitions whose log end lookup may be retried and resolving
        the topics whose partition count changed (KIP-253); held topics' partitions are not ready."""
        if self._offset_partitions:
            self.admission.release_due(time.monotonic() if now is None else now)
        if self.partition_counts.idle:
            return super().ready(cluster, now=now)
        self.partition_counts.resolve(_CountedQueues(self))
        held = self.partition_counts.held_topics()
        added = {tp for tp in list(self._batches) if tp.topic in held} - self.muted
        self.muted |= added
        try:
            return super().ready(cluster, now=now)
        finally:
            self.muted -= added

    @property
    def next_expiry_time_ms(self) -> float:
        """kafka-python's next batch expiry, or the next log end lookup retry if sooner: the sender sleeps until
        then (nothing else may wake it while the partition waits for its retry)."""
        expiry = super().next_expiry_time_ms
        if self._offset_partitions:
            return min(expiry, self.admission.next_retry_ms)
        return expiry

    def wait_for(self, batch: ProducerBatch, timeout: float | None = None) -> bool:
        """Wait at most ``timeout`` seconds (None: no limit) until ``batch`` is answered or replaced (split or
        re-partitioned: its own future is then never completed, see :attr:`replaced`); whether it was."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while batch not in self.replaced:
            step = _REPLACED_POLL_S if deadline is None else max(0.0, min(_REPLACED_POLL_S, deadline - time.monotonic()))
            if batch.produce_future.wait(timeout=step):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return batch in self.replaced
        return True

    def await_flush_completion(self, timeout: float | None = None) -> None:
        """kafka-python's flush wait, following split and re-partitioned (KIP-253) batches to the batches their
        records moved to (kafka-python would wait on the old batch, whose future is never completed)."""
        try:
            pending = deque(self._incomplete.all())
            while pending:
                batch = pending.popleft()
                if not self.wait_for(batch, timeout):
                    raise Errors.KafkaTimeoutError('Timeout waiting for future')
                if batch in self.replaced:
                    pending.extend(self.replaced[batch])
                elif not batch.produce_future.is_done:
                    raise Errors.UnknownError('Future not done')
                elif batch.produce_future.failed():
                    log.warning(batch.produce_future.exception)
        finally:
            self._flushes_in_progress.decrement()


class _CountedQueues:
    """The accumulator as re-partitioning sees it (:class:`~kafka_kip.producer.partition_counts.BatchQueues`)."""

    def __init__(self, accumulator: OffsetRecordAccumulator) -> None:
        self._accumulator = accumulator

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [tp for tp in list(self._accumulator._batches) if tp.topic == topic]

    def lock(self, tp: TopicPartition) -> Any:
        return self._accumulator._tp_lock(tp)

    def batches(self, tp: TopicPartition) -> deque[ProducerBatch]:
        return self._accumulator._batches[tp]

    def new_batch(self, tp: TopicPartition, count: int, created: float) -> ProducerBatch:
        accumulator = self._accumulator
        batch = CompiledProducerBatch(tp, accumulator._new_records())
        batch.partition_count = count
        batch.created = created
        accumulator._incomplete.add(batch)
        manager = accumulator._transaction_manager
        if manager is not None and manager.is_transactional():
            _join_transaction(manager, tp)  # (an aborting or failed transaction aborts the batch anyway)
        return batch

    def replace(self, stale: list[ProducerBatch], created: list[ProducerBatch]) -> None:
        for batch in stale:
            self._accumulator.replaced[batch] = created
            self._accumulator.deallocate(batch)


class _Partitions:
    """The cluster as kafka-python's drain sees it: the node leads exactly the chosen partitions."""

    def __init__(self, partitions: Collection[TopicPartition]) -> None:
        self._partitions = partitions

    def partitions_for_broker(self, node_id: int) -> Collection[TopicPartition]:
        return self._partitions


__all__ = ['OffsetRecordAccumulator']
