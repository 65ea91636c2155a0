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

import os
import statistics
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kafka.protocol.api_key import ApiKey

from benchmarks import brokers, harness
from benchmarks.bench_clients import FETCH_BYTES, kafka_consume, kafka_produce

PHASES = ('produce', 'consume')
VARIANTS = ('default', 'small-requests', 'file-store')
TOKEN_BROKERS = ('with token', 'without token')
WITHOUT_KIP_1243 = ('--features', 'kip.232,kip.391')
SMALL_BYTES = 16 * 1024
GOAL = harness.Goal('token cost (% of the client CPU)', 3, at_most=True)


def _store(variant: str, store_dir: str) -> Any:
    from kafka_kip import ConsistencyContextStore
    if variant == 'file-store':
        return ConsistencyContextStore.file(os.path.join(store_dir, f'context-{uuid.uuid4().hex}'))
    return ConsistencyContextStore.empty()


def produce(variant: str, bootstrap: str, topic: str, count: int, value: bytes, store: Any, window: harness.Window) -> int:
    """bench_clients' kafka_kip produce phase (``small-requests``: no linger, 16 KiB batches); the token stored."""
    small = {'linger_ms': 0, 'batch_size': SMALL_BYTES} if variant == 'small-requests' else {}
    producer = kafka_produce('kafka_kip', bootstrap, topic, count, value, window, consistency_context_store=store,
                             **small)
    return producer._sender._client._manager.consistency.store.read().offset


def consume(variant: str, bootstrap: str, topic: str, count: int, store: Any, window: harness.Window) -> tuple[str, int]:
    """bench_clients' kafka_kip consume phase (``small-requests``: 16 KiB fetches); its digest and the token stored."""
    small = {'max_partition_fetch_bytes': SMALL_BYTES, 'fetch_max_bytes': SMALL_BYTES} \
        if variant == 'small-requests' else {'fetch_max_bytes': FETCH_BYTES}
    digest = kafka_consume('kafka_kip', bootstrap, topic, count, window, consistency_context_store=store, **small)
    return digest, store.read().offset


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


def phase(variant: str, phase_: str, bootstrap: str, topic: str, count: int, record_size: int) -> dict[str, Any]:
    """One phase in this process (a child); ``token`` is the store's offset at the end (-1: no token came),
    ``requests`` the Produce or Fetch requests sent while the clock ran."""
    harness.require_compiled_codec()
    counts = _count_requests()
    window = harness.Window()
    window.start = _counting_from(window.start, counts)
    digest = None
    with tempfile.TemporaryDirectory() as store_dir:
        store = _store(variant, store_dir)
        if phase_ == 'produce':
            token = produce(variant, bootstrap, topic, count, b'x' * record_size, store, window)
        else:
            digest, token = consume(variant, bootstrap, topic, count, store, window)
    requests = counts[0 if phase_ == 'produce' else 1] - counts['at start']
    return window.result(digest=digest, token=token, requests=requests)


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


#: (variant, phase, broker) -> rates, one per round; requests and client CPU seconds of the token's phases
Measured = tuple[harness.Samples, dict[tuple[str, str], list[tuple[int, float]]]]


def _start_brokers(order: Sequence[str]) -> dict[str, brokers.ReferenceBrokerProcess]:
    started: dict[str, brokers.ReferenceBrokerProcess] = {}
    try:
        for name in order:
            started[name] = brokers.ReferenceBrokerProcess(
                brokers=1, extra_args=() if name == 'with token' else WITHOUT_KIP_1243)
    except BaseException:
        for broker in started.values():
            broker.close()
        raise
    return started


