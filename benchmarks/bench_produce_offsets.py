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

import os
import statistics
import sys
from collections.abc import Sequence
from typing import Any

from benchmarks import harness
from benchmarks.brokers import ReferenceBrokerProcess, create_topic_in_child
from benchmarks.harness import Column, Table

PHASES = ('kafka-python plain', 'kafka_kip plain', 'kafka_kip offsets')
ACKS = {'all': {}, '1': {'acks': 1, 'enable_idempotence': False}}
GOAL_OFFSETS = harness.Goal('kafka_kip offsets / kafka_kip plain', 0.90)
GOAL_PLAIN = harness.Goal('kafka_kip plain / kafka-python plain', 2.0, note='issue 18: the compiled record codec')


def produce_phase(phase: str, acks: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, Any]:
    """Produce ``count`` records (in this process); timed records, wall and CPU seconds."""
    if phase == 'kafka-python plain':
        from kafka import KafkaProducer
    else:
        from kafka_kip import KafkaProducer
        harness.require_compiled_codec()
    with_offsets = phase == 'kafka_kip offsets'
    value = os.urandom(record_size)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=128 * 1024, **ACKS[acks])
    window = harness.Window()
    try:
        warm_up = {'offset': 0} if with_offsets else {}
        producer.send(topic, value, partition=0, **warm_up).get(timeout=30)
        send = producer.send
        window.start()
        if with_offsets:
            futures = [send(topic, value, partition=0, offset=offset) for offset in range(1, count + 1)]
        else:
            futures = [send(topic, value, partition=0) for _ in range(count)]
        producer.flush(timeout=harness.PHASE_TIMEOUT_S)
        window.stop()
    finally:
        producer.close()
    offsets = [future.value.offset if future.succeeded() else None for future in futures]
    if offsets != list(range(1, count + 1)):
        failed = [future.exception for future in futures if future.failed()]
        raise harness.BenchmarkError(f'{phase} (acks={acks}): {len(failed)} records failed {failed[:1]}, or '
                                     f'landed at unexpected offsets')
    return window.result(records=count)


#: Broker CPU microseconds per record of each (acks, phase), one per round (beside the client's rates in Samples).
BrokerCost = dict[tuple[str, str], list[float]]


def run(records: int, rounds: int, record_size: int,
        acks_settings: Sequence[str]) -> tuple[harness.Samples, BrokerCost]:
    """Every phase on a fresh topic, in a fresh interpreter; phases alternate order between rounds."""
    broker = ReferenceBrokerProcess(brokers=1)
    try:
        harness.progress(f'reference cluster: {broker.bootstrap_servers}')
        samples, broker_us = harness.Samples(), {}
        for round_number in range(rounds):
            for acks in acks_settings:
                for phase in harness.alternated(PHASES, round_number):
                    topic = harness.fresh_topic('bench-offsets')
                    create_topic_in_child(broker.bootstrap_servers, topic)
                    broker_cpu = harness.process_cpu_seconds(broker.pid)
                    result = harness.run_phase('benchmarks.bench_produce_offsets:produce_phase', phase, acks,
                                               broker.bootstrap_servers, topic, records, record_size,
                                               label=f'{phase} (acks={acks})', kafka_kip=phase != 'kafka-python plain')
                    cost = (harness.process_cpu_seconds(broker.pid) - broker_cpu) / result['records'] * 1e6
                    rate = harness.Rate.of(result['records'], result)
                    samples.add((acks, phase), rate)
                    broker_us.setdefault((acks, phase), []).append(cost)
                    harness.progress(f'round {round_number + 1} acks={acks:<3} {phase:<18} {rate.per_s:>10,.0f} '
                                     f'records/s {rate.per_cpu_s:>10,.0f} records/CPU-s {cost:>6.1f} broker us/record')
        return samples, broker_us
    finally:
        broker.close()


def table(samples: harness.Samples, broker_us: BrokerCost, acks_settings: Sequence[str], records: int,
          record_size: int) -> Table:
    made = Table([Column('acks', left=True), Column('phase', left=True), Column('records/s', ',.0f'),
                  Column('rec/CPU-s', ',.0f'), Column('broker us/rec', '.1f'),
                  Column('vs kafka-python plain (wall)', '.3f'), Column('(CPU)', '.3f'),
                  Column('offsets / kafka_kip plain (wall)', '.3f'), Column('(CPU)', '.3f')],
                 notes=[f'{records:,} records of {record_size} bytes per phase; medians over the rounds, ratios the '
                        f'median of the per-round ratios. {GOAL_OFFSETS}; {GOAL_PLAIN}.'])
    for acks in acks_settings:
        for phase in PHASES:
            key, stock, plain = (acks, phase), (acks, 'kafka-python plain'), (acks, 'kafka_kip plain')
            versus_plain = [samples.ratio(key, plain, wall) if phase == 'kafka_kip offsets' else None
                            for wall in (True, False)]
            made.add(acks, phase, samples.median(key), samples.median(key, wall=False),
                     statistics.median(broker_us[key]), samples.ratio(key, stock),
                     samples.ratio(key, stock, wall=False), *versus_plain)
    return made


def main(argv: Sequence[str] | None = None) -> int:
    args_parser = harness.parser('bench_produce_offsets', __doc__)
    harness.workload_arguments(args_parser, records=100_000, rounds=3)
    args_parser.add_argument('--acks', default=','.join(ACKS), help='comma-separated subset of all,1 (default: both)')
    args = args_parser.parse_args(argv)
    acks_settings = harness.subset(args_parser, '--acks', args.acks, tuple(ACKS))
    samples, broker_us = run(args.records, args.rounds, args.record_size, acks_settings)
    print(harness.render([table(samples, broker_us, acks_settings, args.records, args.record_size)], as_json=args.json))
    return 0


if __name__ == '__main__':
    sys.exit(main())
