"""A 4th member joining a 3-member group over 120 partitions, classic vs KIP-848's consumer protocol: seconds from
the 4th consumer's construction until every partition is owned by exactly one of the 4 members, each owns 30, and
every owned partition has a fetch position again (is being fetched).

On Apache Kafka 4.4 (``kafka_kip_reference.external.apache_kafka``, its test clusters' 500 ms consumer-group heartbeat
interval); the classic members heartbeat every 500 ms too (``heartbeat_interval_ms``) with kafka-python's default
assignors (eager). Each member polls in its own thread. Rounds alternate the protocols; the table shows the median
and every round. See benchmarks/README.md.

    python -m benchmarks.bench_group_join [--rounds 3] [--partitions 120]
"""
from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from typing import Any

import kafka_kip
from benchmarks.brokers import create_topic
from kafka_kip_reference.external.apache_kafka import close_shared_clusters, shared_cluster
from kafka_kip_reference.fixtures.conditions import wait_until

PROTOCOL_CONFIGS: dict[str, dict[str, Any]] = {
    'classic': {'group_protocol': 'classic', 'heartbeat_interval_ms': 500, 'session_timeout_ms': 10000},
    'consumer': {'group_protocol': 'consumer'},
}


class Member:
    """A consumer polling in its own thread until stopped."""

    def __init__(self, bootstrap: str, topic: str, group: str, configs: dict[str, Any]) -> None:
        self.consumer = kafka_kip.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                                auto_offset_reset='earliest', **configs)
        self.consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(100)

    def fetching(self) -> set[int] | None:
        """The partitions it owns, if each has a position; None while one has none."""
        states = dict(self.consumer._subscription.assignment)
        if not all(state.has_valid_position for state in states.values()):
            return None
        return {tp.partition for tp in states}

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.consumer.close()


def settled(members: list[Member], partitions: int) -> bool:
    owned = [member.fetching() for member in members]
    if any(o is None for o in owned):
        return False
    share = partitions // len(members)
    return sorted(map(len, owned)) == [share] * len(members) and len(set().union(*owned)) == partitions


def one_round(bootstrap: str, protocol: str, partitions: int) -> float:
    topic = f'join-{protocol}-{uuid.uuid4().hex[:8]}'
    create_topic(bootstrap, topic, partitions, replication_factor=3)
    configs = PROTOCOL_CONFIGS[protocol]
    members = [Member(bootstrap, topic, f'{topic}-g', configs) for _ in range(3)]
    try:
        wait_until(lambda: settled(members, partitions), f'3 {protocol} members settled', timeout=180)
        started = time.perf_counter()
        members.append(Member(bootstrap, topic, f'{topic}-g', configs))
        wait_until(lambda: settled(members, partitions), f'4 {protocol} members settled', timeout=180)
        return time.perf_counter() - started
    finally:
        for member in members:
            member.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--partitions', type=int, default=120)
    args = parser.parse_args()
    cluster = shared_cluster()
    seconds: dict[str, list[float]] = {protocol: [] for protocol in PROTOCOL_CONFIGS}
    try:
        for round_number in range(args.rounds):
            order = list(PROTOCOL_CONFIGS)[::1 if round_number % 2 == 0 else -1]
            for protocol in order:
                seconds[protocol].append(one_round(cluster.bootstrap_servers, protocol, args.partitions))
    finally:
        close_shared_clusters()
    print(f'| 4th member joins 3 over {args.partitions} partitions (Apache Kafka 4.4) | median s | rounds s |')
    print('|---|---:|---|')
    for protocol, values in seconds.items():
        print(f"| group_protocol='{protocol}' | {statistics.median(values):.2f} | "
              f"{', '.join(f'{v:.2f}' for v in values)} |")


if __name__ == '__main__':
    main()
