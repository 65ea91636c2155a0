"""The Mirror and ``kafka-kip mirror``: target topics, group offset sync, stop-at-end, crashes, signals."""
from __future__ import annotations

import argparse
import io
import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import kafka
import pytest
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.net.selector import NetworkSelector
from kafka.structs import TopicPartition

from kafka_kip.mirror import GroupSync, Mirror, Run
from kafka_kip.mirror.cli import add_arguments
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.config import parse_properties, settings
from kafka_kip.mirror.translate import OffsetTranslator
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.mirror.helpers import mirror_cli


@pytest.fixture
def clusters() -> Iterator[tuple[ReferenceCluster, ReferenceCluster]]:
    with ReferenceCluster(brokers=3) as source, ReferenceCluster(brokers=1) as target:
        yield source, target
        assert source.internal_errors == [] and target.internal_errors == []


def produce(cluster: ReferenceCluster, topic: str, per_partition: dict[int, int], tag: str = 'v') -> None:
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5)
    for partition, count in per_partition.items():
        for i in range(count):
            producer.send(topic, key=b'k%d' % (i % 5), value=f'{tag}-{partition}-{i}'.encode(), partition=partition)
    producer.flush()
    producer.close()


def contents(cluster: ReferenceCluster, topic: str, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in cluster.records(TopicPartition(topic, partition))]


def topic_configs(cluster: ReferenceCluster, topic: str) -> dict[str, str]:
    admin = kafka.KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        admin.close()
    return {name: entry['value'] for name, entry in described['topic'][topic].items()}


def test_mirror_creates_target_topics_shaped_like_the_source(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=4, replication_factor=3,
                        configs={'retention.ms': '3600000', 'min.insync.replicas': '2'})
    source.create_topic('audit', partitions=1, replication_factor=1)
    produce(source, 'orders', {0: 30, 3: 20})
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'ord.*', target_prefix='dr.') as mirror:
        summary = mirror.run(stop_at_end=True)
    assert summary.topic_changes == ['created dr.orders (4 partitions, replication factor 1)']
    assert summary.offset_mode == 'broker' and summary.exit_code == 0
    assert [(p.source.partition, p.state, p.copied_to, p.records) for p in summary.partitions] == \
        [(0, 'done', 30, 30), (1, 'done', 0, 0), (2, 'done', 0, 0), (3, 'done', 20, 20)]
    assert topic_configs(target, 'dr.orders') == {'retention.ms': '3600000'}  # min ISR is not copied
    assert target.topic_id('audit') is None and target.topic_id('dr.audit') is None
    assert contents(target, 'dr.orders', 0) == contents(source, 'orders', 0)
    assert contents(target, 'dr.orders', 3) == contents(source, 'orders', 3)


def test_mirror_grows_a_target_topic_with_fewer_partitions(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=3, replication_factor=1)
    target.create_topic('orders', partitions=2, replication_factor=1)
    produce(source, 'orders', {0: 5, 1: 5, 2: 7})
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders') as mirror:
        summary = mirror.run(stop_at_end=True)
    assert summary.topic_changes == ['grew orders from 2 to 3 partitions']
    assert [contents(target, 'orders', p) for p in range(3)] == [contents(source, 'orders', p) for p in range(3)]


def _commit(cluster: ReferenceCluster, group: str, offsets: dict[TopicPartition, int]) -> None:
    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                                   enable_auto_commit=False)
    try:
        consumer.commit({tp: kafka.OffsetAndMetadata(offset, 'meta', cluster.leader_epoch(tp))
                         for tp, offset in offsets.items()})
    finally:
        consumer.close(autocommit=False)


def _committed(cluster: ReferenceCluster, group: str, tp: TopicPartition) -> kafka.OffsetAndMetadata | None:
    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                                   enable_auto_commit=False)
    try:
        return consumer.committed(tp, metadata=True)
    finally:
        consumer.close(autocommit=False)


