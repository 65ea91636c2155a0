"""Partition expansion, the Java client's answer beside ours (issue #22): records never seen and per-key order
inversions while a topic grows from 4 to 8 partitions under a consumer group with ``auto.offset.reset=latest``.

Each row runs on its own single-broker cluster: Apache Kafka 4.4.0 (:mod:`kafka_kip_reference.external.apache_kafka`), or
for the last row the reference cluster (KIP-253 on). The keyed producer and the Python consumer groups are the
demo's expansion scene's (:mod:`kafka_kip_reference.demo.expansion_group`, in a :class:`~kafka_kip_reference.fixtures.fresh.FreshProcess`:
kafka-python's rows never import kafka_kip); the Java rows run ``benchmarks/java/ExpansionConsumer.java`` with
kafka-clients 4.4.0 from Maven Central beside a stock kafka-python producer. Steps of a row: the group (2 members,
metadata refreshed every second) joins ``t`` (4 partitions); the producer sends 48 keys, values in send order;
after ``GROW_AT`` records ``t`` grows to 8 and the producer writes on up to ``TOTAL``; once the group returned
nothing new for ``QUIET_S`` the row is counted (:func:`kafka_kip_reference.demo.expansion.count` for the inversions):

- never seen before growth: records sent before the expansion the group never returned (a group that joins
  with ``latest`` misses what was written before it was assigned);
- never seen after growth: records sent after the expansion returned the group never returned (``latest`` on a
  partition the group discovers after records were written to it skips them);
- inversions: a record returned after a later record of its key (in the order poll returns were printed).

KIP-1327's ``auto.offset.reset.new.partitions`` is not in kafka-clients 4.4.0's ConsumerConfig, so it has no row.

    python -m benchmarks.bench_expansion
"""
from __future__ import annotations

import hashlib
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from kafka.admin import NewPartitions

from benchmarks.harness import Column, Table, parser, render
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.demo.expansion import KEYS, count
from kafka_kip_reference.external import maven
from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.fresh import FreshProcess

KAFKA_CLIENTS = 'org.apache.kafka:kafka-clients:4.4.0'
SOURCE = Path(__file__).parent / 'java' / 'ExpansionConsumer.java'
GROUP_SCRIPT = Path(__file__).resolve().parent.parent / 'kafka_kip_reference' / 'demo' / 'expansion_group.py'
WARM_UP = 20  # records the producer may send ahead while the group joins
TRICKLE_S = 0.5  # between two warm-up steps
GROW_AT = 1500
TOTAL = 4000
MEMBERS = 2
QUIET_S = 5.0
TIMEOUT_S = 120.0
PRODUCER = {'linger_ms': 5, 'metadata_max_age_ms': 1000}
CONSUMER = {'auto_offset_reset': 'latest', 'metadata_max_age_ms': 1000, 'heartbeat_interval_ms': 100,
            'session_timeout_ms': 3000, 'max_poll_records': 100}
BROKER = {'group.min.session.timeout.ms': 1000}


@dataclass
class Row:
    name: str
    sent: int
    lost_before: int
    lost_after: int
    duplicated: int
    inversions: int


def java_command() -> list[str]:
    """The command line that runs ExpansionConsumer (compiled into the kafka-kip cache on first use)."""
    java, javac = maven.require_tool('java'), maven.require_tool('javac')
    jars = maven.resolve('kafka-clients', [KAFKA_CLIENTS])
    source = SOURCE.read_bytes()
    classes = maven.cache_dir() / 'java' / hashlib.sha256(source + KAFKA_CLIENTS.encode()).hexdigest()[:12]
    with maven.file_lock(classes.with_suffix('.lock')):
        if not (classes / 'ExpansionConsumer.class').exists():
            classes.mkdir(parents=True, exist_ok=True)
            subprocess.run([javac, '-d', str(classes), '-cp', f'{jars}/*', str(SOURCE)], check=True)
    return [java, '-Xmx256m', '-XX:TieredStopAtLevel=1', '-cp', f'{classes}:{jars}/*', 'ExpansionConsumer']


