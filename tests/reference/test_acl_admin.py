"""Managing ACLs: kafka-python's and kafka_kip's admin clients, Kafka's reasons for refusing an ACL,
KIP-939's TWO_PHASE_COMMIT, the metadata log, the broker's command line, and the ACL APIs and
authorized-operations fields without an authorizer.
"""
from __future__ import annotations

import pytest
from kafka import KafkaAdminClient as StockAdminClient
from kafka import KafkaProducer
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import (
    SecurityDisabledError,
    TopicAuthorizationFailedError,
)
from kafka.protocol.api_key import ApiKey

import kafka_kip
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import metadata_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.acl_helpers import (
    OK,
    SASL,
    TOPIC,
    USERS,
    allow,
    create_topic,
    login,
    produce,
    produce_with_offsets,
)
from tests.reference.broker_process import BrokerProcess


def test_kafka_pythons_admin_client_manages_acls(acl_cluster):
    admin = StockAdminClient(bootstrap_servers=acl_cluster.bootstrap_servers, sasl_plain_username='admin',
                             sasl_plain_password=USERS['admin'], **SASL)
    try:
        everything_of_bob = ACLFilter('User:bob', None, ACLOperation.ANY, ACLPermissionType.ANY,
                                      ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
        found, error = admin.describe_acls(everything_of_bob)
        assert sorted((a.operation.name, a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
                       a.host) for a in found) == [('READ', 'GROUP', 'bob-group', '*'),
                                                   ('READ', 'TOPIC', 'alice-shared', '*'),
                                                   ('WRITE', 'TOPIC', 'other', '10.1.2.3')]
        grant = allow('User:bob', ACLOperation.WRITE, ResourceType.TOPIC, 'bob-', ACLResourcePatternType.PREFIXED)
        assert admin.create_acls([grant]) == {'succeeded': [grant], 'failed': []}
        with login(acl_cluster, 'bob') as wire:
            assert create_topic(wire, 'bob-topic') == TOPIC  # WRITE is not CREATE
            assert produce(wire, 'other') == TOPIC
        [(_, deleted, error)] = admin.delete_acls([ACLFilter('User:bob', None, ACLOperation.WRITE,
                                                             ACLPermissionType.ALLOW, ResourcePatternFilter(
                                                                 ResourceType.TOPIC, 'bob-',
                                                                 ACLResourcePatternType.PREFIXED))])
        assert ([a.resource_pattern.resource_name for a in deleted], error.errno) == (['bob-'], 0)
    finally:
        admin.close()
    bob = StockAdminClient(bootstrap_servers=acl_cluster.bootstrap_servers, sasl_plain_username='bob',
                           sasl_plain_password=USERS['bob'], **SASL)
    try:
        result = bob.create_acls([allow('User:bob', ACLOperation.ALL, ResourceType.TOPIC, '*')])
        assert result == {'succeeded': [], 'failed': [kafka_kip.errors.ClusterAuthorizationFailedError]}
    finally:
        bob.close()


def test_kafka_kips_admin_client_grants_and_reads_replicator_write(acl_cluster):
    admin = kafka_kip.KafkaAdminClient(bootstrap_servers=acl_cluster.bootstrap_servers, sasl_plain_username='admin',
                                       sasl_plain_password=USERS['admin'], **SASL)
    operation = kafka_kip.admin.ACLOperation.REPLICATOR_WRITE
    cluster_resource = kafka_kip.admin.ResourcePattern(ResourceType.CLUSTER, 'kafka-cluster')
    try:
        grant = kafka_kip.admin.ACL('User:bob', '*', operation, ACLPermissionType.ALLOW, cluster_resource)
        assert admin.create_acls([grant])['failed'] == []
        found, _ = admin.describe_acls(kafka_kip.admin.ACLFilter(
            None, None, operation, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.CLUSTER, 'kafka-cluster', ACLResourcePatternType.LITERAL)))
        assert sorted((a.principal, a.operation) for a in found) == [('User:bob', operation),
                                                                    ('User:mirror', operation)]
        assert int(operation) == 100
        with login(acl_cluster, 'bob') as wire:  # REPLICATOR_WRITE alone: the topic still needs WRITE
            assert produce_with_offsets(wire, 'alice-shared') == TOPIC
        admin.delete_acls([kafka_kip.admin.ACLFilter('User:bob', None, operation, ACLPermissionType.ANY,
                                                     ResourcePatternFilter(ResourceType.ANY, None,
                                                                           ACLResourcePatternType.ANY))])
    finally:
        admin.close()


def test_invalid_acls_are_refused_with_kafkas_reasons(acl_cluster):
    with login(acl_cluster, 'admin') as wire:
        creation = REQUESTS[ApiKey.CreateAcls].AclCreation
        request = REQUESTS[ApiKey.CreateAcls](version=3, creations=[
            creation(resource_type=4, resource_name='not-the-cluster', resource_pattern_type=3, principal='User:x',
                     host='*', operation=7, permission_type=3),
            creation(resource_type=2, resource_name='t', resource_pattern_type=1, principal='User:x', host='*',
                     operation=3, permission_type=3),
            creation(resource_type=2, resource_name='t', resource_pattern_type=3, principal='nobody', host='*',
                     operation=3, permission_type=3),
            creation(resource_type=2, resource_name='', resource_pattern_type=3, principal='User:x', host='*',
                     operation=3, permission_type=3)])
        results = [(r.error_code, r.error_message) for r in wire.request(request).results]
    assert results == [(42, 'The only valid name for the CLUSTER resource is kafka-cluster'),
                       (42, 'Invalid patternType ANY'),
                       (42, "Could not parse principal 'nobody': expected Type:Name"),
                       (42, 'Resource name should not be empty')]


