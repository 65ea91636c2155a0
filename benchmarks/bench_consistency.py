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

Rounds interleave (with, without, without, with, ...), each with both brokers started afresh in that order; the
table shows medians and the median of the per-round ratios, for wall-clock and client CPU time. On a shared 2-core
machine the wall-clock ratio moves by 5-30 % between runs (two identical brokers measured this way differ by as
much), far more than the token costs; so the run also measures the token's cost
where it is paid, per request, in this process (``--micro``: kafka_kip's protocol layer and consistency session
sending and reading one request with and without the state, the fastest of many repeats), counts the Produce and
Fetch requests of each phase, and shows the cost that implies: extra CPU per request x requests / the phase's
client CPU.

    python -m benchmarks.bench_consistency [--records 100000] [--rounds 5] [--variants default,small-requests,...]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kafka.protocol.api_key import ApiKey

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


def _count_requests() -> dict[int, int]:
    """Count the Produce (0) and Fetch (1) requests every kafka_kip connection manager of this process sends."""
    from kafka_kip.metadata.client import KipConnectionManager
    counts = {0: 0, 1: 0}
    send = KipConnectionManager.send

    def counting_send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if request.API_KEY in counts:
            counts[request.API_KEY] += 1
        return send(self, request, *args, **kwargs)

    KipConnectionManager.send = counting_send
    return counts


def run_phase(variant: str, phase: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, Any]:
    """One phase in this process (a child); ``token`` is the store's offset at the end (-1: no token came),
    ``requests`` the Produce or Fetch requests sent while the clock ran."""
    require_compiled_codec()
    counts = _count_requests()
    window = Window()
    window.start = _counting_from(window.start, counts)
    digest = None
    with tempfile.TemporaryDirectory() as store_dir:
        store = _store(variant, store_dir)
        if phase == 'produce':
            token = produce(variant, bootstrap, topic, count, b'x' * record_size, store, window)
        else:
            digest, token = consume(variant, bootstrap, topic, count, store, window)
    requests = counts[0 if phase == 'produce' else 1] - counts['at start']
    return {'seconds': window.wall, 'cpu_seconds': window.cpu, 'digest': digest, 'token': token,
            'requests': requests}


def _counting_from(start: Callable[[], None], counts: dict) -> Callable[[], None]:
    def start_and_mark() -> None:
        counts['at start'] = counts[0] + counts[1]
        start()
    return start_and_mark


# -- the cost per request, measured where it is paid ---------------------------------------------------------

def micro(file_store: bool = False, repeats: int = 15, requests: int = 2000) -> float:
    """Extra client CPU (µs) per request of sending the consistency state and reading the response's: kafka_kip's
    protocol layer (header written and read) and session (state cached, token compared), plus the future chain of
    the connection, against the same without a session; the fastest of ``repeats`` runs of each. With
    ``file_store`` the session's store is a file store (read for every request)."""
    from kafka.future import Future

    from kafka_kip import ConsistencyContext, ConsistencyContextStore
    from kafka_kip.metadata.consistency_session import ConsistencySession
    from kafka_kip.protocol.connection import KipProtocol
    from kafka_kip.protocol.headers import consistency_state_tags
    from kafka_kip.protocol.messages import REQUESTS, RESPONSES

    produce_class, response_class = REQUESTS[ApiKey.Produce], RESPONSES[ApiKey.Produce]
    data = produce_class.TopicProduceData
    body = response_class(version=9, throttle_time_ms=0, responses=[response_class.TopicProduceResponse(
        name='t', partition_responses=[response_class.TopicProduceResponse.PartitionProduceResponse(
            index=0, error_code=0, base_offset=5)])]).encode(version=9)

    def one_run(session: ConsistencySession | None) -> float:
        protocol = KipProtocol(client_id='bench')
        protocol.consistency = session
        tags = consistency_state_tags('bench-cluster', 10) if session else b'\0'
        frames = [struct.pack('>ii', 4 + len(tags) + len(body), i + 1) + tags + body for i in range(requests)]
        batch = [produce_class(version=9, transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
            data(name='t', partition_data=[data.PartitionProduceData(index=0, records=b'r' * 100)])])
            for _ in range(requests)]
        started = time.process_time()
        for request, frame in zip(batch, frames, strict=True):
            protocol.send_request(request)
            protocol.send_bytes()
            [(_, response)] = protocol.receive_bytes(frame)
            if session is not None:  # what KipConnection adds: the chained future and the session's look
                received, answered = Future(), Future()
                received.add_callback(answered.success)
                received.add_errback(answered.failure)
                received.success(response)
                session.on_response(0, getattr(request.header, 'consistency_state', None),
                                    response.header.consistency_state)
        return (time.process_time() - started) / requests * 1e6

    context = ConsistencyContext.of('bench-cluster', 10)
    with tempfile.TemporaryDirectory() as directory:
        store = ConsistencyContextStore.of(context)
        if file_store:
            store = ConsistencyContextStore.file(os.path.join(directory, 'context'))
            store.store_latest(context)
        without = min(one_run(None) for _ in range(repeats))
        with_token = min(one_run(ConsistencySession(store)) for _ in range(repeats))
    return with_token - without


