"""What KIP-253 costs kafka_kip in steady state: the same client code before and after it, in one run.

KIP-253 adds a partition count to every batch and every ProduceRequest to a kip.253 leader, a count compare
to the compiled send path, and, in a consumer whose group coordinator advertises kip.253, a look at each
partition's last fetched record and a snapshot of its positions per poll. This benchmark runs kafka_kip's
clients from two source trees, ``--before`` (a checkout without KIP-253, its compiled codec built) and the tree
it lives in, against one reference broker process of this tree (which advertises kip.253, so the new paths are
taken), with no expansion: what is measured is the steady-state cost.

Phases, each in a fresh child process whose ``kafka_kip`` comes from the tree being measured (the child
reports the path it imported, and the compiled codec must be in use):

- **produce keyed**: N records with 100 distinct keys over 4 partitions (the partitioner runs per record);
- **produce partition**: N records to partition 0 given explicitly (``bench_clients``' produce);
- **consume group**: a consumer in a group (``subscribe``) reads N records of one partition;
- **consume assign**: the same with ``assign()`` (no group: KIP-253 is not involved).

The clock and checks are ``bench_clients``': produce from the first send until ``flush()`` returned, every
record acknowledged at its expected offset; consume from the first record to the last, offsets contiguous.
Each child reports wall and CPU seconds; rounds alternate which tree goes first. The table shows medians of
records per CPU-second and the median of the per-round ratios after / before (the issue's goal: >= 0.97).

On a loaded machine the CPU seconds of a produce phase swing by +-20 % between rounds of one tree: a send wakes
the sender (a socket write) whenever its partition has more than one batch queued, which depends on how the
threads were scheduled. ``--calls`` counts instead what does not depend on the load: the Python-level calls per
record of each phase in each tree (cProfile, the main thread and the client's threads), and the kafka_kip and
kafka-python functions whose counts differ.

    python -m benchmarks.bench_kip253 --before PATH [--records 100000] [--rounds 3] [--json] [--calls]
"""
from __future__ import annotations

import cProfile
import json
import re
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import brokers, harness

AFTER = Path(__file__).resolve().parent.parent
PHASES = ('produce keyed', 'produce partition', 'consume group', 'consume assign')
KEYED_PARTITIONS = 4
KEYS = [b'key-%d' % i for i in range(100)]
BATCH_BYTES = 128 * 1024
POLL_RECORDS = 50_000
GOAL = harness.Goal('after / before', 0.97, note='in steady state; ratios are medians of per-round ratios')
_ADDRESS = re.compile(r' at 0x[0-9a-f]+')


# -- children ---------------------------------------------------------------------------------------------

class CallCountingWindow(harness.Window):
    """The harness's window; with ``count_calls``, also the Python-level calls made in it per function (cProfile:
    the main thread from start() to stop(), and every thread the client starts, counted at start() and stop())."""

    def __init__(self, count_calls: bool = False) -> None:
        super().__init__()
        #: thread kind ('main thread', 'client threads') -> function -> calls (with ``count_calls``)
        self.calls: dict[str, dict[str, int]] = {}
        self._main = cProfile.Profile() if count_calls else None
        self._threads: list[cProfile.Profile] = []
        self._threads_at_start: Counter[str] = Counter()
        if count_calls:
            threading.setprofile(self._profile_new_thread)

    def _profile_new_thread(self, frame: Any, event: str, arg: Any) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile()
        self._threads.append(profile)
        profile.enable()

    def _thread_calls(self) -> Counter[str]:
        return sum((_calls(profile) for profile in list(self._threads)), Counter())

    def start(self) -> None:
        if self._main is not None:
            self._threads_at_start = self._thread_calls()
            self._main.enable()
        super().start()

    def stop(self) -> None:
        super().stop()
        if self._main is not None:
            self._main.disable()
            threading.setprofile(None)
            self.calls = {'main thread': dict(_calls(self._main)),
                          'client threads': dict(self._thread_calls() - self._threads_at_start)}


def _calls(profile: cProfile.Profile) -> Counter[str]:
    counts: Counter[str] = Counter()
    for entry in profile.getstats():
        counts[_function_name(entry.code)] += entry.callcount
    return counts


def _function_name(code: Any) -> str:
    """``kafka_kip/producer/sender.py:OffsetSender._produce_request``: the same name in both trees (no line)."""
    if isinstance(code, str):
        return _ADDRESS.sub('', code)  # a built-in ("... of type object at 0x7f...")
    parts = Path(code.co_filename).parts
    anchor = next((i for i, part in enumerate(parts) if part in ('kafka_kip', 'kafka', 'benchmarks')), None)
    path = code.co_filename if anchor is None else '/'.join(parts[anchor:])
    return f'{path}:{code.co_qualname}'


