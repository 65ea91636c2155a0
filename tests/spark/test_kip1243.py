"""KIP-1243 in the Spark data source: a task's clients start from the driver's consistency context.

The driver plans from broker 0; the task (an executor) is bootstrapped on broker 2, whose metadata lags behind the
topic's creation. The task's consumer carries the driver's context, so broker 2 does not answer it from the old
metadata: the records are read, and broker 2 saw the context (a control records what each request carried).
The functions Spark calls are called directly here (the Spark tests beside this file run them in Spark).
"""
from __future__ import annotations

import pytest

pytest.importorskip('pyspark')

from kafka.protocol.api_key import ApiKey  # noqa: E402
from kafka.structs import TopicPartition  # noqa: E402

from kafka_kip import ConsistencyContext  # noqa: E402
from kafka_kip.policies import STOP  # noqa: E402
from kafka_kip.producer import KafkaProducer  # noqa: E402
from kafka_kip.spark.options import SUBSCRIBE, Subscription  # noqa: E402
from kafka_kip.spark.planner import SourcePlanner  # noqa: E402
from kafka_kip.spark.positions import Position  # noqa: E402
from kafka_kip.spark.records import OffsetRange, read_range, record_schema  # noqa: E402
from kafka_kip_reference import ReferenceCluster  # noqa: E402

pytestmark = pytest.mark.kip1243

TOPIC = 'events'


def address(cluster: ReferenceCluster, broker_id: int) -> str:
    broker = cluster.brokers()[broker_id]
    return f'{broker.host}:{broker.port}'


def test_a_task_reads_through_a_lagging_broker_with_the_drivers_context(reference_cluster_factory):
    cluster = reference_cluster_factory(broker_config={'metadata.consistency.wait.max.ms': 200})
    cluster.delay_metadata(2)
    cluster.create_topic(TOPIC, partitions=2, replication_factor=3)
    tp = TopicPartition(TOPIC, 1)
    with KafkaProducer(bootstrap_servers=address(cluster, 0)) as producer:
        for i in range(3):
            producer.send(TOPIC, b'v%d' % i, partition=1)
    seen_by_broker_2 = []
    cluster.control(ApiKey.Metadata, lambda request: seen_by_broker_2.append(request.consistency_state),
                    broker_id=2, keep=True)

    planner = SourcePlanner(address(cluster, 0), {}, Subscription(SUBSCRIBE, (TOPIC,)), STOP)
    try:
        planner.describe()
        context = planner.consistency_context()
    finally:
        planner.close()
    assert ConsistencyContext.from_bytes(context) == ConsistencyContext.of(cluster.cluster_id,
                                                                           cluster.metadata_offset())
    task = OffsetRange(tp, Position(0), 3, consistency_context=context)
    batches = list(read_range(address(cluster, 2), {}, task, record_schema(), STOP, 20_000))
    assert [value for batch in batches for value in batch.column('value').to_pylist()] == [b'v0', b'v1', b'v2']
    assert seen_by_broker_2 and all(state.consistency_token == cluster.metadata_offset()
                                    for state in seen_by_broker_2)
    assert cluster.metadata_offset(2) < cluster.metadata_offset()  # it still lags: the task read elsewhere


def test_tasks_without_a_context_start_as_before():
    task = OffsetRange(TopicPartition(TOPIC, 0), Position(0), 1)
    assert (task.consistency_context, task.target_consistency_context) == (b'', b'')