def run(variants: Sequence[str], phases: Sequence[str], count: int, rounds: int, record_size: int,
        loads: harness.LoadAverage) -> Measured:
    """Every round starts both brokers afresh, in alternating order (on a shared machine the broker started first
    can be measurably slower for reasons of its own: an A/A run shows it), fills the topic each consume reads and
    runs every variant and phase against both, in alternating order too."""
    samples = harness.Samples()
    token_phases: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for round_number in range(rounds):
        order = harness.alternated(TOKEN_BROKERS, round_number)
        started = _start_brokers(order)
        try:
            consume_topics = {}
            if 'consume' in phases:
                for name, broker in started.items():
                    consume_topics[name] = f'bench-consistency-{uuid.uuid4().hex[:8]}'
                    brokers.fill_in_child(broker.bootstrap_servers, consume_topics[name], count, record_size)
            for variant in variants:
                for phase_ in phases:
                    for name in order:
                        bootstrap = started[name].bootstrap_servers
                        if phase_ == 'produce':
                            topic = f'bench-consistency-{uuid.uuid4().hex[:8]}'
                            brokers.create_topic_in_child(bootstrap, topic)
                        else:
                            topic = consume_topics[name]
                        result = harness.run_phase('benchmarks.bench_consistency:phase', variant, phase_, bootstrap, topic,
                                           count, record_size, label=f'{variant} {phase_}', kafka_kip=True)
                        if (result['token'] >= 0) != (name == 'with token'):
                            raise harness.BenchmarkError(f'{variant} {phase_} {name}: the store ended at token '
                                                 f'{result["token"]}')
                        load = loads.sample()
                        rate = harness.Rate.of(count, result)
                        samples.add((variant, phase_, name), rate)
                        if name == 'with token':
                            token_phases.setdefault((variant, phase_), []).append(
                                (result['requests'], result['cpu_seconds']))
                        harness.progress(f'round {round_number + 1} {variant:<14} {phase_:<7} {name:<13} {rate.per_s:>10,.0f} '
                                 f'records/s {rate.per_cpu_s:>10,.0f} records/CPU-s  load {load:.1f}')
        finally:
            for broker in started.values():
                broker.close()
    return samples, token_phases


def table(measured: Measured, variants: Sequence[str], phases: Sequence[str], loads: harness.LoadAverage, count: int,
          record_size: int, rounds: int, per_request_us: dict[str, float]) -> harness.Table:
    samples, token_phases = measured
    result = harness.Table([harness.Column('variant', left=True), harness.Column('phase', left=True), harness.Column('with token', ',.0f'),
                    harness.Column('without', ',.0f'), harness.Column('ratio wall', '.3f', 'x'), harness.Column('ratio CPU', '.3f', 'x'),
                    harness.Column('requests', ',.0f'), harness.Column('token cost', '.2%')])
    for variant in variants:
        for phase_ in phases:
            with_token, without = (variant, phase_, 'with token'), (variant, phase_, 'without token')
            us = per_request_us['file' if variant == 'file-store' else 'memory']
            runs = token_phases[(variant, phase_)]
            result.add(variant, phase_, samples.median(with_token), samples.median(without),
                       samples.ratio(with_token, without), samples.ratio(with_token, without, wall=False),
                       statistics.median(requests for requests, _ in runs),
                       statistics.median(us * requests / (cpu * 1e6) for requests, cpu in runs))
    result.notes.append(
        f'records/s, medians of {rounds} interleaved rounds, {count:,} records of {record_size} bytes; ratio = '
        f'median per-round (with token / without); {loads}. Token cost = client CPU per request (--micro: '
        f'{per_request_us["memory"]:.1f} us, {per_request_us["file"]:.1f} us with a file store) x Produce/Fetch '
        f'requests of the phase / its client CPU. {GOAL}.')
    return result


def _micro_in_child(store: str) -> float:
    return harness.run_phase('benchmarks.bench_consistency:micro', store == 'file', label=f'--micro {store}', kafka_kip=True,
                     timeout=600)


def main(argv: Sequence[str] | None = None) -> int:
    args_parser = harness.parser('bench_consistency', __doc__.split('\n\n')[0])
    harness.workload_arguments(args_parser, records=100_000, rounds=5)
    args_parser.add_argument('--variants', default=','.join(VARIANTS),
                             help='comma-separated subset of ' + ','.join(VARIANTS))
    args_parser.add_argument('--phases', default=','.join(PHASES), help='comma-separated subset of ' + ','.join(PHASES))
    args_parser.add_argument('--micro', choices=('memory', 'file'),
                             help='only print the extra client CPU (us) per request of the token, with that store')
    args = args_parser.parse_args(argv)
    if args.micro:
        print(f'{micro(file_store=args.micro == "file"):.3f}')
        return 0
    variants = harness.subset(args_parser, '--variants', args.variants, VARIANTS)
    phases = harness.subset(args_parser, '--phases', args.phases, PHASES)
    per_request_us = {store: _micro_in_child(store) for store in ('memory', 'file')}
    harness.progress(f'token: {per_request_us["memory"]:.1f} us of client CPU per request, {per_request_us["file"]:.1f} us '
             'with a file store')
    loads = harness.LoadAverage()
    measured = run(variants, phases, args.records, args.rounds, args.record_size, loads)
    print(harness.render([table(measured, variants, phases, loads, args.records, args.record_size, args.rounds,
                        per_request_us)], as_json=args.json))
    return 0


if __name__ == '__main__':
    sys.exit(main())
