"""ACLs as unmodified admin clients see them, over SASL_SSL with SCRAM and a test CA, with the authorizer on.

confluent-kafka (librdkafka), kafka-python and kafka_kip create, describe and delete ACLs; confluent-kafka's
producer and consumer then obey them. KIP-391's REPLICATOR_WRITE (ACL operation 100, which only kafka_kip's
enum knows) is read back by each admin client as far as it can.
"""
from __future__ import annotations

import pytest
from kafka import KafkaAdminClient as StockAdminClient
from kafka import TopicPartition
from kafka.admin import ACL as StockACL
from kafka.admin import ACLFilter as StockACLFilter
from kafka.admin import ACLOperation as StockACLOperation
from kafka.admin import (
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

import kafka_kip
from kafka_kip.protocol.acl import REPLICATOR_WRITE
from kafka_kip_reference import ReferenceCluster
from tests.support.round_trips import confluent_round_trip

confluent_kafka = pytest.importorskip('confluent_kafka')
from confluent_kafka import admin as confluent_admin  # noqa: E402  (after the skip)

USERS = {'admin': 'admin-pw', 'bob': 'bob-pw', 'mirror': 'mirror-pw'}
CLUSTER_RESOURCE = ('kafka-cluster', ACLResourcePatternType.LITERAL)


@pytest.fixture(scope='module')
def cluster():
    with ReferenceCluster(brokers=1, users=USERS, tls=True, authorizer=True, super_users={'admin'},
                          replicator_principals={'mirror'}) as running:
        for name in ('bob-data', 'closed'):
            running.create_topic(name, 1, 1)
        yield running


def confluent_config(cluster, user: str) -> dict:
    return {'bootstrap.servers': cluster.bootstrap_servers, 'security.protocol': 'SASL_SSL',
            'ssl.ca.location': cluster.ssl_cafile, 'sasl.mechanism': 'SCRAM-SHA-512', 'sasl.username': user,
            'sasl.password': USERS[user]}


def python_security(cluster, user: str) -> dict:
    return dict(security_protocol='SASL_SSL', ssl_cafile=cluster.ssl_cafile, sasl_mechanism='SCRAM-SHA-256',
                sasl_plain_username=user, sasl_plain_password=USERS[user])


def everything_of(principal: str | None):
    return confluent_admin.AclBindingFilter(
        confluent_admin.ResourceType.ANY, None, confluent_admin.ResourcePatternType.ANY, principal, None,
        confluent_admin.AclOperation.ANY, confluent_admin.AclPermissionType.ANY)


def as_tuples(bindings) -> list[tuple]:
    return sorted((b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                   b.permission_type.name) for b in bindings)


def kafka_error_code(exc: confluent_kafka.KafkaException) -> int:
    return exc.args[0].code()


def test_confluent_kafkas_admin_client_manages_acls_and_its_clients_obey_them(cluster):
    admin = confluent_admin.AdminClient(confluent_config(cluster, 'admin'))
    prefixed = confluent_admin.ResourcePatternType.PREFIXED
    grants = [confluent_admin.AclBinding(kind, 'bob-', prefixed, 'User:bob', '*', operation,
                                         confluent_admin.AclPermissionType.ALLOW)
              for kind, operation in ((confluent_admin.ResourceType.TOPIC, confluent_admin.AclOperation.WRITE),
                                      (confluent_admin.ResourceType.TOPIC, confluent_admin.AclOperation.READ),
                                      (confluent_admin.ResourceType.GROUP, confluent_admin.AclOperation.READ))]
    assert [future.result() for future in admin.create_acls(grants, request_timeout=15).values()] == [None] * 3
    assert as_tuples(admin.describe_acls(everything_of('User:bob'), request_timeout=15).result()) == [
        ('GROUP', 'bob-', 'PREFIXED', 'User:bob', '*', 'READ', 'ALLOW'),
        ('TOPIC', 'bob-', 'PREFIXED', 'User:bob', '*', 'READ', 'ALLOW'),
        ('TOPIC', 'bob-', 'PREFIXED', 'User:bob', '*', 'WRITE', 'ALLOW')]

    bob = confluent_config(cluster, 'bob')
    assert confluent_round_trip(confluent_kafka, bob, 'bob-data', b'allowed', 'bob-readers') == 0
    producer = confluent_kafka.Producer({**bob, 'message.timeout.ms': 15_000})
    delivered = []
    producer.produce('closed', value=b'refused', partition=0, on_delivery=lambda error, _: delivered.append(error))
    assert producer.flush(20) == 0
    assert [error.code() for error in delivered] == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert cluster.records(TopicPartition('closed', 0)) == []

    bob_admin = confluent_admin.AdminClient(bob)
    [refused] = bob_admin.create_acls([confluent_admin.AclBinding(
        confluent_admin.ResourceType.TOPIC, '*', confluent_admin.ResourcePatternType.LITERAL, 'User:bob', '*',
        confluent_admin.AclOperation.ALL, confluent_admin.AclPermissionType.ALLOW)], request_timeout=15).values()
    with pytest.raises(confluent_kafka.KafkaException) as denied:
        refused.result()
    assert kafka_error_code(denied.value) == confluent_kafka.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # The broker answers DescribeAcls with CLUSTER_AUTHORIZATION_FAILED (tests/reference/test_acl_matrix.py's matrix reads it on the
    # wire); confluent-kafka 2.16 drops that error and returns no ACLs.
    assert bob_admin.describe_acls(everything_of(None), request_timeout=15).result() == []

    [deleted] = admin.delete_acls([everything_of('User:bob')], request_timeout=15).values()
    assert as_tuples(deleted.result()) == as_tuples(grants)
    assert [acl.principal for acl in cluster.acls()] == ['User:mirror']


def test_replicator_write_as_each_admin_client_sees_it(cluster):
    on_cluster = ResourcePatternFilter(ResourceType.CLUSTER, *CLUSTER_RESOURCE)
    # kafka_kip's admin client: the operation by name, and a grant of its own
    admin = kafka_kip.KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, **python_security(cluster, 'admin'))
    try:
        found, _ = admin.describe_acls(kafka_kip.admin.ACLFilter(
            None, None, kafka_kip.admin.ACLOperation.ANY, ACLPermissionType.ANY, on_cluster))
        assert [(a.principal, a.operation) for a in found] == [
            ('User:mirror', kafka_kip.admin.ACLOperation.REPLICATOR_WRITE)]
    finally:
        admin.close()

    # kafka-python's: its ACLOperation enum has no 100, so describing fails; it grants the plain number
    stock = StockAdminClient(bootstrap_servers=cluster.bootstrap_servers, **python_security(cluster, 'admin'))
    try:
        with pytest.raises(ValueError, match='100 is not a valid ACLOperation'):
            stock.describe_acls(StockACLFilter(None, None, StockACLOperation.ANY, ACLPermissionType.ANY, on_cluster))
        grant = StockACL('User:bob', '*', REPLICATOR_WRITE, ACLPermissionType.ALLOW,
                         ResourcePattern(ResourceType.CLUSTER, *CLUSTER_RESOURCE))
        result = stock.create_acls([grant])
        # compared by parts: kafka-python cannot repr an ACL of operation 100 in a failure message
        assert result['failed'] == [] and result['succeeded'] == [grant]
    finally:
        stock.close()
    assert sorted((acl.principal, acl.operation) for acl in cluster.acls()) == [
        ('User:bob', REPLICATOR_WRITE), ('User:mirror', REPLICATOR_WRITE)]

    # confluent-kafka's: librdkafka reads 100 as UNKNOWN (logging "unknown acl operation 100"); deleting by that
    # filter still removes the ACL on the broker
    confluent = confluent_admin.AdminClient(confluent_config(cluster, 'admin'))
    described = confluent.describe_acls(everything_of('User:bob'), request_timeout=15).result()
    assert as_tuples(described) == [('BROKER', 'kafka-cluster', 'LITERAL', 'User:bob', '*', 'UNKNOWN', 'ALLOW')]
    with pytest.raises(ValueError):  # it cannot name the operation to grant it
        confluent_admin.AclOperation(REPLICATOR_WRITE)
    [deleted] = confluent.delete_acls([everything_of('User:bob')], request_timeout=15).values()
    assert as_tuples(deleted.result()) == as_tuples(described)
    assert [(acl.principal, acl.operation) for acl in cluster.acls()] == [('User:mirror', REPLICATOR_WRITE)]
