"""Batch writes with ``format("kafka-kip")``: preserved offsets written once however often a job runs, plain
rows, the size limit, bad options and columns named.
"""
from __future__ import annotations

import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which('java') is None, reason='Spark needs java on PATH')
pytest.importorskip('pyspark')

from kafka_kip import TopicPartition  # noqa: E402
from tests.spark.helpers import (  # noqa: E402
    assert_same_logs,
    produce,
    read,
)


def test_batch_write_plain_and_with_preserved_offsets_is_idempotent(spark, reference_cluster_factory):
    from pyspark.errors import AnalysisException

    source, target = reference_cluster_factory(1), reference_cluster_factory(1)
    source.create_topic('orders', partitions=2, replication_factor=1)
    target.create_topic('orders', partitions=2, replication_factor=1)
    target.create_topic('plain', partitions=1, replication_factor=1)
    produce(source, 'orders', {0: 3, 1: 4})
    frame = read(spark, source, subscribe='orders', includeHeaders='true')

    def copy() -> None:
        (frame.write.format('kafka-kip').option('kafka.bootstrap.servers', target.bootstrap_servers)
         .option('preserveOffsets', 'true').mode('append').save())

    copy()
    copy()  # a re-executed job: every row is already there
    assert_same_logs(source, target, 'orders', 2)

    plain = spark.createDataFrame([('a', 'x'), (None, 'y')], 'key string, value string').coalesce(1)
    (plain.write.format('kafka-kip').option('kafka.bootstrap.servers', target.bootstrap_servers)
     .option('topic', 'plain').mode('append').save())
    assert [(r.offset, r.key, r.value) for r in target.records(TopicPartition('plain', 0))] == [
        (0, b'a', b'x'), (1, None, b'y')]
    with pytest.raises(AnalysisException) as caught:  # as Spark's Kafka sink: a topic is only appended to
        (plain.write.format('kafka-kip').option('kafka.bootstrap.servers', target.bootstrap_servers)
         .option('topic', 'plain').mode('overwrite').save())
    assert 'OptionError: save mode overwrite is not supported' in str(caught.value)
    assert target.log_end_offset(TopicPartition('plain', 0)) == 2


@pytest.mark.parametrize('topic_configs, options, limit', [
    ({}, {'kafka.max.request.size': '2000'}, 'max_request_size'),
    ({'max.message.bytes': '2000'}, {}, "the topic's max.message.bytes"),
])
def test_a_row_over_the_size_limit_fails_the_write_naming_it_and_nothing_after_it_is_written(
        spark, reference_cluster_factory, topic_configs, options, limit):
    target = reference_cluster_factory(1)
    target.create_topic('copy', partitions=1, replication_factor=1, configs=topic_configs)
    frame = spark.createDataFrame([(0, n, 'x' * (3000 if n == 5 else 10)) for n in range(10)],
                                  'partition int, offset long, value string').coalesce(1)
    with pytest.raises(Exception) as caught:
        (frame.write.format('kafka-kip').option('kafka.bootstrap.servers', target.bootstrap_servers)
         .option('topic', 'copy').option('preserveOffsets', 'true').options(**options).mode('append').save())
    assert ('MessageSizeTooLargeError: a row for copy-0 at offset 5 is 3070 bytes as a record batch, over the '
            f'limit of 2000 bytes ({limit}); nothing of it or after it was sent') in str(caught.value)
    assert [r.offset for r in target.records(TopicPartition('copy', 0))] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize('ddl, options, named', [
    ('key string', {'topic': 't'}, "needs a 'value' column"),
    ('value string', {}, "set the option topic or give the DataFrame a 'topic' column"),
    ('value string, partition int', {'topic': 't', 'preserveOffsets': 'true'}, "needs 'partition' and 'offset'"),
    ('value int', {'topic': 't'}, "column 'value' must be binary or string, got int"),
    ('value string', {'topic': 't', 'preserveOffset': 'true'}, "unknown option 'preserveoffset' for the kafka-kip sink"),
])
def test_bad_write_options_and_columns_fail_naming_them(spark, ddl, options, named):
    from pyspark.errors import AnalysisException

    frame = spark.createDataFrame([], ddl)
    with pytest.raises(AnalysisException) as caught:
        frame.write.format('kafka-kip').option('kafka.bootstrap.servers', '127.0.0.1:1').options(**options) \
            .mode('append').save()
    assert 'OptionError' in str(caught.value)
    assert named in str(caught.value)
