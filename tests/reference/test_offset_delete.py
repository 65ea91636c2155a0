"""OffsetDelete with kafka-python's unmodified admin ``delete_group_offsets``, the same calls against the reference
cluster and Apache Kafka 4.4 with the same results: a subscribed topic keeps its offsets (GROUP_SUBSCRIBED_TO_TOPIC),
the others are deleted."""
from __future__ import annotations

import uuid

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NoError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import OffsetAndMetadata

from kafka_kip import KafkaConsumer
from kafka_kip_reference.fixtures.conditions import wait_until


@pytest.fixture(params=['reference', 'apache-kafka'])
def bootstrap(request, reference_cluster_factory) -> str:
    if request.param == 'reference':
        return reference_cluster_factory(1, broker_config={'group.initial.rebalance.delay.ms': 0}).bootstrap_servers
    return request.getfixturevalue('apache_kafka').bootstrap_servers


def test_offset_delete_keeps_subscribed_topics_as_apache_kafka(bootstrap):
    suffix = uuid.uuid4().hex[:8]
    subscribed, other, group = f'subscribed-{suffix}', f'other-{suffix}', f'group-{suffix}'
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(subscribed, 2, 1), NewTopic(other, 1, 1)])
    consumer = KafkaConsumer(subscribed, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        wait_until(lambda: consumer.poll(timeout_ms=100) is not None and consumer.assignment(), 'an assignment')
        committed = {TopicPartition(subscribed, 0): 3, TopicPartition(subscribed, 1): 4, TopicPartition(other, 0): 5}
        consumer.commit({tp: OffsetAndMetadata(offset, '', -1) for tp, offset in committed.items()})
        answer = admin.delete_group_offsets(group, [TopicPartition(subscribed, 0), TopicPartition(other, 0),
                                                    TopicPartition(other, 7)])
        assert answer == {TopicPartition(subscribed, 0): GroupSubscribedToTopicError,
                          TopicPartition(other, 0): NoError, TopicPartition(other, 7): UnknownTopicOrPartitionError}
        remaining = admin.list_group_offsets(group)[group]
        assert {tp: meta.offset for tp, meta in remaining.items()} == {
            TopicPartition(subscribed, 0): 3, TopicPartition(subscribed, 1): 4}
        consumer.close()  # the group empties: nothing is subscribed any more
        assert admin.delete_group_offsets(group, [TopicPartition(subscribed, 0)]) == {
            TopicPartition(subscribed, 0): NoError}
        assert {tp: meta.offset for tp, meta in admin.list_group_offsets(group)[group].items()} == {
            TopicPartition(subscribed, 1): 4}
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets(f'no-such-{group}', [TopicPartition(other, 0)])
    finally:
        consumer.close()
        admin.delete_topics([subscribed, other])
        admin.close()


def test_offset_delete_of_a_kip848_group_keeps_subscribed_topics_as_apache_kafka(bootstrap):
    """The same for a consumer group of the KIP-848 protocol (confluent-kafka's ``group.protocol=consumer``)."""
    confluent_kafka = pytest.importorskip('confluent_kafka')
    suffix = uuid.uuid4().hex[:8]
    subscribed, other, group = f'subscribed-{suffix}', f'other-{suffix}', f'group848-{suffix}'
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(subscribed, 2, 1), NewTopic(other, 1, 1)])
    consumer = confluent_kafka.Consumer({'bootstrap.servers': bootstrap, 'group.id': group,
                                         'group.protocol': 'consumer', 'enable.auto.commit': False})
    try:
        consumer.subscribe([subscribed])
        wait_until(lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 2, 'an assignment',
                   timeout=120)
        consumer.commit(offsets=[confluent_kafka.TopicPartition(subscribed, 0, 3),
                                 confluent_kafka.TopicPartition(subscribed, 1, 4),
                                 confluent_kafka.TopicPartition(other, 0, 5)], asynchronous=False)
        answer = admin.delete_group_offsets(group, [TopicPartition(subscribed, 0), TopicPartition(other, 0)])
        assert answer == {TopicPartition(subscribed, 0): GroupSubscribedToTopicError, TopicPartition(other, 0): NoError}
        assert {tp: meta.offset for tp, meta in admin.list_group_offsets(group)[group].items()} == {
            TopicPartition(subscribed, 0): 3, TopicPartition(subscribed, 1): 4}
    finally:
        consumer.close()
        admin.delete_topics([subscribed, other])
        admin.close()
