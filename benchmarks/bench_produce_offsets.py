"""Produce throughput with offsets (KIP-391) against plain produce of the same records, in one run.

The reference cluster runs in its own process (``python -m kafka_kip broker --brokers 1``). Three phases
produce the same N records of ``--record-size`` bytes to partition 0 of a fresh topic each:

- ``kafka-python plain``: unmodified kafka-python ``KafkaProducer.send(topic, value, partition=0)``, the baseline;
- ``kafka_kip plain``: kafka_kip's ``KafkaProducer``, the same call (the plain path must not get slower);
- ``kafka_kip offsets``: kafka_kip's ``KafkaProducer.send(topic, value, partition=0, offset=i)``, offsets 1..N.

Every producer has ``linger_ms=5, batch_size=128 KiB`` and the acks setting under test (``all`` = kafka-python's
default idempotent producer, ``1`` = acks=1 without idempotence). One warm-up record (offset 0) is acknowledged
before the clock starts; the clock runs from the first ``send()`` until ``flush()`` returns. Each phase runs in a
fresh child process, so the kafka-python phase never imports kafka_kip; the child also reports the CPU time of
its process (all threads) over the same window, as records per CPU-second, which varies less on a shared
machine than wall-clock rates. The broker's CPU time per record over the phase is read from /proc (Linux): it
shows what the broker, not the client, spends on a record (the reference cluster walks the record framing of
every ``use_offset`` batch to check its offsets). Every record's future is checked after the clock stops (offsets
exactly 1..N); a phase with a failed or misplaced record aborts the run. Phases alternate order between rounds;
the table shows medians and the ratios offsets / kafka_kip plain (goal >= 0.90) and kafka_kip plain /
kafka-python plain (goal >= 2; kafka_kip runs with its compiled record codec, or the run aborts). Numbers are
printed, never asserted.

    python -m benchmarks.bench_produce_offsets [--records 100000] [--rounds 3] [--record-size 100]
                                               [--acks all,1] [--json]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.bench_cluster import (
    BenchmarkError,
    ReferenceBrokerProcess,
    create_topic,
    require_compiled_codec,
    require_kafka_kip_imported,
)

PHASES = ('kafka-python plain', 'kafka_kip plain', 'kafka_kip offsets')
ACKS = {'all': {}, '1': {'acks': 1, 'enable_idempotence': False}}
GOAL_OFFSETS = 0.90  # kafka_kip offsets / kafka_kip plain
GOAL_PLAIN = 2.0  # kafka_kip plain / kafka-python plain (issue 18: the compiled record codec)
PHASE_TIMEOUT_S = 300.0

#: One phase: (records per wall second, records per client CPU second, broker CPU microseconds per record)
Rate = tuple[float, float, float]
Rates = dict[str, dict[str, list[Rate]]]


def produce_phase(phase: str, acks: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, float]:
    """Produce ``count`` records (in this process); timed records, wall and CPU seconds."""
    if phase == 'kafka-python plain':
        from kafka import KafkaProducer
    else:
        from kafka_kip import KafkaProducer
        require_compiled_codec()
    with_offsets = phase == 'kafka_kip offsets'
    value = os.urandom(record_size)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=128 * 1024, **ACKS[acks])
    try:
        warm_up = {'offset': 0} if with_offsets else {}
        producer.send(topic, value, partition=0, **warm_up).get(timeout=30)
        send = producer.send
        start, start_cpu = time.perf_counter(), time.process_time()
        if with_offsets:
            futures = [send(topic, value, partition=0, offset=offset) for offset in range(1, count + 1)]
        else:
            futures = [send(topic, value, partition=0) for _ in range(count)]
        producer.flush(timeout=PHASE_TIMEOUT_S)
        elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    finally:
        producer.close()
    offsets = [future.value.offset if future.succeeded() else None for future in futures]
    if offsets != list(range(1, count + 1)):
        failed = [future.exception for future in futures if future.failed()]
        raise BenchmarkError(f'{phase} (acks={acks}): {len(failed)} records failed {failed[:1]}, or landed at '
                             f'unexpected offsets')
    require_kafka_kip_imported(phase != 'kafka-python plain', f'{phase} (acks={acks})')
    return {'records': count, 'seconds': elapsed, 'cpu_seconds': elapsed_cpu}


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used so far (Linux /proc); NaN where there is no /proc."""
    try:
        fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')  # utime, stime