def _in_child(variant: str, phase: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, Any]:
    command = [sys.executable, '-m', 'benchmarks.bench_consistency', '--phase', variant, phase, bootstrap, topic,
               str(count), str(record_size)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=PHASE_TIMEOUT_S + 60, check=False)
    if done.returncode != 0:
        raise BenchmarkError(f'{variant} {phase} failed: {done.stderr[-4000:]}')
    return json.loads(done.stdout.strip().splitlines()[-1])


# variant -> phase -> broker -> [(records/s, records/CPU-s, requests, client CPU seconds)]
Results = dict[str, dict[str, dict[str, list[tuple[float, float, int, float]]]]]


def _start_brokers(order: Sequence[str]) -> dict[str, ReferenceBrokerProcess]:
    brokers: dict[str, ReferenceBrokerProcess] = {}
    try:
        for name in order:
            brokers[name] = ReferenceBrokerProcess(brokers=1, extra_args=() if name == 'with token' else WITHOUT_KIP_1243)
    except BaseException:
        for broker in brokers.values():
            broker.close()
        raise
    return brokers


def run(variants: Sequence[str], phases: Sequence[str], count: int, rounds: int, record_size: int,
        progress: Callable[[str], None]) -> tuple[Results, list[float]]:
    """Every round starts both brokers afresh, in alternating order (on a shared machine the broker started first
    can be measurably slower for reasons of its own: an A/A run shows it), fills the topic each consume reads and
    runs every variant and phase against both, in alternating order too."""
    loads: list[float] = []
    results: Results = {v: {p: {b: [] for b in TOKEN_BROKERS} for p in phases} for v in variants}
    for round_number in range(rounds):
        order = TOKEN_BROKERS if round_number % 2 == 0 else TOKEN_BROKERS[::-1]
        brokers = _start_brokers(order)
        try:
            consume_topics = {}
            if 'consume' in phases:
                for name, broker in brokers.items():
                    consume_topics[name] = f'bench-consistency-{uuid.uuid4().hex[:8]}'
                    _create_topic(broker.bootstrap_servers, consume_topics[name])
                    _fill(broker.bootstrap_servers, consume_topics[name], count, record_size)
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
                        rate = (count / result['seconds'], count / result['cpu_seconds'], result['requests'],
                                result['cpu_seconds'])
                        results[variant][phase][name].append(rate)
                        progress(f'round {round_number + 1} {variant:<14} {phase:<7} {name:<13} {rate[0]:>10,.0f} '
                                 f'records/s {rate[1]:>10,.0f} records/CPU-s  load {loads[-1]:.1f}')
        finally:
            for broker in brokers.values():
                broker.close()
    return results, loads


