"""``kafka-kip mirror`` as a service: metrics over HTTP, signals, JSON output, several flows, topics found while running."""
from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import kafka
import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from kafka_kip.mirror import Mirror
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.control import Delay
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.mirror.helpers import commit_groups, committed_offsets, contents, copied, mirror_cli, running

PRODUCE = ApiKey.Produce


def produce(cluster: ReferenceCluster, topic: str, per_partition: dict[int, int], tag: str = 'v') -> None:
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5)
    for partition, count in per_partition.items():
        for i in range(count):
            producer.send(topic, value=f'{tag}-{partition}-{i}'.encode(), partition=partition)
    producer.flush()
    producer.close()


class MirrorProcess:
    """``kafka-kip mirror --json ...`` in a child process; its stderr read line by line as JSON events."""

    def __init__(self, *args: str) -> None:
        self.process = mirror_cli('--json', *args)
        self.events: list[dict] = []
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line)
            self.events.append(json.loads(line))

    def metrics_url(self) -> str:
        return wait_until(lambda: next((e['url'] for e in self.events if e['event'] == 'metrics'), None),
                          'the metrics endpoint announced')

    def finish(self, timeout: float = 60) -> tuple[int, dict]:
        """Wait for the exit; (exit code, the JSON summary on stdout)."""
        out = self.process.stdout.read()
        self.process.wait(timeout)
        self._reader.join(10)
        return self.process.returncode, json.loads(out) if out.strip() else {}

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """The samples at ``url`` as ``{(name, sorted labels): value}``."""
    with urllib.request.urlopen(url.replace('0.0.0.0', '127.0.0.1'), timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def partition_labels(flow: str, topic: str, partition: int, target_topic: str | None = None) -> dict[str, str]:
    return {'flow': flow, 'topic': topic, 'partition': str(partition), 'target_topic': target_topic or topic}


def test_metrics_are_scraped_over_http_while_copying_and_count_what_was_copied(reference_cluster_factory) -> None:
    source = reference_cluster_factory(brokers=3)
    target = reference_cluster_factory(brokers=1)
    source.create_topic('orders', partitions=2, replication_factor=3)
    tp0 = TopicPartition('orders', 0)
    produce(source, 'orders', {0: 100, 1: 60})
    mirror = MirrorProcess('--source', source.bootstrap_servers, '--target', target.bootstrap_servers,
                           '--topics', 'orders', '--metrics-port', '0')
    try:
        url = mirror.metrics_url()
        flow = 'source->target'
        p0, p1 = partition_labels(flow, 'orders', 0), partition_labels(flow, 'orders', 1)

        def copied(n0: int, n1: int) -> dict | None:
            samples = scrape(url)
            done = (sample(samples, 'kafka_kip_mirror_copied_records_total', **p0),
                    sample(samples, 'kafka_kip_mirror_copied_records_total', **p1),
                    sample(samples, 'kafka_kip_mirror_lag_records', **p0),
                    sample(samples, 'kafka_kip_mirror_lag_records', **p1)) == (n0, n1, 0, 0)
            return samples if done else None

        samples = wait_until(lambda: copied(100, 60), 'every record counted and the lag at 0')
        assert sample(samples, 'kafka_kip_mirror_flow_up', flow=flow) == 1
        assert sample(samples, 'kafka_kip_mirror_partition_state', **p0, state='copying') == 1
        assert sample(samples, 'kafka_kip_mirror_partition_state', **p0, state='stopped') == 0
        assert sample(samples, 'kafka_kip_mirror_copied_bytes_total', **p0) > 100 * 10
        assert sample(samples, 'kafka_kip_mirror_last_copied_age_seconds', **p0) >= 0
        assert sample(samples, 'kafka_kip_mirror_produce_latency_seconds_count', flow=flow) >= 1
        assert sample(samples, 'kafka_kip_mirror_requests_total', flow=flow, cluster='target',
                      api='InitProducerId') == 1
        assert sample(samples, 'kafka_kip_mirror_incidents_total', flow=flow, kind='truncation') is None

        # an unclean election loses 30 records the mirror copied: a truncation incident
        lagging = next(b for b in source.replicas(tp0) if b != source.leader(tp0))
        source.pause_replication(tp0, lagging)
        produce(source, 'orders', {0: 30}, tag='doomed')
        wait_until(lambda: copied(130, 60), 'the doomed records copied')
        source.elect_leader(tp0, lagging, unclean=True)
        produce(source, 'orders', {0: 5}, tag='after')
        samples = wait_until(lambda: (s := scrape(url)) and sample(
            s, 'kafka_kip_mirror_incidents_total', flow=flow, kind='truncation') == 1 and s,
            'the truncation counted')
        assert sample(samples, 'kafka_kip_mirror_partition_state', **p0, state='stopped') == 1
        assert sample(samples, 'kafka_kip_mirror_partition_state', **p1, state='copying') == 1
        # the stopped partition's lag follows the source: copied up to 100, the source now ends at 145
        produce(source, 'orders', {0: 40}, tag='later')
        wait_until(lambda: sample(scrape(url), 'kafka_kip_mirror_lag_records', **p0) == 45,
                   "the stopped partition's lag at 45")
        mirror.process.send_signal(signal.SIGTERM)
        code, summary = mirror.finish()
    finally:
        mirror.kill()
    # --json: stdout held the summary only (json.loads took all of it); the incident went to stderr as it happened
    assert code == 2 and (summary['exit_code'], summary['shutdown']) == (2, 'clean')
    assert [i['kind'] for i in summary['incidents']] == ['truncation'] and summary['incidents_by_kind'] == \
        {'truncation': 1}
    assert [(e['kind'], e['source'], e['lost']) for e in mirror.events if e['event'] == 'incident'] == \
        [('truncation', 'orders-0', [100, 130])]
    assert all(json.loads(line) for line in mirror.lines)  # every stderr line is a JSON object
    assert [p['records'] for p in summary['partitions']] == [130, 60]
    assert [(p['state'], p['copied_to'], p['source_end'], p['lag']) for p in summary['partitions']] == \
        [('stopped', 100, 145, 45), ('copying', 60, 60, 0)]
    assert summary['produce_latency']['count'] >= 2 and summary['requests']['target']['InitProducerIdRequest'] == 1


@pytest.mark.parametrize(('how', 'exit_code'), [('one SIGTERM', 0), ('shutdown timed out', 3), ('two SIGTERMs', 143)])
def test_sigterm_mid_copy_then_a_restart_leaves_the_target_identical(reference_cluster_factory, how: str, exit_code: int) -> None:
    source = reference_cluster_factory(brokers=1)
    target = reference_cluster_factory(brokers=1)
    source.create_topic('orders', partitions=2, replication_factor=1)
    produce(source, 'orders', {0: 400, 1: 300})
    release = threading.Event()
    held: list[int] = []

    def hold_data(request):
        if request.client_id == 'kafka-kip-mirror-target' and any(
                data.name == 'orders' for data in request.request.topic_data):
            held.append(request.correlation_id)
            return Delay(until=release)
        return None

    hold = target.control(PRODUCE, hold_data, keep=True)
    mirror = MirrorProcess('--source', source.bootstrap_servers, '--target', target.bootstrap_servers,
                           '--topics', 'orders', '--shutdown-timeout-ms', '500' if how == 'shutdown timed out'
                           else '20000')
    try:
        wait_until(lambda: held, 'a write of the mirror in flight')
        mirror.process.send_signal(signal.SIGTERM)
        if how == 'two SIGTERMs':
            wait_until(lambda: any(e['event'] == 'stopping' for e in mirror.events), 'the first signal handled')
            mirror.process.send_signal(signal.SIGTERM)
        if how == 'one SIGTERM':
            release.set()  # the writes in flight are answered: the mirror finishes them and what it read
        code, summary = mirror.finish()
    finally:
        release.set()
        hold.remove()
        mirror.kill()
    assert code == exit_code
    if how == 'one SIGTERM':
        assert (summary['shutdown'], summary['exit_code']) == ('clean', 0)
        # a clean stop: no incident, no warning of the mirror's (kafka-python's own, e.g. a slow event loop
        # on a loaded machine, are not the mirror's)
        assert [e['event'] for e in mirror.events if not e.get('logger', '').startswith('kafka.')] == ['stopping']
    elif how == 'shutdown timed out':
        assert (summary['shutdown'], summary['exit_code']) == ('timed-out', 3)
    else:
        assert summary == {}  # exited at once, no summary
    restart = MirrorProcess('--source', source.bootstrap_servers, '--target', target.bootstrap_servers,
                            '--topics', 'orders', '--stop-at-end')
    code, summary = restart.finish()
    assert (code, summary['incidents']) == (0, [])
    for p in (0, 1):
        assert contents(target, 'orders', p) == contents(source, 'orders', p)


def test_sigterm_writes_the_last_group_sync(reference_cluster_factory, tmp_path: Path) -> None:
    source = reference_cluster_factory(brokers=1)
    target = reference_cluster_factory(brokers=1)
    source.create_topic('orders', partitions=1, replication_factor=1)
    tp = TopicPartition('orders', 0)
    produce(source, 'orders', {0: 100})
    config = tmp_path / 'mm.properties'
    config.write_text(f'source.bootstrap.servers = {source.bootstrap_servers}\n'
                      f'target.bootstrap.servers = {target.bootstrap_servers}\n'
                      'topics = orders\ngroups = app\ngroup.sync.interval.ms = 3600000\n')
    mirror = MirrorProcess('--config', str(config))
    try:
        wait_until(lambda: target.topic_id('orders') and len(target.records(tp)) == 100, 'the records copied')
        commit_groups(source.bootstrap_servers, {'app': {tp: 60}})  # after the first sync: only the last has it
        mirror.process.send_signal(signal.SIGTERM)
        code, summary = mirror.finish()
    finally:
        mirror.kill()
    assert (code, summary['shutdown'], summary['groups']['committed']) == (0, 'clean', {'app': {'orders-0': 60}})
    assert committed_offsets(target.bootstrap_servers, ['app'], tp) == {'app': 60}


README = Path(__file__).resolve().parents[2] / 'README.md'


def readme_flows_config(path: Path, a: ReferenceCluster, b: ReferenceCluster) -> Path:
    """The README's two-flow properties block, pointed at ``a`` and ``b`` (later keys win, as in Java)."""
    text = README.read_text()
    section = text[text.index('### The mirror as a service'):]
    block = re.search(r'```properties\n(.*?)```', section, flags=re.S).group(1)
    path.write_text(block + f'a.bootstrap.servers = {a.bootstrap_servers}\nb.bootstrap.servers = {b.bootstrap_servers}\n'
                    'refresh.topics.interval.ms = 100\nmetrics.port = 0\n')
    return path


def test_two_flows_copy_each_side_once_and_never_loop(reference_cluster_factory, tmp_path: Path) -> None:
    a = reference_cluster_factory(brokers=1)
    b = reference_cluster_factory(brokers=1)
    a.create_topic('orders', partitions=2, replication_factor=1)
    b.create_topic('payments', partitions=1, replication_factor=1)
    produce(a, 'orders', {0: 30, 1: 20})
    produce(b, 'payments', {0: 25})
    mirror = MirrorProcess('--config', str(readme_flows_config(tmp_path / 'mm2.properties', a, b)))
    try:
        url = mirror.metrics_url()

        def discoveries() -> float:
            samples = scrape(url)
            return sum(sample(samples, 'kafka_kip_mirror_requests_total', flow=flow, cluster='source',
                              api='Metadata') or 0 for flow in ('a->b', 'b->a'))

        wait_until(lambda: b.topic_id('a.orders') and a.topic_id('b.payments')
                   and len(b.records(TopicPartition('a.orders', 0))) == 30
                   and len(b.records(TopicPartition('a.orders', 1))) == 20
                   and len(a.records(TopicPartition('b.payments', 0))) == 25, 'both sides copied')
        seen = discoveries()
        wait_until(lambda: discoveries() >= seen + 6, 'three more topic refreshes by each flow')
        samples = scrape(url)
        assert [sample(samples, 'kafka_kip_mirror_flow_up', flow=flow) for flow in ('a->b', 'b->a')] == [1, 1]
        mirror.process.send_signal(signal.SIGTERM)
        code, summary = mirror.finish()
    finally:
        mirror.kill()
    assert code == 0 and summary['exit_code'] == 0
    assert [p['target'] for p in summary['flows']['a->b']['partitions']] == ['a.orders-0', 'a.orders-1']
    assert [p['target'] for p in summary['flows']['b->a']['partitions']] == ['b.payments-0']
    # each topic copied once, to the other side; nothing copied back
    assert sorted(t for t in list(a.state.topics) if not t.startswith(('__', 'kafka-kip'))) == \
        ['b.payments', 'orders']
    assert sorted(t for t in list(b.state.topics) if not t.startswith(('__', 'kafka-kip'))) == \
        ['a.orders', 'payments']
    assert contents(b, 'a.orders', 0) == contents(a, 'orders', 0)
    assert contents(a, 'b.payments', 0) == contents(b, 'payments', 0)


def test_a_flow_that_fails_stops_alone_and_is_reported(reference_cluster_factory, tmp_path: Path) -> None:
    a = reference_cluster_factory(brokers=1)
    b = reference_cluster_factory(brokers=1)
    a.create_topic('orders', partitions=1, replication_factor=1)
    produce(a, 'orders', {0: 10})
    config = tmp_path / 'mm2.properties'
    config.write_text(f'clusters = a, b, c\na.bootstrap.servers = {a.bootstrap_servers}\n'
                      f'b.bootstrap.servers = {b.bootstrap_servers}\nc.bootstrap.servers = 127.0.0.1:1\n'
                      'c.request.timeout.ms = 1000\na->b.enabled = true\na->c.enabled = true\n'
                      'a->b.topic.prefix = dr.\n')
    mirror = MirrorProcess('--config', str(config), '--stop-at-end')
    code, summary = mirror.finish()
    assert code == 2 and summary['exit_code'] == 2
    assert (summary['flows']['a->b']['records'], summary['flows']['a->b']['exit_code']) == (10, 0)
    failure = summary['flows']['a->c']
    assert failure['exit_code'] == 1 and failure['error'].startswith('KafkaTimeoutError: target cluster')
    assert [(e['flow'], e['error']) for e in mirror.events if e['event'] == 'flow-failed'] == \
        [('a->c', failure['error'])]


def test_new_topics_and_partitions_are_mirrored_while_running(reference_cluster_factory) -> None:
    source = reference_cluster_factory(brokers=1)
    target = reference_cluster_factory(brokers=1)
    source.create_topic('orders', partitions=2, replication_factor=1)
    produce(source, 'orders', {0: 10, 1: 10})
    mirror = Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders|audit',
                    topic_refresh_interval_ms=100)
    with running(mirror):
        wait_until(lambda: target.topic_id('orders') and len(target.records(TopicPartition('orders', 1))) == 10,
                   'orders copied')
        source.create_topic('audit', partitions=1, replication_factor=1)
        produce(source, 'audit', {0: 7})
        source.create_partitions('orders', 4)  # a mirrored topic grows
        produce(source, 'orders', {2: 5, 3: 6, 0: 1})
        wait_until(lambda: (copied(target, 'audit', 0), copied(target, 'orders', 3), copied(target, 'orders', 2),
                            copied(target, 'orders', 0)) == (7, 6, 5, 11), 'the new topic and partitions copied')
    summary = mirror.result
    assert summary.topic_changes == ['created orders (2 partitions, replication factor 1)',
                                     'created audit (1 partitions, replication factor 1)',
                                     'grew orders from 2 to 4 partitions']
    assert (summary.records, summary.incidents, summary.exit_code) == (39, [], 0)
    for topic, partitions in (('orders', 4), ('audit', 1)):
        for p in range(partitions):
            assert contents(target, topic, p) == contents(source, topic, p)


