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

import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import harness
from benchmarks.brokers import ReferenceBrokerProcess, fill_in_child
from benchmarks.harness import Column, Table

TOPIC = 'bench-consume'
CLIENTS = ('kafka-python', 'kafka_kip')
#: mode -> (consumer configuration, iterate instead of poll)
MODES: dict[str, tuple[dict[str, Any], bool]] = {
    'poll, defaults': ({}, False),
    'poll, 50k records/poll': ({'max_poll_records': 50_000, 'max_partition_fetch_bytes': 8 * 1024 * 1024}, False),
    'iterator, defaults': ({}, True),
}
GOAL = harness.Goal('kafka_kip / kafka-python', 2.0, note='issue 18: with its compiled record codec')
_DEFAULT_MAX_POLL_RECORDS = 500  # kafka-python's and kafka_kip's default max_poll_records


def untimed_records(mode: str) -> int:
    """The most records the first poll of ``mode`` returns (the iterator: one record); they are not timed."""
    configs, iterate = MODES[mode]
    return 1 if iterate else configs.get('max_poll_records', _DEFAULT_MAX_POLL_RECORDS)


#: The fewest records that leave every mode at least one record to time after its first poll.
MIN_RECORDS = 1 + max(untimed_records(mode) for mode in MODES)


def consume_phase(client: str, mode: str, bootstrap: str, count: int) -> dict[str, Any]:
    """Consume the ``count`` records once (in this process): timed records, wall and CPU seconds."""
    if client == 'kafka-python':
        from kafka import KafkaConsumer, TopicPartition
    else:
        from kafka_kip import KafkaConsumer, TopicPartition
        harness.require_compiled_codec()
    configs, iterate = MODES[mode]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset='earliest',
                             consumer_timeout_ms=harness.PHASE_TIMEOUT_S * 1000, **configs)
    window = harness.Window()
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        seen = first_batch = 0
        last = -1
        if iterate:
            for record in consumer:
                if not seen:
                    window.start()
                    first_batch = 1
                seen += 1
                last = record.offset
                if seen == count:
                    break
        else:
            deadline = time.monotonic() + harness.PHASE_TIMEOUT_S
            while seen < count and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    if not seen:
                        window.start()
                        first_batch = len(records)
                    seen += len(records)
                    last = records[-1].offset
        window.stop()
    finally:
        consumer.close()
    if (seen, last) != (count, count - 1):
        raise harness.BenchmarkError(f'{client} ({mode}) consumed {seen} records up to offset {last}, '
                                     f'expected {count}')
    if seen == first_batch or window.wall <= 0 or window.cpu <= 0:
        raise harness.BenchmarkError(f'{client} ({mode}): the first poll returned all {count} records, none was '
                                     f'left to time; --records must be at least {MIN_RECORDS}')
    return window.result(records=seen - first_batch)


def run(records: int, rounds: int, record_size: int) -> harness.Samples:
    """Rates per (mode, client), one per round; the clients alternate which goes first."""
    broker = ReferenceBrokerProcess(brokers=1)
    try:
        fill_in_child(broker.bootstrap_servers, TOPIC, records - 1, record_size)  # + 1 warm-up record
        harness.progress(f'produced {records} records of {record_size} bytes')
        samples = harness.Samples()
        for round_number in range(rounds):
            for mode in MODES:
                for client in harness.alternated(CLIENTS, round_number):
                    result = harness.run_phase('benchmarks.bench_consume:consume_phase', client, mode,
                                               broker.bootstrap_servers, records, label=f'{client} ({mode})',
                                               kafka_kip=client == 'kafka_kip')
                    rate = harness.Rate.of(result['records'], result)
                    samples.add((mode, client), rate)
                    harness.progress(f'round {round_number + 1} {mode:<24} {client:<13} {rate.per_s:>10,.0f} '
                                     f'records/s {rate.per_cpu_s:>10,.0f} records/CPU-s')
        return samples
    finally:
        broker.close()


def table(samples: harness.Samples) -> Table:
    """Medians per client and the median of the per-round ratios, wall clock then per CPU-second."""
    columns = [Column('mode', left=True)]
    for measure in ('records/s', 'records/CPU-s'):
        columns += [Column(f'kafka-python {measure}', ',.0f'), Column(f'kafka_kip {measure}', ',.0f'),
                    Column('ratio', '.3f')]
    made = Table(columns, notes=[f'medians over the rounds; ratio = median of the per-round kafka_kip / '
                                 f'kafka-python; {GOAL}'])
    for mode in MODES:
        cells: list[Any] = []
        for wall in (True, False):
            cells += [samples.median((mode, 'kafka-python'), wall), samples.median((mode, 'kafka_kip'), wall),
                      samples.ratio((mode, 'kafka_kip'), (mode, 'kafka-python'), wall)]
        made.add(mode, *cells)
    return made


def main(argv: Sequence[str] | None = None) -> int:
    args_parser = harness.parser('bench_consume', __doc__)
    harness.workload_arguments(args_parser, records=200_000, rounds=3, records_are='records in the topic')
    args = args_parser.parse_args(argv)
    if args.records < MIN_RECORDS:
        widest = max(MODES, key=untimed_records)
        args_parser.error(f'--records {args.records}: too few to time; at least {MIN_RECORDS} (the first poll is '
                          f'not timed, and in mode {widest!r} it returns up to {untimed_records(widest)} records)')
    if args.rounds < 1:
        args_parser.error(f'--rounds {args.rounds}: at least 1')
    print(harness.render([table(run(args.records, args.rounds, args.record_size))], as_json=args.json))
    return 0


if __name__ == '__main__':
    sys.exit(main())