def test_group_offsets_are_synced_one_to_one_and_a_switched_consumer_resumes_there(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=2, replication_factor=3)
    tp0, tp1 = TopicPartition('orders', 0), TopicPartition('orders', 1)
    produce(source, 'orders', {0: 100, 1: 60})
    source.elect_leader(tp0, next(b for b in source.isr(tp0) if b != source.leader(tp0)))  # epoch 1
    produce(source, 'orders', {0: 50}, tag='w')
    _commit(source, 'app', {tp0: 130, tp1: 40})
    _commit(source, 'other', {tp0: 7})
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', groups='app') as mirror:
        summary = mirror.run(stop_at_end=True)
    assert {tp: c.offset for tp, c in summary.groups.committed['app'].items()} == {tp0: 130, tp1: 40}
    assert set(summary.groups.committed) == {'app'}
    # the same offsets; the leader epoch is the target's (epoch 0 there), not the source's (1)
    assert source.leader_epoch(tp0) == 1
    assert _committed(target, 'app', tp0) == kafka.OffsetAndMetadata(130, 'meta', 0)
    assert _committed(target, 'app', tp1) == kafka.OffsetAndMetadata(40, 'meta', 0)
    assert _committed(target, 'other', tp0) is None

    consumer = kafka.KafkaConsumer('orders', bootstrap_servers=target.bootstrap_servers, group_id='app',
                                   enable_auto_commit=False, auto_offset_reset='none')
    try:
        first: dict[int, tuple[int, bytes]] = {}
        deadline = time.monotonic() + 15
        while len(first) < 2 and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                first.setdefault(tp.partition, (records[0].offset, records[0].value))
    finally:
        consumer.close(autocommit=False)
    source_records = {p: dict((o, v) for o, _, v in contents(source, 'orders', p)) for p in (0, 1)}
    assert first == {0: (130, source_records[0][130]), 1: (40, source_records[1][40])}


def test_group_sync_never_moves_a_target_group_back_nor_touches_an_active_one(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=1, replication_factor=1)
    tp = TopicPartition('orders', 0)
    produce(source, 'orders', {0: 80})
    _commit(source, 'app', {tp: 30})
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', groups='app') as mirror:
        mirror.run(stop_at_end=True)
    _commit(target, 'app', {tp: 70})  # consumers moved on, on the target
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', groups='app') as mirror:
        summary = mirror.run(stop_at_end=True)
    assert summary.groups.committed == {} and _committed(target, 'app', tp).offset == 70

    _commit(source, 'app', {tp: 75})
    member = kafka.KafkaConsumer('orders', bootstrap_servers=target.bootstrap_servers, group_id='app',
                                 enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 15
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(timeout_ms=100)
        with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', groups='app') as mirror:
            summary = mirror.run(stop_at_end=True)
    finally:
        member.close(autocommit=False)
    assert summary.groups.skipped == {'app': 'the group is Stable on the target (it has active members there)'}
    assert _committed(target, 'app', tp).offset == 70


def test_group_offsets_beyond_what_is_copied_wait_for_the_records(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=1, replication_factor=1)
    tp = TopicPartition('orders', 0)
    produce(source, 'orders', {0: 50})
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders') as mirror:
        mirror.run(stop_at_end=True)
    produce(source, 'orders', {0: 50}, tag='late')
    _commit(source, 'app', {tp: 90})
    net = NetworkSelector()
    clients = [ClusterClient(name, cluster.bootstrap_servers, net) for name, cluster in
               (('source', source), ('target', target))]
    try:
        for client in clients:
            client.bootstrap()
        sync = GroupSync(*clients, 'app', lambda topic: topic)
        copied_to_50 = lambda tp, offset: (tp, min(offset, 50))  # noqa: E731  (what a copier at 50 answers)
        assert {t: c.offset for t, c in sync.sync(copied_to_50).committed['app'].items()} == {tp: 50}
        assert _committed(target, 'app', tp).offset == 50
        assert sync.sync(copied_to_50).committed == {}
    finally:
        for client in clients:
            client.close()
        net.close()


def test_stop_flushes_and_returns_the_summary(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=2, replication_factor=1)
    produce(source, 'orders', {0: 40, 1: 40})
    mirror = Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders')
    runner = threading.Thread(target=lambda: setattr(mirror, 'result', mirror.run()))
    runner.start()
    wait_until(lambda: target.topic_id('orders') is not None
               and sum(len(target.records(TopicPartition('orders', p))) for p in (0, 1)) == 80, '80 records copied')
    mirror.stop()
    runner.join(10)
    mirror.close()
    assert not runner.is_alive() and mirror.stopping
    assert (mirror.result.records, mirror.result.exit_code) == (80, 0)
    assert [p.state for p in mirror.result.partitions] == ['copying', 'copying']


def test_a_source_broker_stopped_just_before_the_stop_does_not_fail_the_last_group_sync(clusters) -> None:
    """The mirror's cached metadata still lists a source broker that was just shut down: the group listing is
    asked again of the brokers a fresh Metadata names, so the last sync commits and the run exits 0 (was: exit 2,
    'listing the source groups failed: NodeNotReadyError')."""
    source, target = clusters
    source.create_topic('orders', partitions=2, replication_factor=3)
    tp = TopicPartition('orders', 0)
    produce(source, 'orders', {0: 40, 1: 40})
    _commit(source, 'app', {tp: 35})
    mirror = Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', groups='app',
                    group_sync_interval_ms=600_000)  # the first sync (nothing copied yet) and the last one only
    runner = threading.Thread(target=lambda: setattr(mirror, 'result', mirror.run()))
    runner.start()
    try:
        wait_until(lambda: target.topic_id('orders') is not None
                   and sum(len(target.records(TopicPartition('orders', p))) for p in (0, 1)) == 80, '80 records copied')
        source.stop_broker(2)
    finally:
        mirror.stop()
        runner.join(60)
        mirror.close()
    assert (mirror.result.exit_code, mirror.result.groups.failed, mirror.result.records) == (0, {}, 80)
    assert _committed(target, 'app', tp).offset == 35


