"""Reading and writing the clusters of the MirrorMaker 2 comparison (confluent-kafka, in the benchmark's process):
unique values per record, whole topics read back, group offsets committed and read."""
from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from benchmarks.harness import BenchmarkError
from benchmarks.mirrormaker.replicators import GROUP


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    value: bytes | None


def read_all(bootstrap: str, topics: dict[str, int], isolation: str = 'read_committed') -> list[Record]:
    """Every record of ``topics`` (name -> partitions) from each partition's start to its end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'bench-reader', 'enable.auto.commit': False,
                         'enable.partition.eof': True, 'isolation.level': isolation})
    try:
        assigned = [TopicPartition(t, p, OFFSET_BEGINNING) for t, n in topics.items() for p in range(n)]
        consumer.assign(assigned)
        pending = {(tp.topic, tp.partition) for tp in assigned}
        found: list[Record] = []
        deadline = time.monotonic() + 120
        while pending:
            if time.monotonic() > deadline:
                raise BenchmarkError(f'reading {sorted(pending)} from {bootstrap} did not reach their ends')
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    pending.discard((message.topic(), message.partition()))
                elif error is not None:
                    if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        continue
                    raise BenchmarkError(f'reading {bootstrap}: {error}')
                else:
                    found.append(Record(message.topic(), message.partition(), message.offset(), message.value()))
        return found
    finally:
        consumer.close()


def has_topics(bootstrap: str, topics: dict[str, int]) -> bool:
    """Whether ``bootstrap`` has every partition of ``topics``."""
    from confluent_kafka.admin import AdminClient

    listed = AdminClient({'bootstrap.servers': bootstrap}).list_topics(timeout=5).topics
    return all(t in listed and len(listed[t].partitions) >= n and listed[t].error is None
               for t, n in topics.items())


def end_offsets_sum(consumer: object, topics: dict[str, int]) -> int:
    """The sum of the end offsets of ``topics`` (0 for a partition the cluster does not have yet)."""
    from confluent_kafka import KafkaException, TopicPartition

    total = 0
    for topic, partitions in topics.items():
        for p in range(partitions):
            try:
                total += consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=2, cached=False)[1]
            except KafkaException:
                pass
    return total


@contextmanager
def watermark_reader(bootstrap: str) -> Iterator[object]:
    from confluent_kafka import Consumer

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'bench-watermarks',
                         'topic.metadata.refresh.interval.ms': 200})
    try:
        yield consumer
    finally:
        consumer.close()


def value_of(topic: str, index: int, size: int = 0) -> bytes:
    return f'{topic}-{index:09d}'.encode().ljust(size, b'.')


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1, size: int = 0, keys: int = 0,
            first: int = 0) -> None:
    """``count`` records round-robin over ``partitions``, values unique (``value_of``), keys ``k<i % keys>``."""
    from confluent_kafka import Producer

    producer = Producer({'bootstrap.servers': bootstrap, 'queue.buffering.max.messages': 1_000_000,
                         'linger.ms': 5})
    for i in range(first, first + count):
        key = f'k{i % keys}'.encode() if keys else None
        while True:
            try:
                producer.produce(topic, value_of(topic, i, size), key, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if not i % 10_000:
            producer.poll(0)
    if producer.flush(60):
        raise BenchmarkError(f'{topic}: records left undelivered')


def produce_transactions(bootstrap: str, topic: str, transactions: int, per_transaction: int) -> list[bytes]:
    """``transactions`` transactions of ``per_transaction`` records; every third is aborted. Returns the aborted
    values."""
    from confluent_kafka import Producer

    producer = Producer({'bootstrap.servers': bootstrap, 'transactional.id': 'bench-txn', 'linger.ms': 5})
    producer.init_transactions(30)
    aborted: list[bytes] = []
    index = 0
    for t in range(transactions):
        producer.begin_transaction()
        values = [value_of(topic, index + i) for i in range(per_transaction)]
        index += per_transaction
        for value in values:
            producer.produce(topic, value, partition=0)
        if t % 3 == 2:
            producer.flush(30)
            producer.abort_transaction(30)
            aborted.extend(values)
        else:
            producer.commit_transaction(30)
    return aborted


def commit(bootstrap: str, offsets: dict[tuple[str, int], int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': GROUP, 'enable.auto.commit': False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Group ``app``'s committed offsets on ``bootstrap`` (only those it has)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': GROUP, 'enable.auto.commit': False})
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
    except KafkaException:
        return {}
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}


def committed_records(replicator: object, watermarks: object, topics: dict[str, int]) -> int:
    """Records on the replicator's target: the end offsets' sum, or for a transactional replicator (whose end
    offsets count its transaction markers too) the records a read_committed consumer reads."""
    if getattr(replicator, 'transactional', False):
        return len(read_all(replicator.target, topics))
    return end_offsets_sum(watermarks, topics)
