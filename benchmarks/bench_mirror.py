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
acknowledged. Each replicator runs in a child interpreter (the loops' in one that never imported kafka_kip).
``--rounds`` > 1 interleaves the replicators (rotated) and reports medians and medians of per-round ratios.
Results, never asserts.

    python -m benchmarks.bench_mirror --sweep [--records 200000] [--rounds 1] [--json]
    python -m benchmarks.bench_mirror [--records 1000000] [--record-size 100] [--partitions 1] [--topics 1]
"""
from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.brokers import ReferenceBrokerProcess, create_topic
from benchmarks.harness import (
    BenchmarkError,
    Column,
    Goal,
    Rate,
    Samples,
    Table,
    parser,
    progress,
    render,
    rotated,
    run_phase,
    subset,
)

TIMEOUT_S = 900.0
GOAL = Goal('kafka_kip mirror / the confluent-kafka loop', 1.0)
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


#: key -> (name in the table, the function run in a child, whether that child imports kafka_kip)
REPLICATORS: dict[str, tuple[str, Callable[[str, str, str, int, Shape], Result], bool]] = {
    'kafka_kip': ('kafka_kip mirror', run_kafka_kip, True),
    'kafka-python': ('kafka-python loop', run_kafka_python, False),
    'confluent-kafka': ('confluent-kafka loop', run_confluent, False),
}


def replicate(key: str, source: str, target: str, prefix: str, count: int, shape: list[int]) -> dict[str, Any]:
    """One replicator's run (in a child)."""
    return asdict(REPLICATORS[key][1](source, target, prefix, count, Shape(*shape)))


def run(replicators: Sequence[str], count: int, record_size: int, shape: Shape, rounds: int = 1) \
        -> tuple[list[Result], Samples]:
    """Every replicator ``rounds`` times, interleaved; one result per replicator (the run of median throughput),
    and every round's rate."""
    source = ReferenceBrokerProcess()
    target = ReferenceBrokerProcess()
    try:
        progress(f'{shape}: source {source.bootstrap_servers}, target {target.bootstrap_servers}')
        for name in shape.names:
            create_topic(source.bootstrap_servers, name, shape.partitions)
        load_source(source.bootstrap_servers, shape, count, os.urandom(record_size))
        progress(f'loaded {count:,} records of {record_size} bytes into {shape.total_partitions:,} partition(s)')
        runs: dict[str, list[Result]] = {key: [] for key in replicators}
        samples = Samples()
        for round_ in range(rounds):
            for key in rotated(replicators, round_):
                name, _, kafka_kip = REPLICATORS[key]
                prefix = f'{key.replace("-", "_")}{round_}.'
                if key != 'kafka_kip':
                    for topic in shape.names:
                        create_topic(target.bootstrap_servers, prefix + topic, shape.partitions)
                result = Result(**run_phase('benchmarks.bench_mirror:replicate', key, source.bootstrap_servers,
                                            target.bootstrap_servers, prefix, count,
                                            [shape.topics, shape.partitions], label=name, kafka_kip=kafka_kip,
                                            timeout=TIMEOUT_S + 60))
                delivered = target_count(target.bootstrap_servers, prefix, shape)
                if delivered != count:
                    raise BenchmarkError(f'{name}: the target has {delivered} records, expected {count}')
                runs[key].append(result)
                samples.add(name, Rate.of(count, {'seconds': result.seconds}))
                progress(f'{shape} round {round_ + 1}: {name}: {result.records_per_s:,.0f} records/s')
        return [median_result(results) for results in runs.values()], samples
    finally:
        source.close()
        target.close()


def median_result(results: list[Result]) -> Result:
    """The run of median throughput (its other figures come with it)."""
    ordered = sorted(results, key=lambda r: r.seconds)
    return ordered[len(ordered) // 2]


def table(results: Sequence[Result], samples: Samples) -> Table:
    """Medians per replicator and the medians of per-round ratios to each loop."""
    made = Table([Column('replicator', left=True), Column('records', ','), Column('seconds', '.2f'),
                  Column('records/s', ',.0f'), Column('vs kafka-python', '.2f', 'x'),
                  Column('vs confluent-kafka', '.2f', 'x')])
    for r in results:
        made.add(r.replicator, r.records, r.seconds, r.records_per_s, samples.ratio(r.replicator, 'kafka-python loop'),
                 samples.ratio(r.replicator, 'confluent-kafka loop'))
    made.notes.append(f'({GOAL})')
    return made


def requests_cell(result: Result, api: str) -> str:
    return ' / '.join(str(result.requests.get(f'{side} {api}', 0)) for side in ('source', 'target'))


def sweep_table(rows: Sequence[tuple[Shape, list[Result]]]) -> Table:
    """The scale table: one row per shape, the mirror against the kafka-python loop, its requests and start-up."""
    first = next((r for r in rows[0][1] if r.replicator == 'kafka_kip mirror'), None)
    shown = [api.removesuffix('Request') for api in SHOWN_REQUESTS]
    made = Table([Column('shape', left=True), Column('kafka_kip mirror'), Column('vs first row', '.2f', 'x'),
                  Column('kafka-python loop'), Column('mirror / loop', '.1f', 'x'),
                  Column('last partition copying / first write acked (s from start)'),
                  Column('mirror requests, source / target: ' + ', '.join(shown))])
    for shape, results in rows:
        by_name = {r.replicator: r for r in results}
        mirror, loop = by_name.get('kafka_kip mirror'), by_name.get('kafka-python loop')
        if mirror is None or first is None:
            continue
        made.add(str(shape), f'{mirror.records_per_s / 1000:,.0f}k', mirror.records_per_s / first.records_per_s,
                 f'{loop.records_per_s / 1000:,.1f}k' if loop else None,
                 mirror.records_per_s / loop.records_per_s if loop else None,
                 f'{mirror.all_copying_s:.2f} / {mirror.all_written_s:.2f}',
                 ', '.join(requests_cell(mirror, api) for api in SHOWN_REQUESTS))
    return made


def main(argv: Sequence[str] | None = None) -> int:
    args_parser = parser('bench_mirror', __doc__)
    args_parser.add_argument('--records', type=int, default=None,
                             help='records to copy (default 1,000,000; 200,000 with --sweep)')
    args_parser.add_argument('--record-size', type=int, default=100, help='value bytes per record (default 100)')
    args_parser.add_argument('--partitions', type=int, default=1, help='partitions per topic (default 1)')
    args_parser.add_argument('--topics', type=int, default=1, help='source topics (default 1)')
    args_parser.add_argument('--sweep', action='store_true',
                             help='the scale table: ' + ', '.join(str(Shape(*s)) for s in SWEEP)
                                  + ' (mirror and kafka-python loop unless --replicators says otherwise)')
    args_parser.add_argument('--rounds', type=int, default=1, help='interleaved rounds per shape, medians (default 1)')
    args_parser.add_argument('--replicators', default=None,
                             help=f'comma-separated subset of {",".join(REPLICATORS)} (default: all; --sweep: '
                                  'kafka_kip,kafka-python)')
    args = args_parser.parse_args(argv)
    chosen = subset(args_parser, '--replicators',
                    args.replicators or ('kafka_kip,kafka-python' if args.sweep else ','.join(REPLICATORS)),
                    tuple(REPLICATORS))
    records = args.records or (200_000 if args.sweep else 1_000_000)
    shapes = [Shape(*s) for s in SWEEP] if args.sweep else [Shape(args.topics, args.partitions)]
    rows = [(shape, *run(chosen, records, args.record_size, shape, args.rounds)) for shape in shapes]
    if args.sweep:
        print(render([sweep_table([(shape, results) for shape, results, _ in rows])], as_json=args.json,
                     markdown=True))
    else:
        print(render([table(*rows[0][1:])], as_json=args.json))
    return 0


if __name__ == '__main__':
    sys.exit(main())