def test_mirror_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match='offset_mode must be one of'):
        Mirror('127.0.0.1:1', '127.0.0.1:2', offset_mode='maybe')
    with pytest.raises(ValueError, match=r"on_truncation must be one of \('stop', 'fail', 'none', 'closest'\), "
                                         "got 'rewind'"):
        Mirror('127.0.0.1:1', '127.0.0.1:2', on_truncation='rewind')
    # Spark's onTruncation and the consumer's reset policy spell 'stop' their way
    assert [Mirror('127.0.0.1:1', '127.0.0.1:2', on_truncation=spelling).on_truncation
            for spelling in ('stop', 'fail', 'none', 'closest')] == ['stop', 'stop', 'stop', 'closest']
    with pytest.raises(ValueError, match=r"unknown source client config\(s\) \['colour'\]"):
        Mirror('127.0.0.1:1', '127.0.0.1:2', source_configs={'colour': 'blue'})


# -- the command line ---------------------------------------------------------------------------------


def mirror_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_properties_files_parse_as_java_does(tmp_path: Path) -> None:
    text = '# MirrorMaker-style\n! also a comment\nsource.bootstrap.servers = a:9092\ntarget.bootstrap.servers:b:9092\n' \
           'topics=orders\\\n|audit\nsource.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule ' \
           'required username="alice" password="s3cret";\nsource.security.protocol=SASL_PLAINTEXT\n' \
           'source.sasl.mechanism=PLAIN\ntarget.request.timeout.ms=20000\ngroup.sync.interval.ms=2500\n' \
           'sync.topic.configs=false\nmax.alignment.records=5000\noffset.map.topic=mirror-map\n'
    assert parse_properties(text)['topics'] == 'orders|audit'
    assert parse_properties(text)['target.bootstrap.servers'] == 'b:9092'
    path = tmp_path / 'mm.properties'
    path.write_text(text)
    assert settings(mirror_args('--config', str(path), '--on-truncation', 'closest')) == {
        'source': 'a:9092', 'target': 'b:9092', 'topics': 'orders|audit', 'on_truncation': 'closest',
        'source_configs': {'sasl_plain_username': 'alice', 'sasl_plain_password': 's3cret',
                           'security_protocol': 'SASL_PLAINTEXT', 'sasl_mechanism': 'PLAIN'},
        'target_configs': {'request_timeout_ms': 20000},
        'group_sync_interval_ms': 2500, 'sync_topic_configs': False, 'offset_map_topic': 'mirror-map',
        'copier_configs': {'max_alignment_records': 5000},
    }


def test_properties_files_with_unknown_settings_are_refused(tmp_path: Path) -> None:
    path = tmp_path / 'mm.properties'
    path.write_text('source.bootstrap.servers=a:1\ntarget.bootstrap.servers=b:2\ncolour=blue\n')
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['colour'\]"):
        settings(mirror_args('--config', str(path)))
    with pytest.raises(ValueError, match='no source cluster'):
        settings(mirror_args('--target', 'b:2'))


