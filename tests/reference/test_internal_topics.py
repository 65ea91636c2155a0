"""Kafka's internal topics on the reference cluster: created on first use, listed as internal, compacted,
refused to ordinary produce and DeleteRecords; and unknown topic configs refused as Kafka refuses them."""
from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.protocol.constants import (
    COORDINATOR_NOT_AVAILABLE,
    INVALID_CONFIG,
    INVALID_TOPIC_EXCEPTION,
    NONE,
    TOPIC_ALREADY_EXISTS,
)
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import produce_request
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.internal_topics import CONSUMER_OFFSETS, TRANSACTION_STATE
from kafka_kip_reference.broker.model import ClusterError
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.conftest import one_broker_address

GROUP, TRANSACTION = 0, 1


def find_coordinator(wire: WireClient, key_type: int, key: str):
    request_class = REQUESTS[ApiKey.FindCoordinator]
    return wire.request(request_class(version=4, key_type=key_type, coordinator_keys=[key])).coordinators[0]


def listed_topics(wire: WireClient) -> dict[str, tuple[bool, int, int]]:
    """name -> (is_internal, partitions, replication factor) of every topic Metadata lists."""
    request_class = REQUESTS[ApiKey.Metadata]
    answer = wire.request(request_class(version=12, topics=None, allow_auto_topic_creation=False,
                                        include_topic_authorized_operations=False))
    return {t.name: (t.is_internal, len(t.partitions), len(t.partitions[0].replica_nodes)) for t in answer.topics}


def test_find_coordinator_creates_the_internal_topics_with_kafkas_partition_counts(reference_cluster_factory):
    cluster = reference_cluster_factory(3)
    cluster.create_topic('t', 1, 1)
    with WireClient(cluster.brokers()[0]) as wire:
        assert listed_topics(wire) == {'t': (False, 1, 1)}  # none before first use
        assert find_coordinator(wire, GROUP, 'g').error_code == NONE
        assert listed_topics(wire) == {'t': (False, 1, 1), CONSUMER_OFFSETS: (True, 50, 3)}
        assert find_coordinator(wire, TRANSACTION, 'tx').error_code == NONE
        assert listed_topics(wire) == {'t': (False, 1, 1), CONSUMER_OFFSETS: (True, 50, 3),
                                       TRANSACTION_STATE: (True, 50, 3)}
        describe = REQUESTS[ApiKey.DescribeConfigs]
        described = wire.request(describe(version=4, include_synonyms=False, include_documentation=False, resources=[
            describe.DescribeConfigsResource(resource_type=2, resource_name=name, configuration_keys=['cleanup.policy'])
            for name in (CONSUMER_OFFSETS, TRANSACTION_STATE)]))
    assert [(r.resource_name, [(c.name, c.value, c.config_source) for c in r.configs]) for r in described.results] == [
        (CONSUMER_OFFSETS, [('cleanup.policy', 'compact', 1)]), (TRANSACTION_STATE, [('cleanup.policy', 'compact', 1)])]


def test_the_internal_topics_take_their_broker_configs(reference_cluster_factory):
    cluster = reference_cluster_factory(1, broker_config={'offsets.topic.num.partitions': 3,
                                                          'transaction.state.log.replication.factor': 3})
    with WireClient(cluster.brokers()[0]) as wire:
        assert find_coordinator(wire, GROUP, 'g').error_code == NONE
        # one live broker cannot hold three replicas: as Kafka, the coordinator is not available
        assert find_coordinator(wire, TRANSACTION, 'tx').error_code == COORDINATOR_NOT_AVAILABLE
        assert listed_topics(wire) == {CONSUMER_OFFSETS: (True, 3, 1)}


