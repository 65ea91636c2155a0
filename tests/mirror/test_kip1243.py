"""KIP-1243 in the mirror: it creates its target topics and produces to them through one consistency store.

The target's broker 2 lags behind the topic the mirror creates, and the mirror knows the target by broker 2 only.
Its target client (topic creation, produce, offset map) shares one store, so the topic it created is never
looked up in broker 2's old metadata: every record is copied, and no Produce request of the mirror is refused.
"""
from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.mirror import Mirror
from kafka_kip.producer import KafkaProducer
from kafka_kip_reference import ReferenceCluster

pytestmark = pytest.mark.kip1243


def address(cluster: ReferenceCluster, broker_id: int) -> str:
    broker = cluster.brokers()[broker_id]
    return f'{broker.host}:{broker.port}'


def test_the_mirror_writes_to_the_topic_it_created_through_a_lagging_broker(reference_cluster_factory):
    source = reference_cluster_factory(brokers=3)
    target = reference_cluster_factory(broker_config={'metadata.consistency.wait.max.ms': 200})
    # replication 3 on the source, so on the target too: a lagging broker cannot lead a partition created meanwhile
    source.create_topic('orders', partitions=3, replication_factor=3)
    with KafkaProducer(bootstrap_servers=source.bootstrap_servers) as producer:
        for i in range(30):
            producer.send('orders', b'v%d' % i, partition=i % 3)
    target.delay_metadata(2)
    refused = []
    target.control(ApiKey.Produce, lambda request: refused.append(request) if request.consistency_state is None
                   else None, keep=True)  # every Produce of the mirror carries the target context
    with Mirror(source.bootstrap_servers, address(target, 2), 'orders') as mirror:
        summary = mirror.run(stop_at_end=True)
        context = mirror.target.manager.consistency.store.read()
    assert summary.records == 30 and summary.incidents == []
    assert refused == []
    created = next(r.offset for r in target.metadata_log() if r.change.startswith('create topic orders'))
    assert context.cluster_id == target.cluster_id and context.offset >= created
    assert [len(target.records(TopicPartition('orders', p))) for p in range(3)] == [10, 10, 10]
    assert target.metadata_offset(2) < created  # broker 2 never caught up: the mirror read from the others
