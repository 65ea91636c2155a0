"""``kafka-kip spark-mirror``: copies, then a source truncation per ``--on-truncation``; translated offsets
onto a stock target across runs.
"""
from __future__ import annotations

import shutil
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(shutil.which('java') is None, reason='Spark needs java on PATH')
pytest.importorskip('pyspark')

import kafka_kip  # noqa: E402
from kafka_kip import TopicPartition  # noqa: E402
from tests.spark.helpers import (  # noqa: E402
    assert_same_logs,
    produce,
)


@pytest.mark.parametrize('on_truncation', ['fail', 'closest'])
def test_cli_spark_mirror_copies_then_handles_a_source_truncation(spark, reference_cluster_factory, tmp_path, capsys, on_truncation):
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
    if on_truncation == 'fail':
        assert main(argv) == 1
        assert ('kafka_kip.errors.TruncatedPartitionError: [Error 10006] TruncatedPartitionError: source log '
                'truncated (unclean leader election?): orders-0: offsets 0..5 lost (log truncated at 0, position '
                'was 6)' in capsys.readouterr().err)
        assert [r.value for r in target.records(tp)] == [b'v%d' % n for n in range(6)]
    else:
        # The same query, its summary rows collected: the batch continues at offset 0, after the target's end
        # (which keeps the lost records), and says so.
        rows: list[Any] = []
        (spark.readStream.format('kafka-kip-mirror').option('kafka.bootstrap.servers', source.bootstrap_servers)
         .option('target.bootstrap.servers', target.bootstrap_servers).option('subscribePattern', 'ord.*')
         .option('startingOffsets', 'earliest').option('onTruncation', 'closest').option('offsetMode', 'auto')
         .option('topicPrefix', '').load().writeStream.foreachBatch(lambda frame, _: rows.extend(frame.collect()))
         .option('checkpointLocation', str(tmp_path / 'checkpoint')).trigger(availableNow=True).start()
         .awaitTermination())
        [row] = [r for r in rows if r.partition == 0]
        assert (row.startOffset, row.endOffset, row.records) == (0, 2, 2)
        [incident] = row.incidents  # the copier's report: it compared the target with the source
        assert incident.startswith('truncation: orders-0: the source truncated its log at offset 0 ')
        assert incident.endswith("continuing from the truncation point in translated mode: the source's records "
                                 'from 0 on follow at target offset 6, their offsets in the offset map (the '
                                 "partition's offsets cannot equal the source's again)")
        produce(source, 'orders', {0: 6}, first=60)  # source offsets 2..7
        assert main(argv) == 0
        assert [(r.offset, r.value) for r in target.records(tp)] == [
            (n, b'v%d' % n) for n in range(6)] + [(6, b'v50'), (7, b'v51')] + [(8 + n, b'v6%d' % n) for n in range(6)]


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
