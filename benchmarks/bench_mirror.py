"""Replication throughput: the kafka_kip mirror vs consume->produce loops, on the same brokers.

Two reference clusters run in their own processes (``python -m kafka_kip broker --brokers 1``: the
source and the target), so they do not share the client's GIL. The source topic is loaded once (with
confluent-kafka's producer at its defaults, untimed); then each replicator copies every record to its
own target topic:

* ``kafka_kip mirror``: :class:`kafka_kip.mirror.Mirror` (batches copied as bytes, offsets kept);
* ``kafka-python loop``: unmodified kafka-python, ``KafkaConsumer`` -> ``KafkaProducer`` at their defaults;
* ``confluent-kafka loop``: the same loop on confluent-kafka (librdkafka), ``consume()`` in batches.

Each replicator is timed from its first record read (the mirror: from the end of its set-up) to its
last record acknowledged by the target, and every run is checked to have delivered every record. One
run; the table reports records/s and the ratios. Results, never asserts.

    python -m benchmarks.bench_mirror [--records 1000000] [--record-size 100] [--partitions 1] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from benchmarks.bench_cluster import BenchmarkError, ReferenceBrokerProcess

SOURCE_TOPIC = 'bench'
TIMEOUT_S = 600.0
GOAL_VS_CONFLUENT = 1.0


@dataclass
class Result:
    replicator: str
    records: int
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


def load_source(bootstrap: str, partitions: int, count: int, value: bytes) -> None:
    """Write ``count`` records round-robin over the partitions (confluent-kafka producer defaults)."""
    from confluent_kafka import Producer

    producer = Producer({'bootstrap.servers': bootstrap, 'queue.buffering.max.messages': 1_000_000})
    for i in range(count):
        while True:
            try:
                producer.produce(SOURCE_TOPIC, value, b'key-%d' % (i % 1000), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if not i % 10_000:
            producer.poll(0)
    if producer.flush(TIMEOUT_S):
        raise BenchmarkError('the source was not fully loaded')


def target_count(bootstrap: str, topic: str, partitions: int) -> int:
    """Records on the target topic (sum of the partitions' end offsets)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        consumer.close()
    return sum(ends.values())


def run_kafka_kip(source: str, target: str, topic: str, count: int, partitions: int) -> float:
    from kafka_kip.mirror import Mirror

    with Mirror(source, target, SOURCE_TOPIC, target_prefix=topic.removesuffix(SOURCE_TOPIC)) as mirror:
        mirror.start(stop_at_end=True)
        start = time.perf_counter()
        summary = mirror.run(stop_at_end=True)
        elapsed = time.perf_counter() - start
    if summary.records != count or summary.incidents:
        raise BenchmarkError(f'kafka_kip mirror copied {summary.records} records, incidents {summary.incidents}')
    return elapsed


def run_kafka_python(source: str, target: str, topic: str, count: int, partitions: int) -> float:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=source, group_id=f'bench-{uuid.uuid4().hex}',
                             auto_offset_reset='earliest')
    producer = KafkaProducer(bootstrap_servers=target)
    try:
        consumer.assign([TopicPartition(SOURCE_TOPIC, p) for p in range(partitions)])
        copied, start = 0, 0.0
        deadline = time.monotonic() + TIMEOUT_S
        send = producer.send
        while copied < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                if not copied:
                    start = time.perf_counter()
                for r in records:
                    send(topic, value=r.value, key=r.key, partition=r.partition, timestamp_ms=r.timestamp)
                copied += len(records)
        producer.flush(TIMEOUT_S)
        return time.perf_counter() - start
    finally:
        producer.close()
        consumer.close()


