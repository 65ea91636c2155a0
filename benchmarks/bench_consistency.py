"""What KIP-1243's consistency token costs kafka_kip's producer and consumer: with it against without it.

Two reference brokers, each in its own process (``python -m kafka_kip broker --brokers 1``): one advertises
``kip.1243`` (every request of kafka_kip's clients carries the consistency context in its header, every response
header carries the broker's token, which the client reads and stores), the other does not
(``--features kip.232,kip.391``: nothing is sent or read). The same kafka_kip client code runs against both, each
phase in a fresh child process; the ratio is throughput with the token / without it, so 1.00 is free and 0.97 is
3 % slower.

Variants (``--variants``):

- ``default``: bench_clients' configuration (acks=1, linger 5 ms, 128 KiB batches; 1 MiB fetches, 50,000 records
  per poll), the client's own in-memory store;
- ``small-requests``: the token's worst case, many requests for few records: 16 KiB batches and no linger when
  producing (kafka-python's default batch size), 16 KiB fetches when consuming;
- ``file-store``: the default configuration with ``ConsistencyContextStore.file(path)``, which reads a file for
  every request.

Rounds interleave (with, without, without, with, ...); the table shows medians and the median of the per-round
ratios, for wall-clock and client CPU time.

    python -m benchmarks.bench_consistency [--records 100000] [--rounds 5] [--variants default,small-requests,...]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.bench_clients import (
    BATCH_BYTES,
    FETCH_BYTES,
    PHASE_TIMEOUT_S,
    POLL_RECORDS,
    Consumed,
    Window,
    _check_consumed,
    _check_produced,
    _create_topic,
    _fill,
    _record_fields,
)
from benchmarks.bench_cluster import BenchmarkError, ReferenceBrokerProcess, require_compiled_codec

PHASES = ('produce', 'consume')
VARIANTS = ('default', 'small-requests', 'file-store')
TOKEN_BROKERS = ('with token', 'without token')
WITHOUT_KIP_1243 = ('--features', 'kip.232,kip.391')
SMALL_BYTES = 16 * 1024


def _store(variant: str, store_dir: str) -> Any:
    from kafka_kip import ConsistencyContextStore
    if variant == 'file-store':
        return ConsistencyContextStore.file(os.path.join(store_dir, f'context-{uuid.uuid4().hex}'))
    return ConsistencyContextStore.empty()


def produce(variant: str, bootstrap: str, topic: str, count: int, value: bytes, store: Any, window: Window) -> int:
    import kafka_kip
    small = variant == 'small-requests'
    producer = kafka_kip.KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0 if small else 5,
                                       batch_size=SMALL_BYTES if small else BATCH_BYTES,
                                       consistency_context_store=store)
    try:
        producer.send(topic, value, partition=0).get(timeout=30)
        send = producer.send
        window.start()
        futures = [send(topic, value, partition=0) for _ in range(count)]
        producer.flush(timeout=PHASE_TIMEOUT_S)
        window.stop()
    finally:
        producer.close()
    _check_produced('kafka_kip', [f.value.offset if f.succeeded() else None for f in futures], count)
    return producer._sender._client._manager.consistency.store.read().offset


def consume(variant: str, bootstrap: str, topic: str, count: int, store: Any, window: Window) -> tuple[str, int]:
    import kafka_kip
    fetch_bytes = SMALL_BYTES if variant == 'small-requests' else FETCH_BYTES
    consumer = kafka_kip.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                       auto_offset_reset='earliest', max_partition_fetch_bytes=fetch_bytes,
                                       fetch_max_bytes=fetch_bytes, max_poll_records=POLL_RECORDS,
                                       consistency_context_store=store)
    consumed = Consumed(_record_fields)
    try:
        consumer.assign([kafka_kip.TopicPartition(topic, 0)])
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while not consumed.next_offset and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=1).values():
                consumed.add(records)
        window.start()
        while consumed.next_offset <= count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                consumed.add(records)
        window.stop()
    finally:
        consumer.close()
    return _check_consumed('kafka_kip', consumed, count), store.read().offset


def run_phase(variant: str, phase: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, Any]:
    """One phase in this process (a child); ``token`` is the store's offset at the end (-1: no token came)."""
    require_compiled_codec()
    window = Window()
    digest = None
    with tempfile.TemporaryDirectory() as store_dir:
        store = _store(variant, store_dir)
        if phase == 'produce':
            token = produce(variant, bootstrap, topic, count, b'x' * record_size, store, window)
        else:
            digest, token = consume(variant, bootstrap, topic, count, store, window)
    return {'seconds': window.wall, 'cpu_seconds': window.cpu, 'digest': digest, 'token': token}


def _in_child(variant: str, phase: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, Any]:
    command = [sys.executable, '-m', 'benchmarks.bench_consistency', '--phase', variant, phase, bootstrap, topic,
               str(count), str(record_size)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=PHASE_TIMEOUT_S + 60, check=False)
    if done.returncode != 0:
        raise BenchmarkError(f'{variant} {phase} failed: {done.stderr[-4000:]}')
    return json.loads(done.stdout.strip().splitlines()[-1])


