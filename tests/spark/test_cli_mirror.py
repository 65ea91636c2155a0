"""``kafka-kip spark-mirror``: copies, then a source truncation per ``--on-truncation``; a group synced
mid-stream with the batches in the query's progress; translated offsets onto a stock target across runs; a group
on Apache Kafka synced to a stock target, translated exactly.
"""
from __future__ import annotations

import json
import re
import shutil
import uuid
from collections.abc import Callable

import pytest

pytestmark = pytest.mark.skipif(shutil.which('java') is None, reason='Spark needs java on PATH')
pytest.importorskip('pyspark')

import kafka_kip  # noqa: E402
from kafka_kip import TopicPartition  # noqa: E402
from kafka_kip_reference.fixtures import conditions  # noqa: E402
from tests.spark.helpers import (  # noqa: E402
    assert_same_logs,
    produce,
    wait_until,
)


@pytest.mark.parametrize('on_truncation', ['fail', 'closest'])
def test_cli_spark_mirror_copies_then_handles_a_source_truncation(spark, reference_cluster_factory, tmp_path, capsys,
                                                                  on_truncation):
    from kafka_kip.cli import main

    source, target = reference_cluster_factory(3), reference_cluster_factory(1)
    source.create_topic('orders', partitions=2, replication_factor=3)
    tp = TopicPartition('orders', 0)
    lagging = [b for b in source.replicas(tp) if b != source.leader(tp)][0]
    source.pause_replication(tp, lagging)
    produce(source, 'orders', {0: 6, 1: 4})
    argv = ['spark-mirror', '--source', source.bootstrap_servers, '--target', target.bootstrap_servers,
            '--topics', 'ord.*', '--checkpoint', str(tmp_path / 'checkpoint'), '--available-now', '--quiet',
            '--on-truncation', on_truncation]
    assert main(argv) == 0
    assert target.topic_id('orders') is not None  # created like the source: 2 partitions
    assert_same_logs(source, target, 'orders', 2)

    source.elect_leader(tp, lagging, unclean=True)  # orders-0 loses offsets 0..5
    produce(source, 'orders', {0: 2}, first=50)
    capsys.readouterr()
    if on_truncation == 'fail':
        # As kafka-kip mirror: 2, a partition stopped by an incident, named (and the query failed before copying)
        assert main([*argv, '--json']) == 2
        printed = capsys.readouterr()
        lost = ('source log truncated (unclean leader election?): orders-0: offsets 0..5 lost (log truncated at 0, '
                'position was 6)')
        assert f'kafka_kip.errors.TruncatedPartitionError: [Error 10006] TruncatedPartitionError: {lost}' in printed.err
        summary = json.loads(printed.out)
        assert [(i['kind'], i['source'], i['stopped']) for i in summary['incidents']] == [
            ('truncation', 'orders-0', True)]
        assert summary['incidents'][0]['message'].startswith(f'[Error 10006] TruncatedPartitionError: {lost}')
        assert [(p['source'], p['state']) for p in summary['partitions']] == [('orders-0', 'stopped')]
        assert summary['exit_code'] == 2
        assert [r.value for r in target.records(tp)] == [b'v%d' % n for n in range(6)]
    else:
        # The copier compared the target with the source: the batch continues at offset 0, after the target's end
        # (which keeps the lost records), and says so in the query's progress, as the summary shows it.
        assert main([*argv, '--json']) == 0
        printed = capsys.readouterr()
        summary = json.loads(printed.out)
        [incident] = summary['incidents']
        assert (incident['kind'], incident['source'], incident['stopped']) == ('truncation', 'orders-0', False)
        assert incident['message'].startswith('orders-0: the source truncated its log at offset 0 ')
        assert incident['message'].endswith("continuing from the truncation point in translated mode: the source's "
                                            'records from 0 on follow at target offset 6, their offsets in the offset '
                                            "map (the partition's offsets cannot equal the source's again)")
        assert summary['incidents_by_kind'] == {'truncation': 1} and summary['exit_code'] == 0
        assert [(p['source'], p['mode'], p['state'], p['copied_to'], p['records']) for p in summary['partitions']] == [
            ('orders-0', 'translated', 'done', 2, 2)]
        assert [json.loads(line)['kind'] for line in printed.err.splitlines()
                if line.startswith('{') and json.loads(line)['event'] == 'incident'] == ['truncation']
        produce(source, 'orders', {0: 6}, first=60)  # source offsets 2..7
        assert main(argv) == 0
        assert [(r.offset, r.value) for r in target.records(tp)] == [
            (n, b'v%d' % n) for n in range(6)] + [(6, b'v50'), (7, b'v51')] + [(8 + n, b'v6%d' % n) for n in range(6)]


