"""Replication throughput: the kafka_kip mirror vs consume->produce loops, on the same brokers, at scale.

Two reference clusters run in their own processes (``python -m kafka_kip broker --brokers 1``: the
source and the target), so they do not share the client's GIL. For each shape (P partitions of one topic,
or T topics of P partitions) the source is loaded once (confluent-kafka's producer at its defaults,
untimed); then each replicator copies every record to its own target topics:

* ``kafka_kip mirror``: :class:`kafka_kip.mirror.Mirror` (batches copied as bytes, offsets kept);
* ``kafka-python loop``: unmodified kafka-python, ``KafkaConsumer`` -> ``KafkaProducer`` at their defaults;
* ``confluent-kafka loop``: the same loop on confluent-kafka (librdkafka), ``consume()`` in batches.

Each replicator is timed from its first record read (the mirror: from the end of its set-up) to its last
record acknowledged by the target, and every run is checked to have delivered every record. The mirror
also reports the requests it sent by API (counted by its clients) and, from the moment ``start()`` was
called, when the last partition began copying and when the last partition had its first write
acknowledged. ``--rounds`` > 1 interleaves the replicators and reports medians. Results, never asserts.

    python -m benchmarks.bench_mirror --sweep [--records 200000] [--rounds 1] [--json]
    python -m benchmarks.bench_mirror [--records 1000000] [--record-size 100] [--partitions 1] [--topics 1]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from benchmarks.bench_cluster import BenchmarkError, ReferenceBrokerProcess

TIMEOUT_S = 900.0
GOAL_VS_CONFLUENT = 1.0
#: The shapes of ``--sweep``: (topics, partitions per topic), the scale table of the README.
SWEEP = ((1, 10), (1, 100), (1, 1000), (100, 10))
#: Requests the table shows, by the names the mirror's clients count them under.
SHOWN_REQUESTS = ('InitProducerIdRequest', 'ListOffsetsRequest', 'FetchRequest', 'ProduceRequest', 'MetadataRequest')


@dataclass(frozen=True)
class Shape:
    topics: int
    partitions: int  # per topic

    @property
    def names(self) -> list[str]:
        return ['bench'] if self.topics == 1 else [f'bench-{i:03d}' for i in range(self.topics)]

    @property
    def total_partitions(self) -> int:
        return self.topics * self.partitions

    def __str__(self) -> str:
        return f'P = {self.partitions:,}' if self.topics == 1 else f'{self.topics} topics x {self.partitions}'


@dataclass
class Result:
    replicator: str
    records: int
    seconds: float
    requests: dict[str, int] = field(default_factory=dict)  # the mirror's, by API
    all_copying_s: float = -1.0  # from start(): the last partition began copying
    all_written_s: float = -1.0  # from start(): the last partition with data had its first write acknowledged

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


def load_source(bootstrap: str, shape: Shape, count: int, value: bytes) -> None:
    """Write ``count`` records round-robin over every partition (confluent-kafka producer defaults)."""
    from confluent_kafka import Producer

    producer = Producer({'bootstrap.servers': bootstrap, 'queue.buffering.max.messages': 1_000_000})
    names, partitions = shape.names, shape.partitions
    for i in range(count):
        slot = i % shape.total_partitions
        while True:
            try:
                producer.produce(names[slot // partitions], value, b'key-%d' % (i % 1000), partition=slot % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if not i % 10_000:
            producer.poll(0)
    if producer.flush(TIMEOUT_S):
        raise BenchmarkError('the source was not fully loaded')


def target_count(bootstrap: str, prefix: str, shape: Shape) -> int:
    """Records on the target topics (sum of the partitions' end offsets)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        ends = consumer.end_offsets([TopicPartition(prefix + name, p) for name in shape.names
                                     for p in range(shape.partitions)])
    finally:
        consumer.close()
    return sum(ends.values())