Results = dict[str, dict[str, dict[str, list[tuple[float, float]]]]]  # variant -> phase -> broker -> [(wall, cpu)]


def run(variants: Sequence[str], phases: Sequence[str], count: int, rounds: int, record_size: int,
        progress: Callable[[str], None]) -> tuple[Results, list[float]]:
    brokers: dict[str, ReferenceBrokerProcess] = {}
    loads: list[float] = []
    try:
        brokers['with token'] = ReferenceBrokerProcess(brokers=1)
        brokers['without token'] = ReferenceBrokerProcess(brokers=1, extra_args=WITHOUT_KIP_1243)
        consume_topics = {}
        if 'consume' in phases:
            for name, broker in brokers.items():
                consume_topics[name] = f'bench-consistency-{uuid.uuid4().hex[:8]}'
                _create_topic(broker.bootstrap_servers, consume_topics[name])
                _fill(broker.bootstrap_servers, consume_topics[name], count, record_size)
        results: Results = {v: {p: {b: [] for b in TOKEN_BROKERS} for p in phases} for v in variants}
        for round_number in range(rounds):
            order = TOKEN_BROKERS if round_number % 2 == 0 else TOKEN_BROKERS[::-1]
            for variant in variants:
                for phase in phases:
                    for name in order:
                        bootstrap = brokers[name].bootstrap_servers
                        if phase == 'produce':
                            topic = f'bench-consistency-{uuid.uuid4().hex[:8]}'
                            _create_topic(bootstrap, topic)
                        else:
                            topic = consume_topics[name]
                        result = _in_child(variant, phase, bootstrap, topic, count, record_size)
                        if (result['token'] >= 0) != (name == 'with token'):
                            raise BenchmarkError(f'{variant} {phase} {name}: the store ended at token '
                                                 f'{result["token"]}')
                        loads.append(os.getloadavg()[0])
                        rate = (count / result['seconds'], count / result['cpu_seconds'])
                        results[variant][phase][name].append(rate)
                        progress(f'round {round_number + 1} {variant:<14} {phase:<7} {name:<13} {rate[0]:>10,.0f} '
                                 f'records/s {rate[1]:>10,.0f} records/CPU-s  load {loads[-1]:.1f}')
        return results, loads
    finally:
        for broker in brokers.values():
            broker.close()


def format_table(results: Results, loads: list[float], count: int, record_size: int, rounds: int) -> str:
    header = f'{"variant":<14} {"phase":<7} {"with token":>11} {"without":>11} {"ratio wall":>10} {"ratio CPU":>10}'
    lines = [header, '-' * len(header)]
    for variant, by_phase in results.items():
        for phase, by_broker in by_phase.items():
            with_token, without = by_broker['with token'], by_broker['without token']
            ratios = [statistics.median(w[m] / o[m] for w, o in zip(with_token, without, strict=True)) for m in (0, 1)]
            lines.append(f'{variant:<14} {phase:<7} {statistics.median(r[0] for r in with_token):>11,.0f} '
                         f'{statistics.median(r[0] for r in without):>11,.0f} {ratios[0]:>9.3f}x {ratios[1]:>9.3f}x')
    lines.append(f'records/s, medians of {rounds} interleaved rounds, {count:,} records of {record_size} bytes; ratio = '
                 f'median per-round (with token / without); load average {min(loads):.1f}-{max(loads):.1f} on '
                 f'{os.cpu_count()} CPUs. Goal: >= 0.97x (at most 3 % cost).')
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_consistency',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--records', type=int, default=100_000, help='records per phase (default %(default)s)')
    parser.add_argument('--rounds', type=int, default=5, help='interleaved rounds (default %(default)s)')
    parser.add_argument('--record-size', type=int, default=100, help='value bytes per record (default 100)')
    parser.add_argument('--variants', default=','.join(VARIANTS), help='comma-separated subset of ' + ','.join(VARIANTS))
    parser.add_argument('--phases', default=','.join(PHASES), help='comma-separated subset of ' + ','.join(PHASES))
    parser.add_argument('--phase', nargs=6, metavar=('VARIANT', 'PHASE', 'BOOTSTRAP', 'TOPIC', 'RECORDS', 'SIZE'),
                        help=argparse.SUPPRESS)  # internal: one phase, in a child process
    args = parser.parse_args(argv)
    if args.phase:
        variant, phase, bootstrap, topic, count, size = args.phase
        print(json.dumps(run_phase(variant, phase, bootstrap, topic, int(count), int(size))))
        return 0
    variants, phases = args.variants.split(','), args.phases.split(',')
    for option, chosen, known in (('--variants', variants, VARIANTS), ('--phases', phases, PHASES)):
        unknown = set(chosen) - set(known)
        if unknown:
            parser.error(f'{option}: unknown {", ".join(sorted(unknown))}')
    results, loads = run(variants, phases, args.records, args.rounds, args.record_size,
                         progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(format_table(results, loads, args.records, args.record_size, args.rounds))
    return 0


if __name__ == '__main__':
    sys.exit(main())
