"""Soak of ``kafka-kip mirror`` run as a service (not part of the test suite: it runs for half an hour).

Two reference clusters of three brokers (replication factor 3) in this process; a producer writes to the source
continuously (``--rate`` records/s, acks=all); ``kafka-kip mirror --json --metrics-port 0`` runs in a child process.
Every ``--restart-every`` seconds one broker of each cluster is stopped and, ``--down`` seconds later, started
again (round robin over the brokers); at a quarter of the run the mirror is killed with SIGKILL and started again.
Every ``--sample-every`` seconds the mirror's RSS and open file descriptors are read from /proc and its metrics
endpoint is scraped. At the end the producer stops, the mirror is waited for until its metrics show no lag, it
gets SIGTERM, and the target is compared with the source record by record: records lost, duplicated, or at
another offset than on the source (all must be 0), plus what the producer had acknowledged and the source lacks.

    python -m benchmarks.soak_mirror [--minutes 30] [--rate 100] [--partitions 6] [--restart-every 180] [--json]
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import kafka
from kafka.structs import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.harness import Column, Table, progress
from benchmarks.harness import parser as harness_parser
from kafka_kip_reference import ReferenceCluster

REPO = Path(__file__).resolve().parents[1]
TOPIC = 'soak'
#: RSS and descriptors of a mirror process are compared from this long after its start (connections, caches).
WARM_UP_S = 120.0


@dataclass
class Sample:
    """One look at the mirror: its process, and what its metrics endpoint said."""

    at_s: float
    pid: int
    rss_kib: int
    fds: int
    lag: float | None
    copied: float | None
    incidents: float | None


@dataclass
class Comparison:
    """The target's log against the source's, record by record (a record is its key and value)."""

    source_records: int = 0
    target_records: int = 0
    lost: int = 0
    duplicated: int = 0
    offset_mismatches: int = 0
    not_from_source: int = 0
    acknowledged_not_on_source: int = 0


@dataclass
class SoakReport:
    minutes: float
    produced: int
    acknowledged: int
    produce_failures: int
    broker_restarts: list[str] = field(default_factory=list)
    mirror_exit_codes: list[int | None] = field(default_factory=list)
    incidents: dict[str, int] = field(default_factory=dict)
    warnings: int = 0
    comparison: Comparison = field(default_factory=Comparison)
    samples: list[Sample] = field(default_factory=list)
    catch_up_s: float = 0.0


class MirrorProcess:
    """``kafka-kip mirror --json --metrics-port 0`` in a child process; its stderr events kept in a log file."""

    def __init__(self, source: ReferenceCluster, target: ReferenceCluster, log: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'kafka_kip', 'mirror', '--json', '--source', source.bootstrap_servers,
             '--target', target.bootstrap_servers, '--topics', TOPIC, '--metrics-port', '0',
             '--shutdown-timeout-ms', '20000'],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.started = time.monotonic()
        self.url: str | None = None
        self.incidents: Counter[str] = Counter()
        self.warnings = 0
        self._log = log.open('a', encoding='utf-8')
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self._log.write(line)
            self._log.flush()
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get('event') == 'metrics':
                self.url = event['url'].replace('0.0.0.0', '127.0.0.1')
            elif event.get('event') == 'incident':
                self.incidents[event['kind']] += 1
            elif event.get('event') == 'log':
                self.warnings += 1

    def wait_for_metrics(self, timeout_s: float = 60) -> str:
        deadline = time.monotonic() + timeout_s
        while self.url is None:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f'the mirror announced no metrics endpoint (exit code {self.process.poll()})')
            time.sleep(0.1)
        return self.url

    def scrape(self) -> dict[str, float]:
        """Sums over the topic's partitions: lag, records copied, incidents; plus how many partitions report lag."""
        if self.url is None:
            return {}
        try:
            with urllib.request.urlopen(self.url, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return {}
        sums: Counter[str] = Counter()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in ('kafka_kip_mirror_lag_records', 'kafka_kip_mirror_copied_records_total',
                              'kafka_kip_mirror_incidents_total'):
                    sums[s.name] += s.value
                    if s.name == 'kafka_kip_mirror_lag_records':
                        sums['partitions_with_lag'] += 1
        return dict(sums)

    def look(self, at_s: float) -> Sample | None:
        pid = self.process.pid
        try:
            status = Path(f'/proc/{pid}/status').read_text()
            fds = len(os.listdir(f'/proc/{pid}/fd'))
        except OSError:
            return None
        rss = next((int(line.split()[1]) for line in status.splitlines() if line.startswith('VmRSS:')), None)
        if rss is None:  # it exited (a zombie until waited for)
            return None
        metrics = self.scrape()
        return Sample(round(at_s, 1), pid, rss, fds, metrics.get('kafka_kip_mirror_lag_records'),
                      metrics.get('kafka_kip_mirror_copied_records_total'),
                      metrics.get('kafka_kip_mirror_incidents_total'))

    def kill(self) -> int | None:
        self.process.kill()
        return self._end()

    def terminate(self, timeout_s: float = 60) -> int | None:
        self.process.send_signal(signal.SIGTERM)
        return self._end(timeout_s)

    def _end(self, timeout_s: float = 30) -> int | None:
        self.process.stdout.read()
        code = self.process.wait(timeout_s)
        self._reader.join(10)
        self._log.close()
        return code


class Producer:
    """Writes numbered records to the source at ``rate`` records/s in its own thread until stopped."""

    def __init__(self, cluster: ReferenceCluster, rate: int, record_size: int) -> None:
        self._producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all', linger_ms=5,
                                             retries=2**31 - 1, delivery_timeout_ms=600_000,
                                             request_timeout_ms=10_000)
        self._rate = rate
        self._padding = b'.' * max(0, record_size - 12)
        self.sent = 0
        self.acknowledged: set[bytes] = set()
        self.failures = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        tick = 0.1
        per_tick = max(1, round(self._rate * tick))
        next_tick = time.monotonic()
        while not self._stop.is_set():
            for _ in range(per_tick):
                value = b'%012d' % self.sent + self._padding
                future = self._producer.send(TOPIC, key=b'%d' % (self.sent % 97), value=value)
                future.add_callback(self._acked, value)
                future.add_errback(self._failed)
                self.sent += 1
            next_tick += tick
            self._stop.wait(max(0.0, next_tick - time.monotonic()))

    def _acked(self, value: bytes, metadata: Any) -> None:
        with self._lock:
            self.acknowledged.add(value)

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self.failures += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._producer.flush()
        self._producer.close()