def run_kafka_kip(source: str, target: str, prefix: str, count: int, shape: Shape) -> Result:
    from kafka_kip.mirror import Mirror

    with Mirror(source, target, r'bench(-\d+)?', target_prefix=prefix) as mirror:
        began = time.monotonic()
        mirror.start(stop_at_end=True)
        start = time.perf_counter()
        summary = mirror.run(stop_at_end=True)
        elapsed = time.perf_counter() - start
        requests = {f'{name} {api}': n for name, client in (('source', mirror.source), ('target', mirror.target))
                    for api, n in client.requests_sent.items()}
    if summary.records != count or summary.incidents:
        raise BenchmarkError(f'kafka_kip mirror copied {summary.records} records, incidents {summary.incidents}')
    copying = [p.copying_since for p in summary.partitions]
    written = [p.first_copied_at for p in summary.partitions if p.records]
    return Result('kafka_kip mirror', count, elapsed, requests,
                  max(copying) - began if min(copying) >= 0 else -1.0,
                  max(written) - began if written else -1.0)


def run_kafka_python(source: str, target: str, prefix: str, count: int, shape: Shape) -> Result:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=source, group_id=f'bench-{uuid.uuid4().hex}',
                             auto_offset_reset='earliest')
    producer = KafkaProducer(bootstrap_servers=target)
    try:
        consumer.assign([TopicPartition(name, p) for name in shape.names for p in range(shape.partitions)])
        copied, start = 0, 0.0
        deadline = time.monotonic() + TIMEOUT_S
        send = producer.send
        while copied < count and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                if not copied:
                    start = time.perf_counter()
                topic = prefix + tp.topic
                for r in records:
                    send(topic, value=r.value, key=r.key, partition=r.partition, timestamp_ms=r.timestamp)
                copied += len(records)
        producer.flush(TIMEOUT_S)
        return Result('kafka-python loop', count, time.perf_counter() - start)
    finally:
        producer.close()
        consumer.close()


def run_confluent(source: str, target: str, prefix: str, count: int, shape: Shape) -> Result:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    consumer = Consumer({'bootstrap.servers': source, 'group.id': f'bench-{uuid.uuid4().hex}',
                         'auto.offset.reset': 'earliest'})
    producer = Producer({'bootstrap.servers': target})
    try:
        consumer.assign([TopicPartition(name, p, OFFSET_BEGINNING) for name in shape.names
                         for p in range(shape.partitions)])
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
                        produce(prefix + m.topic(), m.value(), m.key(), partition=m.partition(),
                                timestamp=m.timestamp()[1])
                        break
                    except BufferError:
                        poll(0.05)
            copied += len(messages)
            poll(0)
        if producer.flush(TIMEOUT_S):
            raise BenchmarkError('confluent-kafka loop: records left undelivered')
        return Result('confluent-kafka loop', count, time.perf_counter() - start)
    finally:
        consumer.close()


REPLICATORS: dict[str, tuple[str, Callable[[str, str, str, int, Shape], Result]]] = {
    'kafka_kip': ('kafka_kip mirror', run_kafka_kip),
    'kafka-python': ('kafka-python loop', run_kafka_python),
    'confluent-kafka': ('confluent-kafka loop', run_confluent),
}


def run(replicators: Sequence[str], count: int, record_size: int, shape: Shape, rounds: int = 1,
        progress: Callable[[str], None] = lambda _msg: None) -> list[Result]:
    """Every replicator ``rounds`` times, interleaved; one result per replicator (medians)."""
    source = ReferenceBrokerProcess()
    target = ReferenceBrokerProcess()
    try:
        progress(f'{shape}: source {source.bootstrap_servers}, target {target.bootstrap_servers}')
        for name in shape.names:
            create_topic(source.bootstrap_servers, name, shape.partitions)
        load_source(source.bootstrap_servers, shape, count, os.urandom(record_size))
        progress(f'loaded {count:,} records of {record_size} bytes into {shape.total_partitions:,} partition(s)')
        runs: dict[str, list[Result]] = {key: [] for key in replicators}
        for round_ in range(rounds):
            for key in replicators:
                name, replicate = REPLICATORS[key]
                prefix = f'{key.replace("-", "_")}{round_}.'
                if key != 'kafka_kip':
                    for topic in shape.names:
                        create_topic(target.bootstrap_servers, prefix + topic, shape.partitions)
                result = replicate(source.bootstrap_servers, target.bootstrap_servers, prefix, count, shape)
                delivered = target_count(target.bootstrap_servers, prefix, shape)
                if delivered != count:
                    raise BenchmarkError(f'{name}: the target has {delivered} records, expected {count}')
                runs[key].append(result)
                progress(f'{shape} round {round_ + 1}: {name}: {result.records_per_s:,.0f} records/s')
        return [median_result(results) for results in runs.values()]
    finally:
        source.close()
        target.close()


