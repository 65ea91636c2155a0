"""``format("kafka-kip")`` on brokers without kafka-kip's extensions (the reference cluster with its features
off, and Tansu): a recreated topic caught through its topic id, preserved offsets written in checked mode.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(shutil.which('java') is None, reason='Spark needs java on PATH')
pytest.importorskip('pyspark')

from kafka_kip import KafkaConsumer, TopicPartition  # noqa: E402
from kafka_kip_reference import ReferenceCluster  # noqa: E402
from tests.spark.helpers import (  # noqa: E402
    idle,
    produce,
    read,
    start_collecting,
    wait_until,
)


class StockBroker:
    """A broker without kafka-kip's extensions, driven through clients only (as any Kafka cluster)."""

    def __init__(self, name: str, bootstrap_servers: str) -> None:
        self.name = name
        self.bootstrap_servers = bootstrap_servers

    def _admin(self) -> Any:
        from kafka_kip.admin import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap_servers)

    def create_topic(self, name: str, partitions: int) -> None:
        from kafka.errors import TopicAlreadyExistsError

        from kafka_kip.admin import NewTopic

        admin = self._admin()
        try:
            def created() -> bool:  # a topic being deleted still exists for a moment on some brokers
                try:
                    admin.create_topics([NewTopic(name, partitions, 1)])
                except TopicAlreadyExistsError:
                    return False
                return True
            wait_until(created, what=f'topic {name} created')
        finally:
            admin.close()

    def delete_topic(self, name: str) -> None:
        admin = self._admin()
        try:
            admin.delete_topics([name])
        finally:
            admin.close()

    def topic_id(self, name: str) -> str:
        admin = self._admin()
        try:
            [topic] = admin.describe_topics([name])
            return str(topic['topic_id'])
        finally:
            admin.close()

    def records(self, tp: TopicPartition) -> list[tuple]:
        """``(offset, key, value, headers, timestamp)`` of every record of ``tp``, up to its high watermark.

        The high watermark comes from a Fetch: Tansu 0.6 answers ListOffsets(latest) with its last batch's
        base offset + 1.
        """
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset='earliest')
        out: list[tuple] = []

        def read_all() -> bool:
            out.extend((r.offset, r.key, r.value, list(r.headers), r.timestamp)
                       for r in consumer.poll(timeout_ms=200).get(tp, ()))
            end = consumer.highwater(tp)
            return end is not None and consumer.position(tp) >= end

        try:
            consumer.assign([tp])
            wait_until(read_all, what=f'the records of {tp}')
            return out
        finally:
            consumer.close()


@pytest.fixture(params=['reference cluster, features off', 'tansu'])
def stock_broker(request: Any) -> Iterator[StockBroker]:
    if request.param == 'tansu':
        tansu = pytest.importorskip('integration.tansu')
        try:
            tansu.tansu_binary()
        except FileNotFoundError as exc:
            pytest.skip(str(exc))
        with tansu.TansuBroker() as broker:
            yield StockBroker(request.param, broker.bootstrap_servers)
    else:
        with ReferenceCluster(1, features=()) as cluster:
            yield StockBroker(request.param, cluster.bootstrap_servers)


def test_stock_broker_restart_after_topic_recreation_is_caught_through_the_topic_id(spark, stock_broker, tmp_path):
    from pyspark.errors import StreamingQueryException

    stock_broker.create_topic('events', 1)
    produce(stock_broker, 'events', {0: 4}, batch_per_record=True)
    rows: list[tuple] = []
    checkpoint = tmp_path / 'checkpoint'
    query = start_collecting(spark, stock_broker, checkpoint, rows)
    wait_until(lambda: len(rows) >= 4 and idle(checkpoint), what='4 rows')
    query.stop()
    [stored] = [json.loads(line) for line in (checkpoint / 'offsets' / '0').read_text().splitlines()[2:]]
    position = stored['events']['0']
    assert (position['offset'], position['partitionEpoch']) == (4, -1) and len(position['topicId']) == 36

    stock_broker.delete_topic('events')
    stock_broker.create_topic('events', 1)
    produce(stock_broker, 'events', {0: 6}, batch_per_record=True)
    query = start_collecting(spark, stock_broker, checkpoint, rows)
    with pytest.raises(StreamingQueryException) as caught:
        query.awaitTermination(60)
    assert (f"InvalidPartitionEpochError: events-0 at offset 4 with epochs (leader epoch 0, topic id "
            f"{position['topicId']}) belongs to another incarnation of the partition than this cluster's (leader "
            f"epoch 0, topic id {stock_broker.topic_id('events')}): the source topic was deleted and recreated"
            ) in str(caught.value)
    assert len(rows) == 4


def test_stock_broker_preserve_offsets_writes_in_checked_mode(spark, stock_broker):
    for topic, partitions in (('orders', 2), ('copy', 2), ('gap', 1)):
        stock_broker.create_topic(topic, partitions)
    produce(stock_broker, 'orders', {0: 3, 1: 4}, batch_per_record=True)
    frame = read(spark, stock_broker, subscribe='orders', includeHeaders='true')

    def copy(rows: Any, topic: str, **options: str) -> None:
        (rows.write.format('kafka-kip').option('kafka.bootstrap.servers', stock_broker.bootstrap_servers)
         .option('topic', topic).option('preserveOffsets', 'true').options(**options).mode('append').save())

    copy(frame, 'copy', **{'kafka.offset.mode': 'checked'})
    copy(frame, 'copy', **{'kafka.offset.mode': 'checked'})  # a re-executed job: every row is already there
    for p in range(2):
        tp = TopicPartition('orders', p)
        assert stock_broker.records(TopicPartition('copy', p)) == stock_broker.records(tp)
    assert [len(stock_broker.records(TopicPartition('copy', p))) for p in range(2)] == [3, 4]

    with pytest.raises(Exception) as caught:  # offsets the broker would have to place: refused, nothing written
        copy(frame.where('partition = 0'), 'gap')
    assert ("kafka_kip.errors.UnsupportedFeatureError: [Error 10007] UnsupportedFeatureError: Broker "
            in str(caught.value))
    assert "did not advertise feature 'kip.391' in ApiVersionsResponse SupportedFeatures" in str(caught.value)
    gapped = spark.createDataFrame([(0, 10, 'a'), (0, 11, 'b')], 'partition int, offset long, value string')
    with pytest.raises(Exception) as caught:  # a stock broker cannot leave offsets 0..9 out
        copy(gapped.coalesce(1), 'gap', **{'kafka.offset.mode': 'checked'})
    assert ("InvalidProduceOffsetError: [Error 10002] InvalidProduceOffsetError: cannot write records at offsets "
            "10-11 of TopicPartition(topic='gap', partition=0) (checked offset mode): the broker does not implement "
            "KIP-391, and a stock broker cannot leave a gap: it appends at its log end offset 0") in str(caught.value)
    assert stock_broker.records(TopicPartition('gap', 0)) == []
