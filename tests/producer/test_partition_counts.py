"""KIP-253 re-partitioning in the producer, without a network: where re-partitioned records are queued.

The fault: a record partitioned for the old count can reach the accumulator after its topic was re-partitioned
(its ``send()`` read the count before the producer learnt the new one, and ran late). Its batch is re-partitioned
by a second resolve, while the records the first one moved are still queued in the same partition.
"""
from __future__ import annotations

import threading
from collections import defaultdict, deque

import pytest
from kafka.partitioner.default import murmur2
from kafka.producer.producer_batch import ProducerBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.structs import TopicPartition

from kafka_kip.producer.partition_counts import PartitionCounts

pytestmark = pytest.mark.kip253

KEY = b'key-11'  # murmur2: partition 4 of 9, partition 1 of 12


class Cluster:
    """The producer's metadata as PartitionCounts follows it."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.listeners: list = []

    def topics(self) -> set[str]:
        return {'t'}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.count))

    def add_listener(self, listener) -> None:
        self.listeners.append(listener)

    def grow(self, count: int) -> None:
        self.count = count
        for listener in self.listeners:
            listener(self)


class Queues:
    """The accumulator's batch queues (PartitionCounts' BatchQueues)."""

    def __init__(self) -> None:
        self.queues: defaultdict[TopicPartition, deque[ProducerBatch]] = defaultdict(deque)
        self.locks: defaultdict[TopicPartition, threading.Lock] = defaultdict(threading.Lock)

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [tp for tp in self.queues if tp.topic == topic]

    def lock(self, tp: TopicPartition) -> threading.Lock:
        return self.locks[tp]

    def batches(self, tp: TopicPartition) -> deque[ProducerBatch]:
        return self.queues[tp]

    def new_batch(self, tp: TopicPartition, count: int, created: float) -> ProducerBatch:
        batch = ProducerBatch(tp, MemoryRecordsBuilder(2, 0, 16384))
        batch.partition_count, batch.created = count, created
        return batch

    def replace(self, stale: list[ProducerBatch], created: list[ProducerBatch]) -> None:
        pass

    def queued(self, partition: int) -> list[int]:
        """The values queued for t-``partition``, in the order they would be sent."""
        values = []
        for batch in self.queues[TopicPartition('t', partition)]:
            batch.records.close()
            values += [int(r.value) for rb in MemoryRecords(bytes(batch.records.buffer())) for r in rb]
        return values

    def add(self, partition: int, count: int, created: float, values: list[int]) -> None:
        batch = self.new_batch(TopicPartition('t', partition), count, created)
        for value in values:
            batch.records.append(0, KEY, b'%d' % value, [])
        self.queues[batch.topic_partition].append(batch)


def test_a_late_stale_batch_is_queued_behind_the_records_an_earlier_resolve_moved():
    cluster, queues, counts = Cluster(9), Queues(), PartitionCounts()
    counts.watch(cluster)
    cluster.grow(9)  # the producer's first metadata of t
    counts.partition = lambda topic, key, value: (murmur2(key) & 0x7FFFFFFF) % cluster.count
    queues.add(4, 9, created=1.0, values=[1211, 1227])  # partitioned for 9, still queued
    cluster.grow(12)
    counts.resolve(queues)
    assert (queues.queued(1), queues.queued(4)) == ([1211, 1227], [])
    assert counts.idle  # released: t-1's batches may be sent, not yet drained

    queues.add(1, 12, created=3.0, values=[1451])  # a send() that read the new count
    queues.add(4, 9, created=2.0, values=[1435])  # a send() that read the old count before the growth, ran late
    counts.batch_created('t', 9)
    assert not counts.idle
    counts.resolve(queues)
    assert (queues.queued(1), queues.queued(4)) == ([1211, 1227, 1435, 1451], [])


def test_a_drain_takes_no_batch_of_a_count_the_producer_has_not_resolved():
    cluster, queues, counts = Cluster(9), Queues(), PartitionCounts()
    counts.watch(cluster)
    cluster.grow(9)
    counts.partition = lambda topic, key, value: (murmur2(key) & 0x7FFFFFFF) % cluster.count
    queues.add(4, 9, created=1.0, values=[1211])
    old, = queues.queues[TopicPartition('t', 4)]
    assert counts.may_drain(old)

    cluster.count = 12  # the metadata has the new count; its listener has not run yet
    queues.add(1, 12, created=2.0, values=[1451])  # a send() that read it
    new, = queues.queues[TopicPartition('t', 1)]
    assert (counts.may_drain(old), counts.may_drain(new)) == (True, False)
    cluster.grow(12)  # the listener: t is held
    assert (counts.may_drain(old), counts.may_drain(new)) == (False, False)
    counts.resolve(queues)
    assert queues.queued(1) == [1211, 1451]
    assert [counts.may_drain(batch) for batch in queues.queues[TopicPartition('t', 1)]] == [True, True]

    queues.add(4, 9, created=3.0, values=[1467])  # a send() that read 9 before the growth, queued after the resolve
    late, = queues.queues[TopicPartition('t', 4)]
    assert counts.may_drain(late) is False  # (its topic is held only from the next drain: batch_created)