def run_phase_in_child(phase: str, acks: str, bootstrap: str, broker_pid: int, count: int,
                       record_size: int) -> Rate:
    """One phase on a fresh topic, in a fresh interpreter."""
    topic = f'bench-offsets-{uuid.uuid4().hex[:8]}'
    create_topic(bootstrap, topic)
    command = [sys.executable, '-m', 'benchmarks.bench_produce_offsets', '--phase', phase, acks, bootstrap, topic,
               str(count), str(record_size)]
    broker_cpu = process_cpu_seconds(broker_pid)
    done = subprocess.run(command, capture_output=True, text=True, timeout=PHASE_TIMEOUT_S + 60, check=False)
    broker_cpu = process_cpu_seconds(broker_pid) - broker_cpu
    if done.returncode != 0:
        raise BenchmarkError(f'{phase} (acks={acks}) phase failed: {done.stderr[-4000:]}')
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return (result['records'] / result['seconds'], result['records'] / result['cpu_seconds'],
            broker_cpu / result['records'] * 1e6)


def run(records: int, rounds: int, record_size: int, acks_settings: Sequence[str],
        progress: Callable[[str], None]) -> Rates:
    """``{acks: {phase: [Rate per round]}}``."""
    broker = ReferenceBrokerProcess(brokers=1)
    broker_pid = broker._process.pid  # bench_cluster's broker wrapper does not expose its pid
    try:
        progress(f'reference cluster: {broker.bootstrap_servers}')
        rates: Rates = {acks: {phase: [] for phase in PHASES} for acks in acks_settings}
        for round_number in range(rounds):
            order = PHASES if round_number % 2 == 0 else PHASES[::-1]
            for acks in acks_settings:
                for phase in order:
                    rate = run_phase_in_child(phase, acks, broker.bootstrap_servers, broker_pid, records, record_size)
                    rates[acks][phase].append(rate)
                    progress(f'round {round_number + 1} acks={acks:<3} {phase:<18} {rate[0]:>10,.0f} records/s '
                             f'{rate[1]:>10,.0f} records/CPU-s {rate[2]:>6.1f} broker us/record')
        return rates
    finally:
        broker.close()


def format_table(rates: Rates, records: int, record_size: int) -> str:
    header = (f'{"acks":<5} {"phase":<18} {"records/s":>10} {"rec/CPU-s":>10} {"broker us/rec":>13}   '
              f'{"vs kafka-python plain (wall, CPU)":>33}   {"offsets / kafka_kip plain (wall, CPU)":>37}')
    lines = [header, '-' * len(header)]
    for acks, by_phase in rates.items():
        medians = {phase: tuple(statistics.median(rate[m] for rate in runs) for m in range(3))
                   for phase, runs in by_phase.items()}
        base, plain = medians['kafka-python plain'], medians['kafka_kip plain']
        for phase, (wall, cpu, broker_us) in medians.items():
            versus_stock = f'{wall / base[0]:.3f}, {cpu / base[1]:.3f}'
            versus_plain = f'{wall / plain[0]:.3f}, {cpu / plain[1]:.3f}' if phase == 'kafka_kip offsets' else ''
            lines.append(f'{acks:<5} {phase:<18} {wall:>10,.0f} {cpu:>10,.0f} {broker_us:>13.1f}   '
                         f'{versus_stock:>33}   {versus_plain:>37}')
    lines.append(f'{records:,} records of {record_size} bytes per phase; medians over the rounds. Goals: offsets / '
                 f'kafka_kip plain >= {GOAL_OFFSETS}, kafka_kip plain / kafka-python plain >= {GOAL_PLAIN}.')
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--records', type=int, default=100_000, help='records per phase (default %(default)s)')
    parser.add_argument('--rounds', type=int, default=3, help='rounds of every phase (default %(default)s)')
    parser.add_argument('--record-size', type=int, default=100, help='value bytes per record (default 100)')
    parser.add_argument('--acks', default=','.join(ACKS), help='comma-separated subset of all,1 (default: both)')
    parser.add_argument('--json', action='store_true',
                        help='print {acks: {phase: [[records/s, records/CPU-s, broker us/record], ...]}}')
    parser.add_argument('--phase', nargs=6, metavar=('PHASE', 'ACKS', 'BOOTSTRAP', 'TOPIC', 'RECORDS', 'SIZE'),
                        help=argparse.SUPPRESS)  # internal: one produce phase, in a child process
    args = parser.parse_args(argv)
    if args.phase:
        phase, acks, bootstrap, topic, count, size = args.phase
        print(json.dumps(produce_phase(phase, acks, bootstrap, topic, int(count), int(size))))
        return 0
    acks_settings = args.acks.split(',')
    unknown = set(acks_settings) - set(ACKS)
    if unknown:
        parser.error(f'--acks: unknown {", ".join(sorted(unknown))}')
    rates = run(args.records, args.rounds, args.record_size, acks_settings,
                progress=lambda message: print(message, file=sys.stderr, flush=True))
    print(json.dumps(rates, indent=2) if args.json else format_table(rates, args.records, args.record_size))
    return 0


if __name__ == '__main__':
    sys.exit(main())