def median_result(results: list[Result]) -> Result:
    """The run of median throughput (its other figures come with it)."""
    ordered = sorted(results, key=lambda r: r.seconds)
    return ordered[len(ordered) // 2]


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


def requests_cell(result: Result, api: str) -> str:
    return ' / '.join(str(result.requests.get(f'{side} {api}', 0)) for side in ('source', 'target'))


def format_sweep(rows: Sequence[tuple[Shape, list[Result]]]) -> str:
    """The scale table: one row per shape, the mirror against the kafka-python loop, its requests and start-up."""
    first = next((r for r in rows[0][1] if r.replicator == 'kafka_kip mirror'), None)
    shown = [api.removesuffix('Request') for api in SHOWN_REQUESTS]
    lines = ['| shape | kafka_kip mirror | vs first row | kafka-python loop | mirror / loop | last partition copying / '
             'first write acked (s from start) | mirror requests, source / target: ' + ', '.join(shown) + ' |',
             '|---|---|---|---|---|---|---|']
    for shape, results in rows:
        by_name = {r.replicator: r for r in results}
        mirror, loop = by_name.get('kafka_kip mirror'), by_name.get('kafka-python loop')
        if mirror is None:
            continue
        lines.append(
            f'| {shape} | {mirror.records_per_s / 1000:,.0f}k | '
            f'{mirror.records_per_s / first.records_per_s:.2f}x | '
            f'{f"{loop.records_per_s / 1000:,.1f}k" if loop else "-"} | '
            f'{f"{mirror.records_per_s / loop.records_per_s:.1f}x" if loop else "-"} | '
            f'{mirror.all_copying_s:.2f} / {mirror.all_written_s:.2f} | '
            + ', '.join(requests_cell(mirror, api) for api in SHOWN_REQUESTS) + ' |')
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_mirror', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--records', type=int, default=None,
                        help='records to copy (default 1,000,000; 200,000 with --sweep)')
    parser.add_argument('--record-size', type=int, default=100, help='value bytes per record (default 100)')
    parser.add_argument('--partitions', type=int, default=1, help='partitions per topic (default 1)')
    parser.add_argument('--topics', type=int, default=1, help='source topics (default 1)')
    parser.add_argument('--sweep', action='store_true',
                        help='the scale table: ' + ', '.join(str(Shape(*s)) for s in SWEEP)
                             + ' (mirror and kafka-python loop unless --replicators says otherwise)')
    parser.add_argument('--rounds', type=int, default=1, help='interleaved rounds per shape, medians (default 1)')
    parser.add_argument('--replicators', default=None,
                        help=f'comma-separated subset of {",".join(REPLICATORS)} (default: all; --sweep: '
                             'kafka_kip,kafka-python)')
    parser.add_argument('--json', action='store_true', help='print the results as JSON')
    args = parser.parse_args(argv)
    chosen = (args.replicators or ('kafka_kip,kafka-python' if args.sweep else ','.join(REPLICATORS))).split(',')
    unknown = set(chosen) - set(REPLICATORS)
    if unknown:
        parser.error(f'--replicators: unknown {", ".join(sorted(unknown))}')
    records = args.records or (200_000 if args.sweep else 1_000_000)
    shapes = [Shape(*s) for s in SWEEP] if args.sweep else [Shape(args.topics, args.partitions)]
    say = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    rows = [(shape, run(chosen, records, args.record_size, shape, args.rounds, progress=say)) for shape in shapes]
    if args.json:
        print(json.dumps([{'shape': str(shape), 'results': [{**asdict(r), 'records_per_s': r.records_per_s}
                                                             for r in results]} for shape, results in rows], indent=2))
    elif args.sweep:
        print(format_sweep(rows))
    else:
        print(format_table(rows[0][1]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