class JavaGroup:
    """ExpansionConsumer in a JVM; ``returned`` collects [key, value, partition, offset, member] in print order."""

    def __init__(self, command: list[str], bootstrap: str, reset: str) -> None:
        self.returned: list[list[object]] = []
        self._process = subprocess.Popen([*command, bootstrap, 't', f'g-{uuid.uuid4().hex[:8]}', reset, str(MEMBERS)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            key, value, partition, offset, member = line.split()
            self.returned.append([key, int(value), int(partition), int(offset), member])

    def returned_count(self) -> int:
        return len({value for _, value, *_ in list(self.returned)})

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        finally:
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout=10)


def settle(returned_count: Callable[[], int]) -> None:
    """Wait until the group returned nothing new for QUIET_S (records it never saw never come)."""
    deadline, last, since = time.monotonic() + TIMEOUT_S, -1, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < QUIET_S:
        now = returned_count()
        if now != last:
            last, since = now, time.monotonic()
        time.sleep(0.2)


def grow(cluster: ApacheKafkaCluster | ReferenceCluster) -> None:
    if isinstance(cluster, ReferenceCluster):
        cluster.create_partitions('t', 8)
        return
    with cluster.admin() as admin:
        admin.create_partitions({'t': NewPartitions(8)})


def run_row(name: str, cluster: AbstractContextManager, *, kip: bool, java: list[str] | None = None,
            reset: str = 'latest') -> Row:
    """One row: the group (Java with ``reset`` when ``java`` is given, else the Python client) through 4 -> 8."""
    with cluster as kafka, FreshProcess(GROUP_SCRIPT, stock=not kip, timeout=300) as process:
        kafka.create_topic('t', 4, 1)
        process.call('start', kip, kafka.bootstrap_servers, PRODUCER)
        java_group = JavaGroup(java, kafka.bootstrap_servers, reset) if java else None
        try:
            if java_group is None:
                process.call('start_group', kafka.bootstrap_servers, MEMBERS, CONSUMER)
            returned_count = java_group.returned_count if java_group else (lambda: process.call('returned_count'))
            process.call('start_producing', KEYS, TOTAL, WARM_UP)

            def warmed_up() -> bool:  # the producer trickles on until the group (joined with latest) returns records
                time.sleep(TRICKLE_S)
                process.call('allow', min(GROW_AT, process.call('sent') + WARM_UP))
                return returned_count() > 0

            wait_until(warmed_up, 'the group returning records', timeout=TIMEOUT_S)
            process.call('allow', GROW_AT)
            wait_until(lambda: process.call('sent') >= GROW_AT, f'{GROW_AT} records sent', timeout=TIMEOUT_S)
            grow(kafka)
            mark = process.call('mark')
            wait_until(lambda: process.call('partition_count') == 8, 'the producer partitioning by 8',
                       timeout=TIMEOUT_S)
            process.call('allow', TOTAL)
            process.call('stop_producing')
            settle(returned_count)
            outcome = process.call('result')
        finally:
            if java_group:
                java_group.close()
        if java_group:
            outcome['returned'] = java_group.returned
    seen = {value for _, value, *_ in outcome['returned']}
    counted = count(name, outcome)
    total = len(outcome['sent'])
    return Row(name, total, sum(v not in seen for v in range(mark)), sum(v not in seen for v in range(mark, total)),
               counted.duplicated, counted.inversions)


def table(rows: list[Row]) -> Table:
    made = Table([Column('', left=True), Column('sent', ','), Column('never seen before growth'),
                  Column('never seen after growth'), Column('returned twice'), Column('key order inversions')],
                 title=f'partition expansion: {MEMBERS} consumers (auto.offset.reset=latest) read t while a keyed '
                       f'producer writes {TOTAL:,} records and t grows 4 -> 8 after {GROW_AT:,}:')
    for r in rows:
        made.add(r.name, r.sent, r.lost_before, r.lost_after, r.duplicated, r.inversions)
    return made


def main(argv: Sequence[str] | None = None) -> int:
    args = parser('bench_expansion', __doc__).parse_args(argv)
    java = java_command()
    apache = lambda: ApacheKafkaCluster(brokers=1, broker_config=BROKER)  # noqa: E731
    rows = [
        run_row('Java consumer 4.4.0, latest', apache(), kip=False, java=java),
        run_row('Java consumer 4.4.0, by_duration:PT1M', apache(), kip=False, java=java, reset='by_duration:PT1M'),
        run_row('kafka-python 3.0.12 (another process)', apache(), kip=False),
        run_row('kafka_kip on Apache Kafka (KIP-253 degraded)', apache(), kip=True),
        run_row('kafka_kip on the reference cluster (KIP-253)', ReferenceCluster(brokers=1, broker_config=BROKER),
                kip=True),
    ]
    print(render([table(rows)], as_json=args.json))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