def produce(bootstrap: str, topic: str, count: int, keyed: bool, window: harness.Window) -> None:
    import kafka_kip

    producer = kafka_kip.KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=BATCH_BYTES)
    value = b'x' * 100
    try:
        producer.send(topic, value, partition=0).get(timeout=30)
        send = producer.send
        window.start()
        if keyed:
            futures = [send(topic, value, key=KEYS[i % len(KEYS)]) for i in range(count)]
        else:
            futures = [send(topic, value, partition=0) for _ in range(count)]
        producer.flush(timeout=harness.PHASE_TIMEOUT_S)
        window.stop()
    finally:
        producer.close()
    failed = sum(not f.succeeded() for f in futures)
    if failed:
        raise harness.BenchmarkError(f'{failed} of {count} records failed')
    if not keyed and [f.value.offset for f in futures] != list(range(1, count + 1)):
        raise harness.BenchmarkError('records landed at unexpected offsets')


def consume(bootstrap: str, topic: str, count: int, group: bool, window: harness.Window) -> None:
    import kafka_kip

    configs = dict(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset='earliest',
                   max_partition_fetch_bytes=1024 * 1024, max_poll_records=POLL_RECORDS)
    if group:
        consumer = kafka_kip.KafkaConsumer(topic, group_id='bench-' + uuid.uuid4().hex, **configs)
    else:
        consumer = kafka_kip.KafkaConsumer(**configs)
        consumer.assign([kafka_kip.TopicPartition(topic, 0)])
    next_offset = 0
    deadline = time.monotonic() + harness.PHASE_TIMEOUT_S
    try:
        while not next_offset and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=1).values():
                next_offset = records[-1].offset + 1
        window.start()
        while next_offset <= count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                if records[0].offset != next_offset or records[-1].offset != next_offset + len(records) - 1:
                    raise harness.BenchmarkError(f'records {records[0].offset}..{records[-1].offset} after {next_offset - 1}')
                next_offset = records[-1].offset + 1
        window.stop()
    finally:
        consumer.close()
    if next_offset != count + 1:
        raise harness.BenchmarkError(f'consumed offsets 0..{next_offset - 1}, expected 0..{count}')


def phase(phase: str, bootstrap: str, topic: str, count: int, count_calls: bool = False) -> dict[str, Any]:
    """One phase in this process (a child): wall and CPU seconds (or the calls made), and which kafka_kip ran."""
    window = CallCountingWindow(count_calls)
    if phase.startswith('produce'):
        produce(bootstrap, topic, count, phase == 'produce keyed', window)
    else:
        consume(bootstrap, topic, count, phase == 'consume group', window)
    import kafka_kip

    harness.require_compiled_codec()
    return window.result(calls=window.calls, tree=str(Path(kafka_kip.__file__).resolve().parent.parent))


# -- the run (parent process) -----------------------------------------------------------------------------

def _in_child(tree: Path, phase_: str, bootstrap: str, topic: str, count: int, count_calls: bool) -> dict[str, Any]:
    result = harness.run_phase('benchmarks.bench_kip253:phase', phase_, bootstrap, topic, count, count_calls,
                       label=f'{phase_} ({tree})', kafka_kip=True, pythonpath=tree)
    if Path(result['tree']) != tree:
        raise harness.BenchmarkError(f'{phase_} ran kafka_kip from {result["tree"]}, not from {tree}')
    return result


def setup(bootstrap: str, topic: str, partitions: int, fill: int) -> None:
    """A topic of ``partitions``, with ``fill`` records of 100 bytes on partition 0 (in a child, stock)."""
    brokers.create_topic(bootstrap, topic, partitions)
    if fill:
        brokers.produce(bootstrap, topic, fill - 1, b'x' * 100)  # + its warm-up record


def _setup(bootstrap: str, topic: str, partitions: int, fill: int) -> None:
    harness.run_phase('benchmarks.bench_kip253:setup', bootstrap, topic, partitions, fill, label=f'set up {topic}',
              kafka_kip=None, timeout=harness.PHASE_TIMEOUT_S)


CallCounts = dict[str, dict[str, dict[str, dict[str, int]]]]  # phase -> tree label -> thread kind -> function -> calls