@pytest.mark.parametrize(('text', 'message'), [
    ('group.sync.interval.ms=soon\n', "mm.properties: group.sync.interval.ms must be an integer >= 0, got 'soon'"),
    ('target.request.timeout.ms=20s\n', "mm.properties: target.request.timeout.ms must be an integer, got '20s'"),
    ('sync.topic.configs=yes\n', "mm.properties: sync.topic.configs must be true or false, got 'yes'"),
    ('topics=orders(\n', "mm.properties: topics: invalid regular expression 'orders(': missing ), unterminated "
                         'subpattern at position 6'),
    ('groups=[app\n', "mm.properties: groups: invalid regular expression '[app': unterminated character set at "
                      'position 0'),
])
def test_bad_values_in_the_properties_file_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / 'mm.properties'
    path.write_text('source.bootstrap.servers=a:1\ntarget.bootstrap.servers=b:2\n' + text)
    with pytest.raises(ValueError) as raised:
        settings(mirror_args('--config', str(path)))
    assert str(raised.value) == f'{tmp_path}/{message}'


@pytest.mark.parametrize(('flag', 'value'), [('--topics', 'orders('), ('--group-sync', '*app')])
def test_an_invalid_regex_flag_is_named(tmp_path: Path, flag: str, value: str) -> None:
    path = tmp_path / 'mm.properties'
    path.write_text('source.bootstrap.servers=a:1\ntarget.bootstrap.servers=b:2\ntopics=ok\n')
    with pytest.raises(ValueError, match=f'^{flag}: invalid regular expression {value!r}'.replace('(', r'\(')
                       .replace('*', r'\*')):
        settings(mirror_args('--config', str(path), flag, value))
    with pytest.raises(ValueError, match=r"^topics: invalid regular expression 'a\('"):
        Mirror('127.0.0.1:1', '127.0.0.1:2', 'a(')


def test_cli_copies_to_the_end_and_prints_a_json_summary(clusters, tmp_path: Path) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=2, replication_factor=3)
    produce(source, 'orders', {0: 25, 1: 35})
    config = tmp_path / 'mirror.properties'
    config.write_text(f'source.bootstrap.servers={source.bootstrap_servers}\n'
                      f'target.bootstrap.servers={target.bootstrap_servers}\ntopics=ord.*\ntopic.prefix=dr.\n'
                      'source.client.id=mirror-test\n')
    process = mirror_cli('--config', str(config), '--stop-at-end', '--json')
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    summary = json.loads(out)
    assert (summary['offset_mode'], summary['records'], summary['exit_code'], summary['incidents']) == \
        ('broker', 60, 0, [])
    assert [(p['target'], p['state'], p['copied_to']) for p in summary['partitions']] == \
        [('dr.orders-0', 'done', 25), ('dr.orders-1', 'done', 35)]
    assert contents(target, 'dr.orders', 1) == contents(source, 'orders', 1)


def test_cli_killed_mid_stream_resumes_without_duplicates(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=2, replication_factor=3)
    produce(source, 'orders', {0: 300, 1: 300})
    process = mirror_cli('--source', source.bootstrap_servers, '--target', target.bootstrap_servers, '--topics', 'orders')
    writer = threading.Thread(target=produce, args=(source, 'orders', {0: 3000, 1: 3000}, 'live'))
    try:
        wait_until(lambda: process.poll() is not None or (target.topic_id('orders') is not None
                                                          and len(target.records(TopicPartition('orders', 0))) >= 200),
                   '200 records copied')
        writer.start()
        # killed while live records are being copied
        wait_until(lambda: process.poll() is not None or len(target.records(TopicPartition('orders', 0))) > 300,
                   'live records copied')
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=10)
        writer.join()
    assert process.returncode == -signal.SIGKILL
    copied_before_restart = sum(len(target.records(TopicPartition('orders', p))) for p in (0, 1))
    restart = mirror_cli('--source', source.bootstrap_servers, '--target', target.bootstrap_servers, '--topics', 'orders',
                   '--stop-at-end', '--json')
    out, err = restart.communicate(timeout=60)
    assert restart.returncode == 0, err
    summary = json.loads(out)
    assert summary['records'] == 6600 - copied_before_restart and summary['incidents'] == []
    for p in (0, 1):
        assert contents(target, 'orders', p) == contents(source, 'orders', p)