def test_a_metrics_port_in_use_or_out_of_range_is_refused_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]
        mirror = MirrorProcess('--source', '127.0.0.1:1', '--target', '127.0.0.1:1', '--metrics-port', str(port))
        code, summary = mirror.finish()
    assert (code, summary) == (1, {})
    [refused] = mirror.events
    assert refused['event'] == 'error' and refused['message'].startswith(
        f'cannot serve metrics on 0.0.0.0:{port} (--metrics-port / metrics.port): ')
    mirror = MirrorProcess('--source', '127.0.0.1:1', '--target', '127.0.0.1:1', '--metrics-port', '70000')
    assert mirror.finish() == (1, {})
    assert mirror.events == [{'event': 'error', 'message': 'metrics port must be 0..65535 (0: any free port), got 70000'}]


@contextlib.contextmanager
def leader_down_behind_stale_metadata(cluster: ReferenceCluster, tp: TopicPartition) -> Iterator[None]:
    """``tp``'s leader stopped while the other broker answers metadata that still names it; both back on exit."""
    leader = cluster.leader(tp)
    other = next(b for b in cluster.state.broker_ids if b != leader)
    cluster.delay_metadata(other)
    cluster.stop_broker(leader)
    yield
    cluster.start_broker(leader)
    cluster.release_metadata(other)


