"""Consume throughput: kafka_kip's KafkaConsumer against unmodified kafka-python, in one run.

The reference cluster runs in its own process (``python -m kafka_kip broker --brokers 1``). One topic of
N 100-byte records is produced once; then every (mode, client) pair consumes all of it, ``--rounds``
times, alternating which client goes first. Each consume phase runs in a fresh child process, so the
kafka-python phase never imports kafka_kip (whose patched response classes and feature discovery would
otherwise apply to it too). The clock runs from the first poll that returns records until the last record
arrives; the rate counts the records after that first batch (so ``--records`` must exceed the largest first
batch, :data:`MIN_RECORDS`). Besides wall-clock records/s the child
reports the CPU time its process spent in that window (all threads), as records per CPU-second: on a
shared machine wall-clock rates swing with the load, CPU cost per record much less. kafka_kip runs with its
compiled record codec (a phase without it aborts the run). The table shows the medians per client and the
median of the per-round ratios kafka_kip / kafka-python (goal >= 2); numbers are never asserted.

    python -m benchmarks.bench_consume [--records 200000] [--rounds 3] [--record-size 100] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.bench_cluster import (
    BenchmarkError,
    ReferenceBrokerProcess,
    create_topic,
    kafka_python_produce,
    require_compiled_codec,
    require_kafka_kip_imported,
)

TOPIC = 'bench-consume'
CLIENTS = ('kafka-python', 'kafka_kip')
#: mode -> (consumer configuration, iterate instead of poll)
MODES: dict[str, tuple[dict[str, Any], bool]] = {
    'poll, defaults': ({}, False),
    'poll, 50k records/poll': ({'max_poll_records': 50_000, 'max_partition_fetch_bytes': 8 * 1024 * 1024}, False),
    'iterator, defaults': ({}, True),
}
GOAL = 2.0  # issue 18: kafka_kip with its compiled record codec at least 2x kafka-python
PHASE_TIMEOUT_S = 300.0
_DEFAULT_MAX_POLL_RECORDS = 500  # kafka-python's and kafka_kip's default max_poll_records


def untimed_records(mode: str) -> int:
    """The most records the first poll of ``mode`` returns (the iterator: one record); they are not timed."""
    configs, iterate = MODES[mode]
    return 1 if iterate else configs.get('max_poll_records', _DEFAULT_MAX_POLL_RECORDS)


#: The fewest records that leave every mode at least one record to time after its first poll.
MIN_RECORDS = 1 + max(untimed_records(mode) for mode in MODES)


def consume_phase(client: str, mode: str, bootstrap: str, count: int) -> dict[str, float]:
    """Consume the ``count`` records once (in this process): timed records, wall and CPU seconds."""
    if client == 'kafka-python':
        from kafka import KafkaConsumer, TopicPartition
    else:
        from kafka_kip import KafkaConsumer, TopicPartition
        require_compiled_codec()
    configs, iterate = MODES[mode]
    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset='earliest',
                             consumer_timeout_ms=PHASE_TIMEOUT_S * 1000, **configs)
    try:
        consumer.assign([tp])
        seen = first_batch = 0
        last, start, start_cpu = -1, 0.0, 0.0
        if iterate:
            for record in consumer:
                if not seen:
                    start, start_cpu, first_batch = time.perf_counter(), time.process_time(), 1
                seen += 1
                last = record.offset
                if seen == count:
                    break
        else:
            deadline = time.monotonic() + PHASE_TIMEOUT_S
            while seen < count and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    if not seen:
                        start, start_cpu, first_batch = time.perf_counter(), time.process_time(), len(records)
                    seen += len(records)
                    last = records[-1].offset
        elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    finally:
        consumer.close()
    if (seen, last) != (count, count - 1):
        raise BenchmarkError(f'{client} ({mode}) consumed {seen} records up to offset {last}, expected {count}')
    if seen == first_batch or elapsed <= 0 or elapsed_cpu <= 0:
        raise BenchmarkError(f'{client} ({mode}): the first poll returned all {count} records, none was left to '
                             f'time; --records must be at least {MIN_RECORDS}')
    require_kafka_kip_imported(client == 'kafka_kip', f'{client} ({mode})')
    return {'records': seen - first_batch, 'seconds': elapsed, 'cpu_seconds': elapsed_cpu}


def run_phase_in_child(client: str, mode: str, bootstrap: str, count: int) -> tuple[float, float]:
    """(records per wall second, records per CPU second) of one consume phase, in a fresh interpreter."""
    command = [sys.executable, '-m', 'benchmarks.bench_consume', '--phase', client, mode, bootstrap, str(count)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=PHASE_TIMEOUT_S + 60, check=False)
    if done.returncode != 0:
        raise BenchmarkError(f'{client} ({mode}) phase failed: {done.stderr[-4000:]}')
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result['records'] / result['seconds'], result['records'] / result['cpu_seconds']


Rates = dict[str, dict[str, list[tuple[float, float]]]]


def run(records: int, rounds: int, record_size: int, progress: Any) -> Rates:
    """``{mode: {client: [(records per wall second, records per CPU second) per round]}}``."""
    broker = ReferenceBrokerProcess(brokers=1)
    try:
        create_topic(broker.bootstrap_servers, TOPIC)
        kafka_python_produce(broker.bootstrap_servers, TOPIC, records - 1, b'x' * record_size)  # + 1 warm-up
        progress(f'produced {records} records of {record_size} bytes')
        rates: Rates = {mode: {client: [] for client in CLIENTS} for mode in MODES}
        for round_number in range(rounds):
            order = CLIENTS if round_number % 2 == 0 else CLIENTS[::-1]
            for mode in MODES:
                for client in order:
                    wall, cpu = run_phase_in_child(client, mode, broker.bootstrap_servers, records)
                    rates[mode][client].append((wall, cpu))
                    progress(f'round {round_number + 1} {mode:<24} {client:<13} {wall:>10,.0f} records/s '
                             f'{cpu:>10,.0f} records/CPU-s')
        return rates
    finally:
        broker.close()


def format_table(rates: Rates) -> str:
    header = (f'{"mode":<24} {"kafka-python":>13} {"kafka_kip":>13} {"ratio":>6}   '
              f'{"kafka-python":>13} {"kafka_kip":>13} {"ratio":>6}')
    lines = [f'{"":<24} {"records/s (wall clock)":^34}   {"records per CPU-second":^34}', header, '-' * len(header)]
    for mode, by_client in rates.items():
        cells = []
        for measure in (0, 1):
            stock, kip = ([rate[measure] for rate in by_client[client]] for client in CLIENTS)
            # The two clients of a round ran back to back: the median of the per-round ratios cancels
            # most of the drift of a shared machine.
            ratio = statistics.median(k / s for s, k in zip(stock, kip, strict=True))
            cells.append(f'{statistics.median(stock):>13,.0f} {statistics.median(kip):>13,.0f} {ratio:>6.3f}')
        lines.append(f'{mode:<24} ' + '   '.join(cells))
    lines.append(f'medians over the rounds; ratio = median of the per-round kafka_kip / kafka-python (goal >= {GOAL})')
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--records', type=int, default=200_000)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--record-size', type=int, default=100)
    parser.add_argument('--json', action='store_true',
                        help='print {mode: {client: [[records/s, records/CPU-s], ...]}}')
    parser.add_argument('--phase', nargs=4, metavar=('CLIENT', 'MODE', 'BOOTSTRAP', 'RECORDS'),
                        help=argparse.SUPPRESS)   # internal: one consume phase, in a child process
    args = parser.parse_args(argv)
    if args.phase:
        client, mode, bootstrap, count = args.phase
        print(json.dumps(consume_phase(client, mode, bootstrap, int(count))))
        return 0
    if args.records < MIN_RECORDS:
        widest = max(MODES, key=untimed_records)
        parser.error(f'--records {args.records}: too few to time; at least {MIN_RECORDS} (the first poll is not '
                     f'timed, and in mode {widest!r} it returns up to {untimed_records(widest)} records)')
    if args.rounds < 1:
        parser.error(f'--rounds {args.rounds}: at least 1')
    rates = run(args.records, args.rounds, args.record_size, lambda line: print(line, file=sys.stderr))
    print(json.dumps(rates) if args.json else format_table(rates))
    return 0


if __name__ == '__main__':
    sys.exit(main())