def test_ordinary_produce_and_delete_records_to_an_internal_topic_are_refused_as_kafka(reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    with WireClient(cluster.brokers()[0]) as wire:
        find_coordinator(wire, GROUP, 'g')
        produced = wire.request(produce_request(CONSUMER_OFFSETS, 0, build_batch([(None, b'x')])))
        delete = REQUESTS[ApiKey.DeleteRecords]
        deleted = wire.request(delete(version=2, timeout_ms=5000, topics=[delete.DeleteRecordsTopic(
            name=CONSUMER_OFFSETS, partitions=[delete.DeleteRecordsTopic.DeleteRecordsPartition(
                partition_index=0, offset=0)])]))
    answer = produced.responses[0].partition_responses[0]
    assert (answer.error_code, answer.base_offset) == (INVALID_TOPIC_EXCEPTION, -1)
    assert deleted.topics[0].partitions[0].error_code == INVALID_TOPIC_EXCEPTION
    assert cluster.log_end_offset(TopicPartition(CONSUMER_OFFSETS, 0)) == 0


def test_an_unknown_topic_config_is_refused_naming_it_as_kafka(reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    create = REQUESTS[ApiKey.CreateTopics]
    topic = create.CreatableTopic
    with WireClient(cluster.brokers()[0]) as wire:
        answer = wire.request(create(version=7, timeout_ms=5000, validate_only=False, topics=[
            topic(name='a', num_partitions=1, replication_factor=1, assignments=[],
                  configs=[topic.CreatableTopicConfig(name='not.a.real.topic.config', value='1')]),
            topic(name='b', num_partitions=1, replication_factor=1, assignments=[],
                  configs=[topic.CreatableTopicConfig(name='segment.ms', value='1000')])]))
    assert [(t.name, t.error_code, t.error_message) for t in answer.topics] == [
        ('a', INVALID_CONFIG, 'Unknown topic config name: not.a.real.topic.config'), ('b', NONE, None)]
    with pytest.raises(ClusterError, match='^Unknown topic config name: retention.msec$'):
        cluster.create_topic('c', 1, 1, configs={'retention.msec': '1'})


# -- side by side with Apache Kafka 4.4 -------------------------------------------------------------------------

#: the Apache Kafka fixture's settings of the internal topics
FIXTURE = {'offsets.topic.num.partitions': 5, 'transaction.state.log.num.partitions': 5,
           'transaction.state.log.min.isr': 1}


@pytest.fixture(params=['reference', 'apache-kafka'])
def one_broker(request) -> tuple[str, int]:
    """The address of a fresh one-broker cluster: the reference cluster, or Apache Kafka 4.4 of its own (this test
    deletes an internal topic, which the session's shared cluster must keep)."""
    return one_broker_address(request, FIXTURE, 'internal-topics')


def answers_about_internal_topics(wire: WireClient) -> list:
    """What a client learns of the internal topics and what it may do to them, request by request."""
    seen: list = [('listed before first use', listed_topics(wire))]
    for key_type, key in ((GROUP, 'g'), (TRANSACTION, 'tx')):
        # Apache Kafka answers COORDINATOR_NOT_AVAILABLE while the topic's partitions get their leaders
        wait_until(lambda key_type=key_type, key=key: find_coordinator(wire, key_type, key).error_code == NONE,
                   f'a coordinator for {key}')
        seen.append((f'listed after FindCoordinator {key}', listed_topics(wire)))
    describe = REQUESTS[ApiKey.DescribeConfigs]
    described = wire.request(describe(version=4, include_synonyms=False, include_documentation=False, resources=[
        describe.DescribeConfigsResource(resource_type=2, resource_name=name, configuration_keys=None)
        for name in (CONSUMER_OFFSETS, TRANSACTION_STATE)]))
    seen.append(('topic configs', {r.resource_name: {c.name: c.value for c in r.configs if c.config_source == 1}
                                   for r in described.results}))
    produced = wire.request(produce_request(CONSUMER_OFFSETS, 0, build_batch([(None, b'x')])))
    answer = produced.responses[0].partition_responses[0]
    seen.append(('produce', answer.error_code, answer.base_offset))
    delete = REQUESTS[ApiKey.DeleteRecords]
    deleted = wire.request(delete(version=2, timeout_ms=5000, topics=[delete.DeleteRecordsTopic(
        name=CONSUMER_OFFSETS, partitions=[delete.DeleteRecordsTopic.DeleteRecordsPartition(
            partition_index=0, offset=0)])]))
    seen.append(('delete records', deleted.topics[0].partitions[0].error_code))
    create = REQUESTS[ApiKey.CreateTopics]
    created = wire.request(create(version=7, timeout_ms=5000, validate_only=False, topics=[create.CreatableTopic(
        name=CONSUMER_OFFSETS, num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
    seen.append(('create', created.topics[0].error_code))
    delete_topics = REQUESTS[ApiKey.DeleteTopics]
    dropped = wire.request(delete_topics(version=6, timeout_ms=5000, topics=[
        delete_topics.DeleteTopicState(name=TRANSACTION_STATE, topic_id=None)]))
    seen.append(('delete topic', dropped.responses[0].error_code, dropped.responses[0].error_message))
    return seen


def test_the_internal_topics_as_apache_kafka_has_them(one_broker):
    with WireClient(one_broker) as wire:
        seen = answers_about_internal_topics(wire)
    both = {CONSUMER_OFFSETS: (True, 5, 1), TRANSACTION_STATE: (True, 5, 1)}
    assert seen == [
        ('listed before first use', {}),
        ('listed after FindCoordinator g', {CONSUMER_OFFSETS: (True, 5, 1)}),
        ('listed after FindCoordinator tx', both),
        ('topic configs', {
            CONSUMER_OFFSETS: {'cleanup.policy': 'compact', 'compression.type': 'producer',
                               'segment.bytes': '104857600'},
            TRANSACTION_STATE: {'cleanup.policy': 'compact', 'compression.type': 'uncompressed',
                                'min.insync.replicas': '1', 'segment.bytes': '104857600',
                                'unclean.leader.election.enable': 'false'}}),
        ('produce', INVALID_TOPIC_EXCEPTION, -1),
        ('delete records', INVALID_TOPIC_EXCEPTION),
        ('create', TOPIC_ALREADY_EXISTS),
        ('delete topic', NONE, None),  # Kafka's brokers let an internal topic be deleted (its tools refuse)
    ]
