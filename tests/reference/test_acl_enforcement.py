"""The ACL authorizer against clients: the attacks of the issue (deleting another user's topic, group and
records, committing into its group) fail with unmodified kafka-python and change nothing; acks=0 refusals,
transactional ids, groups and transactions under ACLs, anonymous connections.
"""
from __future__ import annotations

import pytest
from kafka import KafkaAdminClient as StockAdminClient
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourceType,
)
from kafka.errors import (
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafka.protocol.api_key import ApiKey
from kafka.structs import OffsetAndMetadata

from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import produce_request
from kafka_kip_reference.broker.acl import AclBinding
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.acl_helpers import (
    CLUSTER,
    OK,
    SASL,
    TOPIC,
    TXN,
    USERS,
    login,
    produce,
    produce_with_offsets,
)
from tests.support.consuming import read_to_end


def test_the_attacks_of_the_issue_fail_and_change_nothing(acl_cluster):
    """mallory, authenticated, tries on alice's topic and group what worked before the authorizer."""
    alice = dict(sasl_plain_username='alice', sasl_plain_password=USERS['alice'], **SASL)
    consumer = KafkaConsumer(bootstrap_servers=acl_cluster.bootstrap_servers, group_id='alice-group',
                             enable_auto_commit=False, **alice)
    tp = TopicPartition('alice-data', 0)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(1, '', -1)})
    consumer.close()
    records = acl_cluster.records(tp)
    mallory = dict(sasl_plain_username='mallory', sasl_plain_password=USERS['mallory'], **SASL)
    admin = StockAdminClient(bootstrap_servers=acl_cluster.bootstrap_servers, **mallory)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            admin.delete_topics(['alice-data'])
        with pytest.raises(GroupAuthorizationFailedError):  # finding the group's coordinator needs DESCRIBE
            admin.delete_groups(['alice-group'])
        with pytest.raises(UnknownTopicOrPartitionError):  # its metadata is refused: kafka-python knows no leader
            admin.delete_records({tp: 0})
    finally:
        admin.close()
    intruder = KafkaConsumer(bootstrap_servers=acl_cluster.bootstrap_servers, group_id='alice-group',
                             enable_auto_commit=False, **mallory)
    intruder.assign([tp])
    with pytest.raises(GroupAuthorizationFailedError):
        intruder.commit({tp: OffsetAndMetadata(0, '', -1)})
    intruder.close()
    assert acl_cluster.records(tp) == records and acl_cluster.topic_id('alice-data') is not None
    with login(acl_cluster, 'alice') as wire:
        fetched = wire.request(REQUESTS[ApiKey.OffsetFetch](version=7, group_id='alice-group', topics=None, require_stable=False))
    assert [(t.name, p.committed_offset) for t in fetched.topics for p in t.partitions] == [('alice-data', 1)]


def test_a_refused_acks_0_produce_closes_the_connection_after_writing_what_was_allowed(acl_cluster):
    """No answer is expected with acks=0: as Kafka, a refusal closes the connection so that the producer notices."""
    data, secret = TopicPartition('alice-data', 0), TopicPartition('alice-secret', 0)
    before = {tp: len(acl_cluster.records(tp)) for tp in (data, secret)}
    both = produce_request('alice-data', 0, build_batch([(None, b'acks 0')]), acks=0)
    both.topic_data += produce_request('alice-secret', 0, build_batch([(None, b'acks 0')]), acks=0).topic_data
    with_offsets = produce_request('alice-data', 0, build_batch([(None, b'x')], base_offset=1000), acks=0,
                                   use_offset=True)
    for request in (both, with_offsets):
        with login(acl_cluster, 'alice') as wire:
            wire.send(ApiKey.Produce, 9, request.encode(version=9))
            with pytest.raises(ConnectionError):
                wire.read_frame()
    assert {tp: len(acl_cluster.records(tp)) for tp in (data, secret)} == {data: before[data] + 1,
                                                                       secret: before[secret]}
    with login(acl_cluster, 'alice') as wire:  # an allowed acks=0 produce keeps the connection
        wire.send(ApiKey.Produce, 9, produce_request('alice-data', 0, build_batch([(None, b'fine')]), acks=0).encode(version=9))
        assert produce(wire, 'alice-data') == OK
    assert [r.value for r in acl_cluster.records(data)][-2:] == [b'fine', b'x']


def test_the_transactional_id_is_checked_when_the_records_are_transactional(acl_cluster):
    """As Kafka's ``RequestUtils.hasTransactionalRecords``: a transactional batch needs WRITE on the request's
    transactional id (none at all: refused); a plain batch is not checked against the id it names."""
    def answer(transactional_id, transactional):
        batch = build_batch([(None, b't')], producer_id=7, producer_epoch=0, base_sequence=0,
                            transactional=transactional)
        request = produce_request('alice-data', 0, batch, acks=1, transactional_id=transactional_id)
        with login(acl_cluster, 'alice') as wire:
            partition = wire.request(request).responses[0].partition_responses[0]
        return partition.error_code

    before = len(acl_cluster.records(TopicPartition('alice-data', 0)))
    assert [answer('bob-tx', True), answer(None, True)] == [TXN, TXN]
    assert len(acl_cluster.records(TopicPartition('alice-data', 0))) == before
    assert answer('bob-tx', False) == OK


def test_unmodified_kafka_python_groups_and_transactions_under_acls(acl_cluster):
    alice = dict(sasl_plain_username='alice', sasl_plain_password=USERS['alice'], **SASL)
    producer = KafkaProducer(bootstrap_servers=acl_cluster.bootstrap_servers, transactional_id='alice-tx', **alice)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send('alice-data', value=b'in a transaction', partition=0)
    producer.commit_transaction()
    producer.close()
    consumer = KafkaConsumer('alice-data', bootstrap_servers=acl_cluster.bootstrap_servers, group_id='alice-readers',
                             auto_offset_reset='earliest', isolation_level='read_committed',
                             **alice)
    partitions = [TopicPartition('alice-data', p) for p in consumer.partitions_for_topic('alice-data')]
    values = [record.value for record in read_to_end(consumer, partitions)]
    consumer.commit()
    consumer.close()
    assert values[-1] == b'in a transaction'
    bob = dict(sasl_plain_username='bob', sasl_plain_password=USERS['bob'], **SASL)
    intruder = KafkaProducer(bootstrap_servers=acl_cluster.bootstrap_servers, transactional_id='alice-tx', **bob)
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            intruder.init_transactions()
    finally:
        intruder.close()


@pytest.mark.reference_cluster(brokers=1, authorizer=True)
def test_anonymous_connections_are_user_anonymous(reference_cluster):
    reference_cluster.create_topic('t', 1, 1)
    with WireClient(reference_cluster.brokers()[0]) as wire:
        assert produce(wire, 't') == TOPIC  # nothing is allowed until ACLs allow it
    reference_cluster.add_acls(AclBinding(ResourceType.TOPIC, 't', ACLResourcePatternType.LITERAL, 'User:ANONYMOUS', '*',
                                ACLOperation.WRITE, ACLPermissionType.ALLOW))
    with WireClient(reference_cluster.brokers()[0]) as wire:
        assert produce(wire, 't') == OK
        assert produce_with_offsets(wire, 't') == CLUSTER  # no REPLICATOR_WRITE: unauthenticated writes append
    assert [r.offset for r in reference_cluster.records(TopicPartition('t', 0))] == [0]


# -- the rules, on the authorizer itself ---------------------------------------------------------------------