def run_confluent(source: str, target: str, topic: str, count: int, partitions: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    consumer = Consumer({'bootstrap.servers': source, 'group.id': f'bench-{uuid.uuid4().hex}',
                         'auto.offset.reset': 'earliest'})
    producer = Producer({'bootstrap.servers': target})
    try:
        consumer.assign([TopicPartition(SOURCE_TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
        copied, start = 0, 0.0
        deadline = time.monotonic() + TIMEOUT_S
        produce, poll = producer.produce, producer.poll
        while copied < count and time.monotonic() < deadline:
            messages = consumer.consume(num_messages=10_000, timeout=0.5)
            if messages and not copied:
                start = time.perf_counter()
            for m in messages:
                if m.error():
                    raise BenchmarkError(f'confluent-kafka consumer error: {m.error()}')
                while True:
                    try:
                        produce(topic, m.value(), m.key(), partition=m.partition(), timestamp=m.timestamp()[1])
                        break
                    except BufferError:
                        poll(0.05)
            copied += len(messages)
            poll(0)
        if producer.flush(TIMEOUT_S):
            raise BenchmarkError('confluent-kafka loop: records left undelivered')
        return time.perf_counter() - start
    finally:
        consumer.close()


REPLICATORS: dict[str, tuple[str, Callable[[str, str, str, int, int], float]]] = {
    'kafka_kip': ('kafka_kip mirror', run_kafka_kip),
    'kafka-python': ('kafka-python loop', run_kafka_python),
    'confluent-kafka': ('confluent-kafka loop', run_confluent),
}


def run(replicators: Sequence[str], count: int, record_size: int, partitions: int,
        progress: Callable[[str], None] = lambda _msg: None) -> list[Result]:
    source = ReferenceBrokerProcess()
    target = ReferenceBrokerProcess()
    try:
        progress(f'source {source.bootstrap_servers}, target {target.bootstrap_servers}')
        create_topic(source.bootstrap_servers, SOURCE_TOPIC, partitions)
        load_source(source.bootstrap_servers, partitions, count, os.urandom(record_size))
        progress(f'loaded {count:,} records of {record_size} bytes into {partitions} partition(s)')
        results = []
        for key in replicators:
            name, replicate = REPLICATORS[key]
            topic = f'{key.replace("-", "_")}.{SOURCE_TOPIC}'
            if key != 'kafka_kip':
                create_topic(target.bootstrap_servers, topic, partitions)
            seconds = replicate(source.bootstrap_servers, target.bootstrap_servers, topic, count, partitions)
            delivered = target_count(target.bootstrap_servers, topic, partitions)
            if delivered != count:
                raise BenchmarkError(f'{name}: the target has {delivered} records, expected {count}')
            results.append(Result(name, count, seconds))
            progress(f'{name}: {results[-1].records_per_s:,.0f} records/s')
        return results
    finally:
        source.close()
        target.close()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics({topic: {'num_partitions': partitions, 'replication_factor': 1}}, wait_for_metadata=True)
    finally:
        admin.close()


def format_table(results: Sequence[Result]) -> str:
    by_name = {r.replicator: r for r in results}
    confluent = by_name.get('confluent-kafka loop')
    stock = by_name.get('kafka-python loop')
    lines = [f'{"replicator":<22}{"records":>11}{"seconds":>9}{"records/s":>12}{"vs kafka-python":>17}'
             f'{"vs confluent-kafka":>20}']
    for r in results:
        vs_stock = f'{r.records_per_s / stock.records_per_s:.2f}x' if stock else '-'
        vs_confluent = f'{r.records_per_s / confluent.records_per_s:.2f}x' if confluent else '-'
        lines.append(f'{r.replicator:<22}{r.records:>11,}{r.seconds:>9.2f}{r.records_per_s:>12,.0f}'
                     f'{vs_stock:>17}{vs_confluent:>20}')
    lines.append(f'(goal: kafka_kip mirror >= {GOAL_VS_CONFLUENT:.1f}x the confluent-kafka loop)')
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_mirror', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--records', type=int, default=1_000_000, help='records to copy (default 1,000,000)')
    parser.add_argument('--record-size', type=int, default=100, help='value bytes per record (default 100)')
    parser.add_argument('--partitions', type=int, default=1, help='partitions of the topic (default 1)')
    parser.add_argument('--replicators', default=','.join(REPLICATORS),
                        help=f'comma-separated subset of {",".join(REPLICATORS)} (default: all)')
    parser.add_argument('--json', action='store_true', help='print the results as JSON')
    args = parser.parse_args(argv)
    chosen = args.replicators.split(',')
    unknown = set(chosen) - set(REPLICATORS)
    if unknown:
        parser.error(f'--replicators: unknown {", ".join(sorted(unknown))}')
    results = run(chosen, args.records, args.record_size, args.partitions,
                  progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps([{**asdict(r), 'records_per_s': r.records_per_s} for r in results], indent=2))
    else:
        print(format_table(results))
    return 0


if __name__ == '__main__':
    sys.exit(main())