def test_a_target_leader_down_while_the_metadata_still_names_it_delays_writes_only(reference_cluster_factory) -> None:
    source = reference_cluster_factory(brokers=1)
    target = reference_cluster_factory(brokers=2)
    source.create_topic('orders', partitions=1, replication_factor=1)
    tp = TopicPartition('orders', 0)
    produce(source, 'orders', {0: 10})
    mirror = Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders')
    with running(mirror) as runner:
        wait_until(lambda: target.topic_id('orders') and len(target.records(tp)) == 10, 'the first records copied')
        with leader_down_behind_stale_metadata(target, tp):
            produce(source, 'orders', {0: 5}, tag='while-down')
            retried = lambda: mirror.latest is not None and sum(  # noqa: E731
                mirror.latest.stats.produce_errors.values()) >= 2
            wait_until(lambda: not runner.is_alive() or retried(), 'writes to the stopped leader retried')
            assert runner.is_alive()  # the run did not end on the refused connection
        wait_until(lambda: len(target.records(tp)) == 15, 'the records written once the leader is back')
    summary = mirror.result
    assert (summary.incidents, summary.exit_code) == ([], 0)
    assert contents(target, 'orders', 0) == contents(source, 'orders', 0)


def test_a_new_topic_whose_target_leader_is_down_is_mirrored_once_it_is_back(reference_cluster_factory, caplog) -> None:
    source = reference_cluster_factory(brokers=1)
    target = reference_cluster_factory(brokers=2)
    source.create_topic('orders', partitions=1, replication_factor=1)
    produce(source, 'orders', {0: 5})
    target.create_topic('audit', partitions=1, replication_factor=1)  # where the new topic's copies will go
    audit = TopicPartition('audit', 0)
    mirror = Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders|audit',
                    topic_refresh_interval_ms=100)
    with running(mirror):
        wait_until(lambda: target.topic_id('orders') and len(target.records(TopicPartition('orders', 0))) == 5,
                   'orders copied')
        with leader_down_behind_stale_metadata(target, audit):
            source.create_topic('audit', partitions=1, replication_factor=1)
            produce(source, 'audit', {0: 7})
            wait_until(lambda: any(r.getMessage().startswith('discover failed (retried later)') and audit not in
                                   mirror.copier.partitions for r in caplog.records), 'adding audit-0 failed')
        wait_until(lambda: len(target.records(audit)) == 7, 'audit copied once its target leader is back')
    summary = mirror.result
    assert (summary.incidents, summary.exit_code) == ([], 0)
    for topic in ('orders', 'audit'):
        assert contents(target, topic, 0) == contents(source, topic, 0)