def run(before: Path, phases: Sequence[str], count: int, rounds: int, loads: harness.LoadAverage,
        calls: CallCounts | None = None) -> harness.Samples:
    """Rates by (phase, tree label), rounds alternating which tree goes first; with ``calls`` (a dict to fill),
    the children count the calls they make instead (cProfile slows them: their times are not comparable then)."""
    trees = {'before': before, 'after': AFTER}
    samples = harness.Samples()
    broker = brokers.ReferenceBrokerProcess()
    try:
        bootstrap = broker.bootstrap_servers
        consumed_topic = 'bench-consume'
        if any(phase_.startswith('consume') for phase_ in phases):
            _setup(bootstrap, consumed_topic, 1, count + 1)
        for round_number in range(rounds):
            for phase_ in phases:
                for label in harness.alternated(list(trees), round_number):
                    topic = consumed_topic
                    if phase_.startswith('produce'):
                        topic = f'bench-{uuid.uuid4().hex[:8]}'
                        _setup(bootstrap, topic, KEYED_PARTITIONS if phase_ == 'produce keyed' else 1, 0)
                    result = _in_child(trees[label], phase_, bootstrap, topic, count, calls is not None)
                    if calls is not None:
                        calls.setdefault(phase_, {})[label] = result['calls']
                    rate = harness.Rate.of(count, result)
                    samples.add((phase_, label), rate)
                    loads.sample()
                    harness.progress(f'round {round_number + 1} {phase_} {label}: {rate.per_cpu_s:,.0f} records/CPU-s')
    finally:
        broker.close()
    return samples


def table(samples: harness.Samples, phases: Sequence[str], loads: harness.LoadAverage, count: int) -> harness.Table:
    made = harness.Table([harness.Column('phase', left=True), harness.Column('before (records/CPU-s)', ',.0f'),
                  harness.Column('after (records/CPU-s)', ',.0f'), harness.Column('after / before (CPU)', '.3f'),
                  harness.Column('after / before (wall)', '.3f')], title=f'{count:,} records per phase, {loads}\n')
    for phase_ in phases:
        after, before = (phase_, 'after'), (phase_, 'before')
        made.add(phase_, samples.median(before, wall=False), samples.median(after, wall=False),
                 samples.ratio(after, before, wall=False), samples.ratio(after, before))
    made.notes.append(f'\n({GOAL})')
    return made


def format_calls(calls: CallCounts, count: int, shown: int = 15) -> str:
    """Python-level calls per record by thread kind, and the kafka_kip and kafka-python functions whose calls per
    1,000 records differ most (cProfile sees Python functions and built-ins called from Python, not the compiled
    codec's C code). Calls that follow the threads' timing (sender passes, wake-ups, polls) differ between runs
    of one tree too."""
    lines = [f'{count:,} records per phase, Python-level calls in the measured window', '',
             '| phase | thread | before (calls/record) | after (calls/record) |', '| --- | --- | --- | --- |']
    for phase, by_tree in calls.items():
        for thread in by_tree['before']:
            before, after = (sum(by_tree[label][thread].values()) / count for label in ('before', 'after'))
            lines.append(f'| {phase} | {thread} | {before:.3f} | {after:.3f} |')
    for phase, by_tree in calls.items():
        lines += ['', f'{phase}: the {shown} kafka_kip and kafka-python functions whose calls per 1,000 records differ most', '',
                  '| thread | function | before | after |', '| --- | --- | --- | --- |']
        rows = []
        for thread, before in by_tree['before'].items():
            after = by_tree['after'][thread]
            for function in {f for f in set(before) | set(after) if f.startswith(('kafka_kip/', 'kafka/'))}:
                b, a = before.get(function, 0) * 1000 / count, after.get(function, 0) * 1000 / count
                rows.append((abs(a - b), thread, function, b, a))
        for _, thread, function, b, a in sorted(rows, key=lambda row: -row[0])[:shown]:
            lines.append(f'| {thread} | `{function}` | {b:.2f} | {a:.2f} |')
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args_parser = harness.parser('bench_kip253', __doc__.split('\n\n')[0])
    args_parser.add_argument('--before', type=Path, help='a source tree of kafka_kip without KIP-253 (codec built)')
    harness.workload_arguments(args_parser, records=100_000, rounds=3, record_size=False)
    args_parser.add_argument('--phases', default=','.join(PHASES), help='comma-separated subset of ' + ','.join(PHASES))
    args_parser.add_argument('--calls', action='store_true',
                             help='count the Python-level calls per record instead of timing (one round; '
                                  'load-independent)')
    args = args_parser.parse_args(argv)
    if args.before is None:
        args_parser.error('--before PATH is required (a checkout without KIP-253 with its codec built)')
    phases = [p for p in args.phases.split(',') if p]
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        args_parser.error(f'unknown phases {unknown}; phases are {", ".join(PHASES)}')
    loads = harness.LoadAverage()
    if args.calls:
        calls: CallCounts = {}
        run(args.before.resolve(), phases, args.records, 1, loads, calls)
        print(json.dumps(calls) if args.json else format_calls(calls, args.records))
        return 0
    samples = run(args.before.resolve(), phases, args.records, args.rounds, loads)
    print(harness.render([table(samples, phases, loads, args.records)], as_json=args.json, markdown=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