def test_spark_mirror_syncs_a_group_committed_mid_stream_and_observes_its_batches(spark, reference_cluster_factory, tmp_path):
    from kafka_kip.spark.mirror import start_mirror
    from tests.mirror.helpers import commit_groups, committed_offsets

    source, target = reference_cluster_factory(1), reference_cluster_factory(1)
    source.create_topic('orders', partitions=1, replication_factor=1)
    tp = TopicPartition('orders', 0)
    produce(source, 'orders', {0: 10})
    commit_groups(source.bootstrap_servers, {'app': {tp: 4}})

    def synced_to(offset: int) -> Callable[[], bool]:
        return lambda: committed_offsets(target.bootstrap_servers, ['app'], tp) == {'app': offset}

    query = start_mirror(spark, source.bootstrap_servers, target.bootstrap_servers, 'orders',
                         str(tmp_path / 'checkpoint'), groups='app', group_sync_interval_ms=100, trigger_interval_s=0.2)
    try:
        # the query's first batch starts its Python workers: on a loaded machine that alone can take a minute
        conditions.wait_until(synced_to(4), what='app synced at 4', timeout=180)
        commit_groups(source.bootstrap_servers, {'app': {tp: 9}})  # while the source is idle: no batch runs
        wait_until(synced_to(9), what='app synced at 9')
        commit_groups(source.bootstrap_servers, {'app': {tp: 13}})  # ahead of the copy: held at its end (10) ...
        produce(source, 'orders', {0: 5}, first=10)
        wait_until(synced_to(13), what='app synced at 13')  # ... until offsets 10..12 are copied
        # the batch's progress reaches the driver's summary while the query runs (the sync reads the target, and
        # may see the records before the batch ends)
        wait_until(lambda: [p.copied_to for p in query.summary().partitions] == [15], what='the batch in the summary')
    finally:
        query.stop()
    assert query.exit_code == 0
    summary = query.summary()
    assert {group: {t: c.offset for t, c in offsets.items()} for group, offsets in summary.groups.committed.items()} \
        == {'app': {tp: 13}}
    assert [(p.source, p.target, p.mode, p.copied_to, p.records) for p in summary.partitions] == [
        (tp, tp, 'broker', 15, 15)]
    progress = [json.loads(p.json) for p in query.recentProgress]
    observed = [p['observedMetrics']['kafka_kip_mirror'] for p in progress if p.get('observedMetrics')]
    assert sum(o['copied_records'] for o in observed) == 15
    assert [entry['endOffset'] for o in observed for entry in o['partitions']][-1] == 15
    assert_same_logs(source, target, 'orders', 1)


def test_cli_spark_mirror_translates_offsets_onto_a_stock_target_exactly_across_runs(spark, reference_cluster_factory, tmp_path):
    from kafka_kip.cli import main
    from kafka_kip.mirror import Run
    from kafka_kip.mirror.translate import OffsetTranslator

    source, target = reference_cluster_factory(1), reference_cluster_factory(1, features=())
    source.create_topic('orders', partitions=1, replication_factor=1)
    tp = TopicPartition('orders', 0)
    produce(source, 'orders', {0: 30})
    admin = kafka_kip.admin.KafkaAdminClient(bootstrap_servers=source.bootstrap_servers)
    try:
        admin.delete_records({tp: 10})  # the source starts at 10
    finally:
        admin.close()
    argv = ['spark-mirror', '--source', source.bootstrap_servers, '--target', target.bootstrap_servers,
            '--topics', 'orders', '--checkpoint', str(tmp_path / 'checkpoint'), '--available-now', '--quiet',
            '--offset-mode', 'translated']
    assert main(argv) == 0
    produce(source, 'orders', {0: 5}, first=30)
    assert main(argv) == 0  # a second query run resumes from the checkpoint and the offset map
    assert [(r.offset, r.value) for r in target.records(tp)] == [(n - 10, b'v%d' % n) for n in range(10, 35)]
    with OffsetTranslator(target.bootstrap_servers) as translator:
        assert translator.maps[tp].runs == [Run(10, 0, 25)]
        assert translator.translate(tp, 17) == (tp, 7)


def test_cli_spark_mirror_syncs_groups_from_apache_kafka_translated_exactly(spark, apache_kafka,
                                                                            reference_cluster_factory, tmp_path, capsys):
    """Source: the session's Apache Kafka, its log starting at 10 (DeleteRecords), groups committed there inside
    the log, at its start and at its end; target: a stock cluster, copied in translated mode (target offsets from
    0, the offset map on the target)."""
    from kafka_kip.cli import main
    from kafka_kip.mirror import Run
    from kafka_kip.mirror.translate import OffsetTranslator
    from tests.mirror.helpers import commit_groups, committed_offsets

    name = f'spark-mirror-ak-{uuid.uuid4().hex[:8]}'
    apache_kafka.create_topic(name, 1, 3, config={'retention.ms': -1})  # (the records' timestamps are of 2023)
    target = reference_cluster_factory(1, features=())
    tp = TopicPartition(name, 0)
    produce(apache_kafka, name, {0: 30})
    admin = kafka_kip.admin.KafkaAdminClient(bootstrap_servers=apache_kafka.bootstrap_servers)
    try:
        admin.delete_records({tp: 10})
    finally:
        admin.close()
    groups = {f'{name}-app': 17, f'{name}-start': 10, f'{name}-end': 30}
    commit_groups(apache_kafka.bootstrap_servers, {group: {tp: offset} for group, offset in groups.items()})
    argv = ['spark-mirror', '--source', apache_kafka.bootstrap_servers, '--target', target.bootstrap_servers,
            '--topics', re.escape(name), '--checkpoint', str(tmp_path / 'checkpoint'), '--available-now', '--quiet',
            '--group-sync', re.escape(name) + '-.*', '--offset-mode', 'translated', '--json']
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [(p['source'], p['mode'], p['copied_to'], p['records']) for p in summary['partitions']] == [
        (f'{name}-0', 'translated', 30, 20)]
    assert summary['groups']['committed'] == {f'{name}-app': {f'{name}-0': 7}, f'{name}-start': {f'{name}-0': 0},
                                              f'{name}-end': {f'{name}-0': 20}}
    assert [(r.offset, r.value) for r in target.records(tp)] == [(n - 10, b'v%d' % n) for n in range(10, 30)]
    with OffsetTranslator(target.bootstrap_servers) as translator:
        assert translator.maps[tp].runs == [Run(10, 0, 20)]
    assert committed_offsets(target.bootstrap_servers, groups, tp) == {
        f'{name}-app': 7, f'{name}-start': 0, f'{name}-end': 20}