def compare(source: ReferenceCluster, target: ReferenceCluster, partitions: int,
            acknowledged: set[bytes]) -> Comparison:
    out = Comparison()
    on_source: set[bytes] = set()
    for p in range(partitions):
        tp = TopicPartition(TOPIC, p)
        src = {(r.key, r.value): r.offset for r in source.records(tp)}
        dst = [(r.offset, (r.key, r.value)) for r in target.records(tp)]
        on_source.update(value for _, value in src)
        copies = Counter(record for _, record in dst)
        out.source_records += len(src)
        out.target_records += len(dst)
        out.lost += sum(1 for record in src if record not in copies)
        out.duplicated += sum(n - 1 for n in copies.values() if n > 1)
        out.offset_mismatches += sum(1 for offset, record in dst if src.get(record, offset) != offset)
        out.not_from_source += sum(1 for record in copies if record not in src)
    out.acknowledged_not_on_source = len(acknowledged - on_source)
    return out


def wait_caught_up(mirror: MirrorProcess, partitions: int, timeout_s: float) -> float:
    """Seconds until the mirror's metrics show every partition with lag 0."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        metrics = mirror.scrape()
        if metrics.get('partitions_with_lag') == partitions and metrics.get('kafka_kip_mirror_lag_records') == 0:
            return time.monotonic() - started
        time.sleep(1)
    raise RuntimeError(f'the mirror did not catch up within {timeout_s} s: {mirror.scrape()}')


def soak(minutes: float, rate: int, partitions: int, record_size: int, restart_every_s: float, down_s: float,
         sample_every_s: float, log: Path, say: Any) -> SoakReport:
    duration = minutes * 60
    with ReferenceCluster(brokers=3) as source, ReferenceCluster(brokers=3) as target:
        source.create_topic(TOPIC, partitions=partitions, replication_factor=3)
        producer = Producer(source, rate, record_size)
        producer.start()
        mirror = MirrorProcess(source, target, log)
        mirror.wait_for_metrics()
        report = SoakReport(minutes, 0, 0, 0)
        started = time.monotonic()
        next_restart = started + restart_every_s
        next_sample = started
        kill_at = started + duration / 4
        victim = 0
        processes = [mirror]
        while (now := time.monotonic()) < started + duration:
            if mirror.process.poll() is not None:
                raise RuntimeError(f'the mirror exited on its own after {now - started:.0f} s with code '
                                   f'{mirror.process.returncode} (its stderr: {log})')
            if now >= next_sample:
                look = mirror.look(now - started)
                if look is not None:
                    report.samples.append(look)
                    say(f'{look.at_s:7.0f}s pid {look.pid} rss {look.rss_kib} KiB fds {look.fds} lag {look.lag} '
                        f'copied {look.copied} sent {producer.sent}')
                next_sample += sample_every_s
            if now >= kill_at:
                kill_at = float('inf')
                report.mirror_exit_codes.append(mirror.kill())
                say(f'mirror {mirror.process.pid} killed with SIGKILL; starting it again')
                mirror = MirrorProcess(source, target, log)
                processes.append(mirror)
                mirror.wait_for_metrics()
            if now >= next_restart:
                broker = source.state.broker_ids[victim % 3]
                say(f'stopping broker {broker} of the source and of the target for {down_s} s')
                source.stop_broker(broker)
                target.stop_broker(broker)
                time.sleep(down_s)
                source.start_broker(broker)
                target.start_broker(broker)
                report.broker_restarts.append(f'{round(now - started)}s: broker {broker} of each cluster')
                victim += 1
                next_restart += restart_every_s
            time.sleep(0.5)
        producer.stop()
        say(f'producer stopped: {producer.sent} sent, {len(producer.acknowledged)} acknowledged, '
            f'{producer.failures} failed; waiting for the mirror to catch up')
        report.catch_up_s = round(wait_caught_up(mirror, partitions, 600), 1)
        look = mirror.look(time.monotonic() - started)
        if look is not None:
            report.samples.append(look)
        report.mirror_exit_codes.append(mirror.terminate())
        report.produced, report.acknowledged, report.produce_failures = (
            producer.sent, len(producer.acknowledged), producer.failures)
        report.incidents = dict(sum((p.incidents for p in processes), Counter()))
        report.warnings = sum(p.warnings for p in processes)
        report.comparison = compare(source, target, partitions, producer.acknowledged)
    return report


def growth(samples: list[Sample]) -> list[dict[str, Any]]:
    """Per mirror process: RSS and descriptors at the end of the warm-up, at its last sample, and the maximum."""
    out = []
    for pid in dict.fromkeys(s.pid for s in samples):
        mine = [s for s in samples if s.pid == pid]
        warm = [s for s in mine if s.at_s - mine[0].at_s >= WARM_UP_S] or mine[-1:]
        out.append({'pid': pid, 'seconds': round(mine[-1].at_s - mine[0].at_s), 'samples': len(mine),
                    'rss_kib_after_warm_up': warm[0].rss_kib, 'rss_kib_last': mine[-1].rss_kib,
                    'rss_kib_max_after_warm_up': max(s.rss_kib for s in warm),
                    'fds_after_warm_up': warm[0].fds, 'fds_last': mine[-1].fds,
                    'fds_max_after_warm_up': max(s.fds for s in warm)})
    return out


def format_report(report: SoakReport) -> str:
    c = report.comparison
    lines = [
        f'soak: {report.minutes} min, {report.produced} records produced ({report.acknowledged} acknowledged, '
        f'{report.produce_failures} failed), {len(report.broker_restarts)} broker restarts per cluster, '
        '1 SIGKILL of the mirror',
        f'mirror exit codes: {report.mirror_exit_codes} (SIGKILL, then SIGTERM at the end); caught up '
        f'{report.catch_up_s} s after the producer stopped; incidents {report.incidents or "none"}; '
        f'{report.warnings} warning/error log lines',
        f'records: source {c.source_records}, target {c.target_records}; lost {c.lost}, duplicated {c.duplicated}, '
        f'offset mismatches {c.offset_mismatches}, not from the source {c.not_from_source}; acknowledged but not on the source {c.acknowledged_not_on_source}',
    ]
    table = Table([Column('mirror pid'), Column('seconds'), Column('RSS KiB after warm-up'), Column('RSS KiB last'),
                   Column('RSS KiB max'), Column('fds after warm-up'), Column('fds last'), Column('fds max')])
    for g in growth(report.samples):
        table.add(g['pid'], g['seconds'], g['rss_kib_after_warm_up'], g['rss_kib_last'],
                  g['rss_kib_max_after_warm_up'], g['fds_after_warm_up'], g['fds_last'], g['fds_max_after_warm_up'])
    lines += ['', table.render(markdown=True)]
    return '\n'.join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = harness_parser('soak_mirror', __doc__.splitlines()[0])
    parser.add_argument('--minutes', type=float, default=30, help='how long the producer runs (default 30)')
    parser.add_argument('--rate', type=int, default=100, help='records/s produced (default 100)')
    parser.add_argument('--partitions', type=int, default=6, help='partitions of the source topic (default 6)')
    parser.add_argument('--record-size', type=int, default=100, help='value bytes per record (default 100)')
    parser.add_argument('--restart-every', type=float, default=180,
                        help='seconds between broker restarts (default 180)')
    parser.add_argument('--down', type=float, default=10, help='seconds a restarted broker stays down (default 10)')
    parser.add_argument('--sample-every', type=float, default=15, help='seconds between samples (default 15)')
    parser.add_argument('--log', type=Path, default=Path('soak_mirror.log'),
                        help="the mirror's stderr JSON lines (default soak_mirror.log)")
    args = parser.parse_args(argv)
    report = soak(args.minutes, args.rate, args.partitions, args.record_size, args.restart_every, args.down,
                  args.sample_every, args.log, progress)
    if args.json:
        print(json.dumps({**asdict(report), 'growth': growth(report.samples)}, indent=2))
    else:
        print(format_report(report))
    c = report.comparison
    return 0 if (c.lost, c.duplicated, c.offset_mismatches, c.not_from_source) == (0, 0, 0, 0) and report.mirror_exit_codes[-1] == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
