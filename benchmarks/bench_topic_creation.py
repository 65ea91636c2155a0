"""Creating many topics on a reference broker while another client is served: seconds per phase and the other
client's Metadata round trips meanwhile.

The broker runs in its own process (``python -m kafka_kip broker --brokers 1``). Phases, each on a fresh broker:

- ``one request``: one CreateTopics of as many one-partition topics as Kafka's 10,000-record limit lets one request
  create (4,999; a topic record and a partition record each) -- the case that was quadratic;
- ``10,000 x 10``: 10,000 topics of 10 partitions (100,000 partitions) in CreateTopics requests of 909 topics
  (9,999 records each, under the limit).

Meanwhile a second connection sends Metadata for one topic in a loop; the table shows how many were answered
and the slowest. ``--topics`` / ``--partitions`` change the second phase. See benchmarks/README.md.

    python -m benchmarks.bench_topic_creation [--topics 10000] [--partitions 10]
"""
from __future__ import annotations

import argparse
import statistics
import threading
import time
from dataclasses import dataclass

from kafka.protocol.api_key import ApiKey

from benchmarks.brokers import ReferenceBrokerProcess
from kafka_kip.protocol.constants import NONE
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip_reference.fixtures.wire_client import WireClient

#: Kafka's MAX_RECORDS_PER_USER_OP: the metadata records one CreateTopics may write.
MAX_RECORDS = 10_000


@dataclass
class Result:
    phase: str
    topics: int
    partitions: int
    seconds: float
    metadata_answers: int
    metadata_max_ms: float
    metadata_median_ms: float
    broker_rss_mib: float


def create_request(names: list[str], partitions: int):
    request_class = REQUESTS[ApiKey.CreateTopics]
    return request_class(version=7, timeout_ms=600_000, validate_only=False, topics=[
        request_class.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                                     configs=[]) for name in names])


def metadata_loop(address: tuple[str, int], stop: threading.Event, latencies: list[float]) -> None:
    request_class = REQUESTS[ApiKey.Metadata]
    request = request_class(version=12, topics=[request_class.MetadataRequestTopic(name='probe')],
                            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with WireClient(address, timeout=600) as wire:
        while not stop.is_set():
            started = time.perf_counter()
            answer = wire.request(request)
            latencies.append(time.perf_counter() - started)
            if answer.topics[0].error_code != NONE:
                raise RuntimeError(f'Metadata for probe answered {answer.topics[0].error_code}')


def rss_mib(pid: int) -> float:
    with open(f'/proc/{pid}/status') as status:
        for line in status:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
    return float('nan')


def run_phase(phase: str, topics: int, partitions: int) -> Result:
    broker = ReferenceBrokerProcess()
    try:
        host, port = broker.bootstrap_servers.split(',')[0].split(':')
        address = (host, int(port))
        with WireClient(address, timeout=600) as wire:
            if wire.request(create_request(['probe'], 1)).topics[0].error_code != NONE:
                raise RuntimeError('could not create the probe topic')
            per_request = max(1, (MAX_RECORDS - 1) // (1 + partitions))
            prefix = ''.join(c if c.isalnum() else '-' for c in phase if c != ',')  # a legal topic name
            names = [f'{prefix}-{i:06d}' for i in range(topics)]
            stop, latencies = threading.Event(), []
            other = threading.Thread(target=metadata_loop, args=(address, stop, latencies), daemon=True)
            other.start()
            started = time.perf_counter()
            for first in range(0, topics, per_request):
                answer = wire.request(create_request(names[first:first + per_request], partitions))
                failed = [(t.name, t.error_code) for t in answer.topics if t.error_code != NONE]
                if failed:
                    raise RuntimeError(f'CreateTopics refused {failed[:3]}')
            seconds = time.perf_counter() - started
            stop.set()
            other.join()
        return Result(phase, topics, topics * partitions, seconds, len(latencies), max(latencies) * 1000,
                      statistics.median(latencies) * 1000, rss_mib(broker._process.pid))
    finally:
        broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--topics', type=int, default=10_000)
    parser.add_argument('--partitions', type=int, default=10)
    args = parser.parse_args()
    results = [run_phase('one request', (MAX_RECORDS - 1) // 2, 1),
               run_phase(f'{args.topics:,} x {args.partitions}', args.topics, args.partitions)]
    print('| phase | topics | partitions | seconds | partitions/s | other client: Metadata answers | slowest ms '
          '| median ms | broker RSS MiB |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    for r in results:
        print(f'| {r.phase} | {r.topics:,} | {r.partitions:,} | {r.seconds:.1f} | {r.partitions / r.seconds:,.0f} '
              f'| {r.metadata_answers:,} | {r.metadata_max_ms:.0f} | {r.metadata_median_ms:.1f} '
              f'| {r.broker_rss_mib:.0f} |')


if __name__ == '__main__':
    main()