def test_kafka_4_4s_two_phase_commit_is_an_operation_on_transactional_ids(acl_cluster):
    """KIP-939's TWO_PHASE_COMMIT (15), which kafka-python's enum lacks: stored, described, reported."""
    grant = REQUESTS[ApiKey.CreateAcls].AclCreation(resource_type=ResourceType.TRANSACTIONAL_ID, resource_name='tpc-',
                                     resource_pattern_type=ACLResourcePatternType.PREFIXED, principal='User:carol',
                                     host='*', operation=15, permission_type=ACLPermissionType.ALLOW)
    with login(acl_cluster, 'admin') as wire:
        assert [r.error_code for r in wire.request(REQUESTS[ApiKey.CreateAcls](version=3, creations=[grant])).results] == [OK]
        described = wire.request(REQUESTS[ApiKey.DescribeAcls](version=3, resource_type_filter=ResourceType.TRANSACTIONAL_ID,
                                              resource_name_filter=None, pattern_type_filter=1,
                                              principal_filter='User:carol', host_filter=None, operation=1,
                                              permission_type=1))
        assert [(r.resource_name, [a.operation for a in r.acls]) for r in described.resources] == [('tpc-', [15])]
        assert acl_cluster.state.authorizer.authorized_operations(
            'User:carol', '127.0.0.1', ResourceType.TRANSACTIONAL_ID, 'tpc-1') == {15}  # it implies nothing
        filters = [REQUESTS[ApiKey.DeleteAcls].DeleteAclsFilter(
            resource_type_filter=ResourceType.TRANSACTIONAL_ID, resource_name_filter=None, pattern_type_filter=1,
            principal_filter='User:carol', host_filter=None, operation=15, permission_type=1)]
        deleted = wire.request(REQUESTS[ApiKey.DeleteAcls](version=3, filters=filters)).filter_results[0]
        assert [(a.resource_name, a.operation) for a in deleted.matching_acls] == [('tpc-', 15)]


def test_acl_changes_go_to_the_metadata_log(acl_cluster):
    start = len(acl_cluster.metadata_log())
    with login(acl_cluster, 'admin') as wire:
        creation = REQUESTS[ApiKey.CreateAcls].AclCreation
        wire.request(REQUESTS[ApiKey.CreateAcls](version=3, creations=[creation(
            resource_type=3, resource_name='logged', resource_pattern_type=3, principal='User:bob', host='*',
            operation=3, permission_type=3)]))
    [record] = acl_cluster.metadata_log(start)
    assert record.change == ('ACL created: (principal=User:bob, host=*, operation=READ, permissionType=ALLOW) on '
                             'GROUP:LITERAL:logged')


def test_kafka_kip_broker_runs_the_authorizer_from_its_command_line():
    with BrokerProcess('--user', 'root=r', '--user', 'eve=e', '--authorizer', '--super-user', 'root') as broker:
        def producer(user: str, password: str) -> KafkaProducer:
            return KafkaProducer(bootstrap_servers=broker.bootstrap_servers, sasl_plain_username=user,
                                 sasl_plain_password=password, max_block_ms=10_000, **SASL)
        root = producer('root', 'r')
        assert root.send('cli-acl', value=b'v', partition=0).get(timeout=15).offset == 0
        root.close()
        eve = producer('eve', 'e')
        with pytest.raises(TopicAuthorizationFailedError):
            eve.send('cli-acl', value=b'v', partition=0).get(timeout=15)
        eve.close()


@pytest.mark.reference_cluster(brokers=1)
def test_without_an_authorizer_acl_apis_answer_security_disabled(reference_cluster):
    admin = StockAdminClient(bootstrap_servers=reference_cluster.bootstrap_servers)
    try:
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                          ResourcePatternFilter(ResourceType.ANY, None,
                                                                ACLResourcePatternType.ANY)))
    finally:
        admin.close()
    with pytest.raises(ValueError, match='super users need an authorizer'):
        ReferenceCluster(brokers=1, super_users={'admin'})
    with pytest.raises(TypeError, match="not the string 'admin': use {'admin'}"):
        ReferenceCluster(brokers=1, authorizer=True, super_users='admin')


def test_without_an_authorizer_every_operation_is_reported_authorized():
    """Kafka's authorized-operations fields without an authorizer: every operation of the resource type."""
    topic_ops, cluster_ops = {3, 4, 5, 6, 7, 8, 10, 11}, {5, 7, 8, 9, 10, 11, 12}
    with ReferenceCluster(brokers=1) as cluster, WireClient(cluster.brokers()[0]) as wire:
        cluster.create_topic('t', 1, 1)
        asked = metadata_request(['t', 'missing'], version=10)
        asked.include_topic_authorized_operations = asked.include_cluster_authorized_operations = True
        answer = wire.request(asked)
        assert ([t.authorized_operations for t in answer.topics], answer.authorized_operations) == (
            [topic_ops, topic_ops], cluster_ops)
        not_asked = wire.request(metadata_request(['t'], version=10))
        assert (not_asked.topics[0].authorized_operations, not_asked.authorized_operations) == (None, None)
        for include, expected in ((True, cluster_ops), (False, None)):
            described = wire.request(REQUESTS[ApiKey.DescribeCluster](version=1, include_cluster_authorized_operations=include))
            assert described.authorized_operations == expected