def test_cli_sigterm_finishes_the_writes_and_prints_the_summary(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=1, replication_factor=1)
    produce(source, 'orders', {0: 500})
    process = mirror_cli('--source', source.bootstrap_servers, '--target', target.bootstrap_servers, '--topics', 'orders',
                   '--json')
    wait_until(lambda: process.poll() is not None or (target.topic_id('orders') is not None
                                                      and len(target.records(TopicPartition('orders', 0))) == 500),
               '500 records copied')
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    summary = json.loads(out)
    assert (summary['records'], summary['partitions'][0]['state'], summary['partitions'][0]['lag']) == \
        (500, 'copying', 0)


def test_cli_reports_what_keeps_it_from_running() -> None:
    process = mirror_cli('--target', '127.0.0.1:1')
    _, err = process.communicate(timeout=30)
    assert process.returncode == 1
    assert 'no source cluster: give --source or source.bootstrap.servers in --config' in err
    process = mirror_cli('--source', '127.0.0.1:1', '--target', '127.0.0.1:2', '--group-sync', '(app')
    _, err = process.communicate(timeout=30)
    # the last line: a build without the compiled record codec warns about it first
    assert (process.returncode, err.splitlines()[-1]) == (
        1, "kafka-kip mirror: --group-sync: invalid regular expression '(app': missing ), unterminated subpattern "
           'at position 0')


def test_cli_says_when_the_topic_pattern_matches_nothing(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=1, replication_factor=1)
    process = mirror_cli('--source', source.bootstrap_servers, '--target', target.bootstrap_servers, '--topics',
                         'order', '--stop-at-end', '--json')
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert json.loads(out)['partitions'] == []
    assert json.loads(err.splitlines()[-1]) == {  # --json: stderr is JSON lines too
        'event': 'error', 'message': "no source topic matches 'order' (--topics); nothing was copied"}


def test_translated_mode_keeps_its_map_on_the_target_and_restarts_without_duplicates(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=1, replication_factor=1)
    target.create_topic('orders', partitions=1, replication_factor=1)
    produce(target, 'orders', {0: 5}, tag='already-there')  # offsets on the target differ from the source's
    produce(source, 'orders', {0: 40})
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', offset_mode='off') as mirror:
        first = mirror.run(stop_at_end=True)  # 'off' is the old name of 'translated'
    assert (first.offset_mode, first.requested_mode, first.records, first.exit_code) == \
        ('translated', 'translated', 40, 0)
    assert (first.partitions[0].copied_to, first.partitions[0].target_end) == (40, 45)
    with OffsetTranslator(target.bootstrap_servers) as translator:
        assert translator.maps[TopicPartition('orders', 0)].runs == [Run(0, 5, 40)]
        assert translator.translate(TopicPartition('orders', 0), 12) == (TopicPartition('orders', 0), 17)
    produce(source, 'orders', {0: 10}, tag='more')
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', offset_mode='translated') as mirror:
        second = mirror.run(stop_at_end=True)
    assert (second.records, second.incidents) == (10, [])
    assert [v for _, _, v in contents(target, 'orders', 0)][5:] == [v for _, _, v in contents(source, 'orders', 0)]
    with OffsetTranslator(target.bootstrap_servers) as translator:
        assert translator.maps[TopicPartition('orders', 0)].runs == [Run(0, 5, 50)]


