"""Group sync of KIP-848 consumer groups: a ``group.protocol=consumer`` group's offsets on the source are synced
exactly, and a consumer-protocol consumer on the target (the reference cluster or Apache Kafka 4.4) resumes there;
a consumer group active on the target is left alone."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.structs import TopicPartition

from kafka_kip.mirror import Mirror
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.support.kip848_clusters import FAST_CONSUMER_GROUP_HEARTBEATS

pytestmark = pytest.mark.kip848
confluent_kafka = pytest.importorskip('confluent_kafka')
confluent_admin = pytest.importorskip('confluent_kafka.admin')


@pytest.fixture
def source() -> Iterator[ReferenceCluster]:
    with ReferenceCluster(1, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS) as cluster:
        yield cluster
        assert cluster.internal_errors == []


@pytest.fixture(params=['reference', 'apache-kafka'])
def target(request: pytest.FixtureRequest) -> str:
    if request.param == 'reference':
        return request.getfixturevalue('reference_cluster_factory')(
            1, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS).bootstrap_servers
    return request.getfixturevalue('apache_kafka').bootstrap_servers


def consumer(bootstrap: str, group: str, topic: str) -> Any:
    member = confluent_kafka.Consumer({'bootstrap.servers': bootstrap, 'group.id': group, 'group.protocol': 'consumer',
                                       'auto.offset.reset': 'latest', 'enable.auto.commit': False})
    member.subscribe([topic])
    return member


def group_type(bootstrap: str, group: str) -> str:
    admin = confluent_admin.AdminClient({'bootstrap.servers': bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=10).valid}
    return listed[group].type.name


def test_a_consumer_protocol_group_is_synced_and_resumed_exactly_by_a_consumer_protocol_consumer(
        source: ReferenceCluster, target: str) -> None:
    topic, group = f'orders-{uuid.uuid4().hex[:8]}', 'app848'
    source.create_topic(topic, partitions=2, replication_factor=1)
    producer = confluent_kafka.Producer({'bootstrap.servers': source.bootstrap_servers})
    for i in range(160):
        producer.produce(topic, key=f'k{i}', value=f'v{i}', partition=i % 2)
    assert producer.flush(30) == 0
    committing = consumer(source.bootstrap_servers, group, topic)
    try:
        wait_until(lambda: committing.poll(0.05) is None and len(committing.assignment()) == 2, 'both partitions')
        committing.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 70),
                                   confluent_kafka.TopicPartition(topic, 1, 40)], asynchronous=False)
    finally:
        committing.close()
    assert group_type(source.bootstrap_servers, group) == 'CONSUMER'

    with Mirror(source.bootstrap_servers, target, topic, groups=group) as mirror:
        summary = mirror.run(stop_at_end=True)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert {tp: c.offset for tp, c in summary.groups.committed[group].items()} == {tp0: 70, tp1: 40}

    resumed = consumer(target, group, topic)
    first: dict[int, tuple[int, str]] = {}
    try:
        def both_started() -> bool:
            message = resumed.poll(0.05)
            if message is not None:
                assert message.error() is None, message.error()
                first.setdefault(message.partition(), (message.offset(), message.value().decode()))
            return len(first) == 2

        wait_until(both_started, 'the first record of both partitions on the target', timeout=60)
        assert first == {0: (70, 'v140'), 1: (40, 'v81')}
        assert group_type(target, group) == 'CONSUMER'

        # The group is active on the target now: a newer source commit is not synced over its consumers.
        late = consumer(source.bootstrap_servers, group, topic)
        try:
            wait_until(lambda: late.poll(0.05) is None and len(late.assignment()) == 2, 'both partitions')
            late.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 75)], asynchronous=False)
        finally:
            late.close()
        with Mirror(source.bootstrap_servers, target, topic, groups=group) as mirror:
            summary = mirror.run(stop_at_end=True)
        assert (summary.groups.committed, summary.groups.skipped) == (
            {}, {group: 'the group is Stable on the target (it has active members there)'})
    finally:
        resumed.close()