def format_table(results: Results, loads: list[float], count: int, record_size: int, rounds: int,
                 per_request_us: dict[str, float]) -> str:
    header = (f'{"variant":<14} {"phase":<7} {"with token":>11} {"without":>11} {"ratio wall":>10} {"ratio CPU":>10} '
              f'{"requests":>9} {"token cost":>11}')
    lines = [header, '-' * len(header)]
    for variant, by_phase in results.items():
        for phase, by_broker in by_phase.items():
            with_token, without = by_broker['with token'], by_broker['without token']
            ratios = [statistics.median(w[m] / o[m] for w, o in zip(with_token, without, strict=True)) for m in (0, 1)]
            requests = statistics.median(r[2] for r in with_token)
            us = per_request_us['file' if variant == 'file-store' else 'memory']
            cost = statistics.median(us * r[2] / (r[3] * 1e6) for r in with_token)
            lines.append(f'{variant:<14} {phase:<7} {statistics.median(r[0] for r in with_token):>11,.0f} '
                         f'{statistics.median(r[0] for r in without):>11,.0f} {ratios[0]:>9.3f}x {ratios[1]:>9.3f}x '
                         f'{requests:>9,.0f} {cost:>10.2%}')
    lines.append(f'records/s, medians of {rounds} interleaved rounds, {count:,} records of {record_size} bytes; ratio = '
                 f'median per-round (with token / without); load average {min(loads):.1f}-{max(loads):.1f} on '
                 f'{os.cpu_count()} CPUs. Token cost = client CPU per request (--micro: {per_request_us["memory"]:.1f} us, '
                 f'{per_request_us["file"]:.1f} us with a file store) x Produce/Fetch requests of the phase / its client '
                 'CPU. Goal: at most 3 %.')
    return '\n'.join(lines)


def _micro_in_child(store: str) -> float:
    command = [sys.executable, '-m', 'benchmarks.bench_consistency', '--micro', store]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise BenchmarkError(f'--micro failed: {done.stderr[-4000:]}')
    return float(done.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_consistency',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--records', type=int, default=100_000, help='records per phase (default %(default)s)')
    parser.add_argument('--rounds', type=int, default=5, help='interleaved rounds (default %(default)s)')
    parser.add_argument('--record-size', type=int, default=100, help='value bytes per record (default 100)')
    parser.add_argument('--variants', default=','.join(VARIANTS), help='comma-separated subset of ' + ','.join(VARIANTS))
    parser.add_argument('--phases', default=','.join(PHASES), help='comma-separated subset of ' + ','.join(PHASES))
    parser.add_argument('--micro', choices=('memory', 'file'),
                        help='only print the extra client CPU (us) per request of the token, with that store')
    parser.add_argument('--phase', nargs=6, metavar=('VARIANT', 'PHASE', 'BOOTSTRAP', 'TOPIC', 'RECORDS', 'SIZE'),
                        help=argparse.SUPPRESS)  # internal: one phase, in a child process
    args = parser.parse_args(argv)
    if args.micro:
        print(f'{micro(file_store=args.micro == "file"):.3f}')
        return 0
    if args.phase:
        variant, phase, bootstrap, topic, count, size = args.phase
        print(json.dumps(run_phase(variant, phase, bootstrap, topic, int(count), int(size))))
        return 0
    variants, phases = args.variants.split(','), args.phases.split(',')
    for option, chosen, known in (('--variants', variants, VARIANTS), ('--phases', phases, PHASES)):
        unknown = set(chosen) - set(known)
        if unknown:
            parser.error(f'{option}: unknown {", ".join(sorted(unknown))}')
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    per_request_us = {store: _micro_in_child(store) for store in ('memory', 'file')}
    progress(f'token: {per_request_us["memory"]:.1f} us of client CPU per request, {per_request_us["file"]:.1f} us '
             'with a file store')
    results, loads = run(variants, phases, args.records, args.rounds, args.record_size, progress)
    print(format_table(results, loads, args.records, args.record_size, args.rounds, per_request_us))
    return 0


if __name__ == '__main__':
    sys.exit(main())