def test_the_status_line_and_the_summary_show_lag_and_incidents() -> None:
    from kafka_kip.mirror import Incident, MirrorSummary, PartitionProgress
    from kafka_kip.mirror.progress import LiveProgress, render_summary, status_line

    tp0, tp1 = TopicPartition('orders', 0), TopicPartition('orders', 1)
    partitions = [PartitionProgress(tp0, tp0, 'copying', 120, 100, 100, 150, 1000, 99_000, 'broker'),
                  PartitionProgress(tp1, tp1, 'stopped', 40, 40, 40, 90, 40, 4_000, 'broker')]
    assert [p.lag for p in partitions] == [50, 50]
    assert status_line(partitions, 1234.4) == \
        'mirror: 2 partitions | 1,040 records | 1,234 rec/s | lag 100 (orders-1 50, orders-0 50) | 1 stopped'
    incident = Incident('truncation', tp1, tp1, True, 'orders-1: the source truncated its log at offset 40', (40, 60))
    summary = MirrorSummary('auto', 2.0, partitions, [incident], ['created orders (2 partitions, replication '
                                                                     'factor 1)'])
    assert summary.exit_code == 2 and summary.records_per_second == 520.0
    assert render_summary(summary).splitlines() == [
        'mirrored 1,040 records (103,000 bytes) in 2.0 s = 520 records/s; offsets: broker (auto)',
        '  topic: created orders (2 partitions, replication factor 1)',
        '  partition                    mode       state         copied to   source end        lag      records',
        '  orders-0                     broker     copying             100          150         50        1,000',
        '  orders-1                     broker     stopped              40           90         50           40',
        '  STOPPED: orders-1: the source truncated its log at offset 40',
    ]
    assert summary.to_dict()['incidents'][0]['lost'] == (40, 60)

    quiet = io.StringIO()
    LiveProgress(quiet)(partitions, 1.0)  # not a terminal: no live line
    assert quiet.getvalue() == ''
    shown = io.StringIO()
    live = LiveProgress(shown, enabled=True)
    live(partitions, 1.0)
    live.incident(incident)
    live.close()
    assert 'mirror: 2 partitions | 1,040 records' in shown.getvalue()
    assert 'STOPPED orders-1: the source truncated its log at offset 40' in shown.getvalue()


def _run_in_thread(mirror: Mirror) -> threading.Thread:
    runner = threading.Thread(target=lambda: setattr(mirror, 'result', mirror.run()))
    runner.start()
    return runner


@pytest.mark.parametrize('on_truncation', ['stop', 'closest'])
def test_a_source_topic_recreated_while_mirroring_is_never_merged_into_the_target(clusters, on_truncation) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=1, replication_factor=1)
    produce(source, 'orders', {0: 10}, tag='old')
    old_id = str(source.topic_id('orders'))
    incidents: list = []
    mirror = Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', on_truncation=on_truncation,
                    on_incident=incidents.append, source_configs={'metadata_max_age_ms': 200})
    runner = _run_in_thread(mirror)
    try:
        wait_until(lambda: target.topic_id('orders') is not None and len(target.records(TopicPartition('orders', 0))) == 10,
                   'the first 10 records copied')
        old = contents(target, 'orders', 0)
        source.delete_topic('orders')
        source.create_topic('orders', partitions=1, replication_factor=1)
        produce(source, 'orders', {0: 15}, tag='new')
        new_id = str(source.topic_id('orders'))
        wait_until(lambda: incidents, 'an incident')
    finally:
        mirror.stop()
        runner.join(30)
        mirror.close()
    summary = mirror.result
    [incident] = summary.incidents
    assert (incident.kind, incident.stopped, summary.exit_code) == ('recreated', True, 2)
    assert incident.message in (
        'orders-0: the source topic orders was deleted; the partition stopped, the target keeps what was copied',
        f'orders-0: the source topic orders was recreated (topic id {old_id} is now {new_id}); the mirror never '
        'merges two incarnations into one target log: orders-0 keeps the old one and the partition stopped. To copy '
        'the new incarnation, delete the target topic (or mirror with another topic prefix) and restart the mirror')
    assert contents(target, 'orders', 0) == old
    assert [v for _, _, v in old] == [b'old-0-%d' % i for i in range(10)]


def test_a_source_topic_recreated_while_no_mirror_ran_is_found_at_start(clusters) -> None:
    source, target = clusters
    source.create_topic('orders', partitions=1, replication_factor=1)
    produce(source, 'orders', {0: 10}, tag='old')
    old_id = str(source.topic_id('orders'))
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders') as mirror:
        assert mirror.run(stop_at_end=True).exit_code == 0
    old = contents(target, 'orders', 0)
    source.delete_topic('orders')
    source.create_topic('orders', partitions=1, replication_factor=1)
    produce(source, 'orders', {0: 15}, tag='new')
    new_id = str(source.topic_id('orders'))
    for on_truncation in ('stop', 'closest'):
        with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'orders', on_truncation=on_truncation) as mirror:
            summary = mirror.run(stop_at_end=True)
        [incident] = summary.incidents
        assert (incident.kind, incident.stopped, summary.exit_code, summary.records) == ('recreated', True, 2, 0)
        assert incident.message.startswith(f'orders-0: the source topic orders was recreated (topic id {old_id} is '
                                           f'now {new_id})')
        assert contents(target, 'orders', 0) == old
