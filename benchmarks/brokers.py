"""The brokers benchmarks run against, each in its own process(es): the reference cluster
(``python -m kafka_kip broker``), Tansu (integration/tansu.py) and Apache Kafka
(kafka_kip_reference.external.apache_kafka); and topic set-up done in a child interpreter, so the benchmark's
own process stays free of client state.

Every broker has ``bootstrap_servers`` and ``close()``; :func:`running` starts several by name and closes them.
This module imports nothing of kafka_kip at import time (the phases that import it are kafka-python's own).
"""
from __future__ import annotations

import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol

from benchmarks.harness import PHASE_TIMEOUT_S, BenchmarkError, run_phase

BOOTSTRAP_LINE = re.compile(r'127\.0\.0\.1:\d+(?:,127\.0\.0\.1:\d+)*')
NAMES = ('reference', 'tansu', 'apache-kafka')


class Broker(Protocol):
    bootstrap_servers: str

    def close(self) -> None: ...


class ReferenceBrokerProcess:
    """``python -m kafka_kip broker`` in a child process; the bootstrap is read from its stdout."""

    name = 'reference'

    def __init__(self, brokers: int = 1, ready_timeout: float = 120.0, extra_args: Sequence[str] = ()) -> None:
        """``extra_args``: more ``kafka-kip broker`` arguments (e.g. ``('--features', 'kip.232')``)."""
        self._stderr = tempfile.TemporaryFile()
        command = [sys.executable, '-m', 'kafka_kip', 'broker', '--brokers', str(brokers), *extra_args]
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=self._stderr)
        try:
            self.bootstrap_servers = self._read_bootstrap(ready_timeout)
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        """The broker process (for its CPU time)."""
        return self._process.pid

    def _read_bootstrap(self, timeout: float) -> str:
        assert self._process.stdout is not None
        deadline = time.monotonic() + timeout
        seen = b''
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._process.stdout], [], [], 0.1)
            if ready:
                line = self._process.stdout.readline()
                if not line:
                    break
                seen += line
                match = BOOTSTRAP_LINE.search(line.decode(errors='replace'))
                if match:
                    return match.group(0)
        raise BenchmarkError(f'reference broker printed no bootstrap servers; stdout={seen!r} '
                             f'stderr={self._stderr_text()!r}')

    def _stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors='replace')[-4000:]

    def close(self) -> None:
        """SIGINT (what Ctrl-C sends), then SIGKILL if it does not exit within 10 s."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()


class TansuBrokerProcess:
    """Tansu (memory storage, ephemeral port): integration/tansu.py's broker."""

    name = 'tansu'

    def __init__(self) -> None:
        # imported here: integration imports kafka_kip, and the phases that import this module must not
        from integration.tansu import TansuBroker

        self._broker = TansuBroker().start()
        self.bootstrap_servers = self._broker.bootstrap_servers

    def close(self) -> None:
        self._broker.close()


def apache_kafka(brokers: int = 1, broker_config: Mapping[str, object] | None = None) -> Any:
    """Apache Kafka (``$KAFKA_VERSION``, KRaft) started: kafka_kip_reference.external.apache_kafka's cluster."""
    from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster

    return ApacheKafkaCluster(brokers=brokers, broker_config=broker_config).start()


def start(name: str) -> Broker:
    """One broker of :data:`NAMES`, started (one node each)."""
    if name == 'reference':
        return ReferenceBrokerProcess()
    if name == 'tansu':
        return TansuBrokerProcess()
    if name == 'apache-kafka':
        return apache_kafka()
    raise ValueError(f'unknown broker {name!r}; brokers are {", ".join(NAMES)}')


@contextmanager
def running(names: Sequence[str], say: Callable[[str], None] | None = None) -> Iterator[dict[str, Broker]]:
    """The brokers ``names``, started in order and closed on exit (also when one fails to start)."""
    with ExitStack() as stack:
        started: dict[str, Broker] = {}
        for name in names:
            started[name] = broker = start(name)
            stack.callback(broker.close)
            if say is not None:
                say(f'{name}: {broker.bootstrap_servers}')
        yield started


# -- topics (phases of their own: run with run_phase, or called directly where the process may hold clients) ---

def create_topic(bootstrap_servers: str, topic: str, partitions: int = 1, replication_factor: int = 1) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_topics({topic: {'num_partitions': partitions, 'replication_factor': replication_factor}},
                            wait_for_metadata=True)
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, count: int, value: bytes) -> float:
    """One warm-up record, then ``count`` records to partition 0 with unmodified kafka-python (acks=1, linger 5 ms,
    128 KiB batches); the seconds until every one was acknowledged."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=128 * 1024)
    try:
        producer.send(topic, value, partition=0).get(timeout=30)
        send = producer.send
        start_ = time.perf_counter()
        for _ in range(count):
            send(topic, value, partition=0)
        producer.flush(timeout=PHASE_TIMEOUT_S)
        return time.perf_counter() - start_
    finally:
        producer.close()


def fill(bootstrap: str, topic: str, count: int, record_size: int) -> None:
    """``count`` + 1 records of ``record_size`` bytes on partition 0 of a new ``topic`` (kafka-python, untimed)."""
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, count, b'x' * record_size)


def end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    return end_offsets(bootstrap, topic, partition + 1)[partition]


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The end offsets of partitions 0..``partitions`` - 1 of ``topic`` (zeros while the topic does not exist)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        if not consumer.partitions_for_topic(topic):
            return [0] * partitions
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = consumer.end_offsets(tps)
        return [ends[tp] for tp in tps]
    finally:
        consumer.close()


def create_topic_in_child(bootstrap: str, topic: str, partitions: int = 1) -> None:
    run_phase('benchmarks.brokers:create_topic', bootstrap, topic, partitions, label=f'create {topic}', kafka_kip=None)


def fill_in_child(bootstrap: str, topic: str, count: int, record_size: int) -> None:
    run_phase('benchmarks.brokers:fill', bootstrap, topic, count, record_size, label=f'fill {topic}', kafka_kip=None,
              timeout=PHASE_TIMEOUT_S)
