"""Shared by the ACL tests: the users, ACLs and topics of their cluster, a login, and the requests of the
matrix (each returns the error code of what it asked for).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kafka import KafkaAdminClient as StockAdminClient
from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourceType,
)
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import (
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    NONE,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
from kafka_kip.protocol.messages import LEADER_EPOCHS_FOR_PARTITION_API_KEY, REQUESTS
from kafka_kip.protocol.requests import fetch_request, list_offsets_request, metadata_request, produce_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.fixtures.wire_client import WireClient

USERS = {'admin': 'admin-pw', 'alice': 'alice-pw', 'bob': 'bob-pw', 'mallory': 'mallory-pw', 'mirror': 'mirror-pw'}
TOPICS = ('alice-data', 'alice-secret', 'alice-shared', 'alice-doomed', 'public', 'mirrored', 'other')
MEMBER_ID_REQUIRED = 79
SASL = dict(security_protocol='SASL_PLAINTEXT', sasl_mechanism='SCRAM-SHA-256')


def allow(principal: str, operation: int, resource_type: int, name: str,
          pattern: int = ACLResourcePatternType.LITERAL, host: str = '*', deny: bool = False) -> ACL:
    return ACL(principal, host, ACLOperation(operation) if operation < 100 else operation,
               ACLPermissionType.DENY if deny else ACLPermissionType.ALLOW, ResourcePattern(resource_type, name, pattern))


ACLS = [
    allow('User:alice', ACLOperation.ALL, ResourceType.TOPIC, 'alice-', ACLResourcePatternType.PREFIXED),
    allow('User:alice', ACLOperation.ALL, ResourceType.TOPIC, 'alice-secret', deny=True),  # a DENY wins
    allow('User:alice', ACLOperation.READ, ResourceType.GROUP, 'alice-', ACLResourcePatternType.PREFIXED),
    allow('User:alice', ACLOperation.DELETE, ResourceType.GROUP, 'alice-doomed-group'),
    allow('User:alice', ACLOperation.WRITE, ResourceType.TRANSACTIONAL_ID, 'alice-tx'),
    allow('User:bob', ACLOperation.READ, ResourceType.TOPIC, 'alice-shared'),  # READ implies DESCRIBE
    allow('User:bob', ACLOperation.READ, ResourceType.GROUP, 'bob-group'),
    allow('User:bob', ACLOperation.WRITE, ResourceType.TOPIC, 'other', host='10.1.2.3'),  # not bob's host
    allow('User:*', ACLOperation.DESCRIBE, ResourceType.TOPIC, 'public'),
    allow('User:mirror', ACLOperation.WRITE, ResourceType.TOPIC, 'mirrored'),
]


@contextmanager
def running_acl_cluster() -> Iterator[ReferenceCluster]:
    """One broker with the SASL ``USERS``, ``authorizer=True``, super user admin and ``ACLS``; the ``TOPICS``
    (a record each) and groups alice-group and alice-doomed-group with committed offsets."""
    with ReferenceCluster(brokers=1, users=USERS, authorizer=True, super_users={'admin'},
                          replicator_principals={'mirror'}) as running:
        admin = StockAdminClient(bootstrap_servers=running.bootstrap_servers, sasl_plain_username='admin',
                                 sasl_plain_password=USERS['admin'], **SASL)
        try:
            assert admin.create_acls(ACLS)['failed'] == []
            admin.create_topics({name: {'num_partitions': 1, 'replication_factor': 1} for name in TOPICS})
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=running.bootstrap_servers, sasl_plain_username='admin',
                                 sasl_plain_password=USERS['admin'], **SASL)
        for name in TOPICS:
            producer.send(name, value=b'0', partition=0)
        producer.flush()
        producer.close()
        with login(running, 'admin') as wire:  # groups with committed offsets
            for group in ('alice-group', 'alice-doomed-group'):
                assert commit(wire, group) == NONE
        yield running


def login(cluster, user: str) -> WireClient:
    """A connection authenticated as ``user`` (SASL PLAIN)."""
    wire = WireClient(cluster.brokers()[0])
    assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN')).error_code == NONE
    assert wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=f'\0{user}\0{USERS[user]}'.encode())).error_code == NONE
    return wire


# -- the requests of the matrix: each returns the error code of what it asked for --------------------------------


def produce(wire, name):
    response = wire.request(produce_request(name, 0, build_batch([(None, b'x')]), acks=1))
    return response.responses[0].partition_responses[0].error_code


def produce_with_offsets(wire, name):
    response = wire.request(produce_request(name, 0, build_batch([(None, b'x')], base_offset=1000), acks=1,
                                            use_offset=True))
    return response.responses[0].partition_responses[0].error_code


def fetch(wire, name):
    return wire.request(fetch_request(name, 0, 0)).responses[0].partitions[0].error_code


def follower_fetch(wire, name):
    request = fetch_request(name, 0, 0)
    request.replica_id = 1  # a follower's fetch needs CLUSTER_ACTION on the cluster
    return wire.request(request).responses[0].partitions[0].error_code


def list_offsets(wire, name):
    return wire.request(list_offsets_request(name, 0, -1)).topics[0].partitions[0].error_code


def metadata(wire, name):
    return wire.request(metadata_request([name])).topics[0].error_code


def create_topic(wire, name):
    request = REQUESTS[ApiKey.CreateTopics](version=5, timeout_ms=5000, validate_only=True, topics=[REQUESTS[ApiKey.CreateTopics].CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])])
    return wire.request(request).topics[0].error_code


def delete_topic(wire, name):
    return wire.request(REQUESTS[ApiKey.DeleteTopics](version=5, topic_names=[name], timeout_ms=5000)).responses[0].error_code


def delete_records(wire, name):
    topic = REQUESTS[ApiKey.DeleteRecords].DeleteRecordsTopic
    request = REQUESTS[ApiKey.DeleteRecords](version=2, timeout_ms=5000, topics=[topic(name=name, partitions=[
        topic.DeleteRecordsPartition(partition_index=0, offset=0)])])
    return wire.request(request).topics[0].partitions[0].error_code


def create_partitions(wire, name):
    request = REQUESTS[ApiKey.CreatePartitions](version=3, timeout_ms=5000, validate_only=True, topics=[
        REQUESTS[ApiKey.CreatePartitions].CreatePartitionsTopic(name=name, count=2, assignments=None)])
    return wire.request(request).results[0].error_code


def describe_topic_configs(wire, name):
    request = REQUESTS[ApiKey.DescribeConfigs](version=4, include_synonyms=False, include_documentation=False, resources=[
        REQUESTS[ApiKey.DescribeConfigs].DescribeConfigsResource(resource_type=2, resource_name=name, configuration_keys=None)])
    return wire.request(request).results[0].error_code


def join_group(wire, group):
    request = REQUESTS[ApiKey.JoinGroup](version=5, group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                           member_id='', group_instance_id=None, protocol_type='consumer',
                           protocols=[REQUESTS[ApiKey.JoinGroup].JoinGroupRequestProtocol(name='range', metadata=b'')])
    return wire.request(request).error_code


def commit(wire, group, name='alice-data'):
    topic = REQUESTS[ApiKey.OffsetCommit].OffsetCommitRequestTopic
    request = REQUESTS[ApiKey.OffsetCommit](version=8, group_id=group, generation_id_or_member_epoch=-1, member_id='',
                          group_instance_id=None, topics=[topic(name=name, partitions=[
                              topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                 committed_leader_epoch=-1, committed_metadata='')])])
    return wire.request(request).topics[0].partitions[0].error_code


def offset_fetch(wire, group):
    request = REQUESTS[ApiKey.OffsetFetch](version=7, group_id=group, topics=None, require_stable=False)
    return wire.request(request).error_code


def leader_epochs_for_partition(wire, group, name='alice-data'):
    request = REQUESTS[LEADER_EPOCHS_FOR_PARTITION_API_KEY]
    response = wire.request(request(version=0, group_id=group, topics=[
        request.LeaderEpochsForPartitionTopic(name=name, partitions=[0])]))
    return response.error_code or response.topics[0].partitions[0].error_code


def find_coordinator(wire, group):
    return wire.request(REQUESTS[ApiKey.FindCoordinator](version=3, key=group, key_type=0)).error_code


def delete_group(wire, group):
    return wire.request(REQUESTS[ApiKey.DeleteGroups](version=2, groups_names=[group])).results[0].error_code


def init_producer_id(wire, transactional_id):
    request = REQUESTS[ApiKey.InitProducerId](version=4, transactional_id=transactional_id, transaction_timeout_ms=60_000,
                           producer_id=-1, producer_epoch=-1)
    return wire.request(request).error_code


def describe_acls(wire, _):
    request = REQUESTS[ApiKey.DescribeAcls](version=3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                           principal_filter=None, host_filter=None, operation=1, permission_type=1)
    return wire.request(request).error_code


def describe_log_dirs(wire, _):
    return wire.request(REQUESTS[ApiKey.DescribeLogDirs](version=4, topics=None)).error_code


def elect_leaders(wire, name):
    request = REQUESTS[ApiKey.ElectLeaders](version=2, election_type=0, timeout_ms=5000, topic_partitions=[
        REQUESTS[ApiKey.ElectLeaders].TopicPartitions(topic=name, partitions=[0])])
    response = wire.request(request)
    return response.error_code or response.replica_election_results[0].partition_result[0].error_code


def top_level_error(name: str, api_key: int, version: int, **fields):
    """The matrix request ``name``: API ``api_key`` whose answer's top-level error code is checked."""
    def send(wire, _):
        return wire.request(REQUESTS[api_key](version=version, **fields)).error_code
    send.__name__ = name
    return send


list_reassignments = top_level_error('list_reassignments', 46, 0, timeout_ms=5000, topics=None)
alter_reassignments = top_level_error('alter_reassignments', 45, 0, timeout_ms=5000,
                                      allow_replication_factor_change=True, topics=[])
describe_quorum = top_level_error('describe_quorum', 55, 1, topics=[])
list_config_resources = top_level_error('list_config_resources', 74, 1, resource_types=[])
describe_client_quotas = top_level_error('describe_client_quotas', 48, 1, components=[], strict=False)
describe_scram_credentials = top_level_error('describe_scram_credentials', 50, 0, users=None)


def describe_transaction(wire, transactional_id):
    request = REQUESTS[ApiKey.DescribeTransactions](version=0, transactional_ids=[transactional_id])
    return wire.request(request).transaction_states[0].error_code


def describe_producers(wire, name):
    request_class = REQUESTS[ApiKey.DescribeProducers]
    response = wire.request(request_class(version=0, topics=[request_class.TopicRequest(name=name, partition_indexes=[0])]))
    return response.topics[0].partitions[0].error_code


def listed_transactions(wire):
    request = REQUESTS[ApiKey.ListTransactions](version=2, state_filters=[], producer_id_filters=[], duration_filter=-1,
                                                transactional_id_pattern=None)
    return {t.transactional_id for t in wire.request(request).transaction_states}


def alter_client_quotas(wire, client_id):
    request_class = REQUESTS[ApiKey.AlterClientQuotas]
    entry = request_class.EntryData
    return wire.request(request_class(version=1, validate_only=True, entries=[entry(
        entity=[entry.EntityData(entity_type='client-id', entity_name=client_id)],
        ops=[entry.OpData(key='producer_byte_rate', value=1024.0, remove=False)])])).entries[0].error_code


def alter_scram_credentials(wire, user):
    request_class = REQUESTS[ApiKey.AlterUserScramCredentials]
    return wire.request(request_class(version=0, deletions=[], upsertions=[request_class.ScramCredentialUpsertion(
        name=user, mechanism=1, iterations=4096, salt=b'salt', salted_password=b'salted')])).results[0].error_code


def offset_for_leader_epoch(wire, name):
    topic = REQUESTS[ApiKey.OffsetForLeaderEpoch].OffsetForLeaderTopic
    request = REQUESTS[ApiKey.OffsetForLeaderEpoch](version=4, replica_id=-2, topics=[topic(topic=name, partitions=[
        topic.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])])
    return wire.request(request).topics[0].partitions[0].error_code


def txn_offset_commit(wire, name):
    topic = REQUESTS[ApiKey.TxnOffsetCommit].TxnOffsetCommitRequestTopic
    request = REQUESTS[ApiKey.TxnOffsetCommit](version=3, transactional_id='alice-tx', group_id='alice-group', producer_id=1,
                           producer_epoch=0, generation_id=-1, member_id='', group_instance_id=None, topics=[
                               topic(name=name, partitions=[topic.TxnOffsetCommitRequestPartition(
                                   partition_index=0, committed_offset=0, committed_leader_epoch=-1,
                                   committed_metadata='')])])
    return wire.request(request).topics[0].partitions[0].error_code


def end_txn(wire, transactional_id):
    return wire.request(REQUESTS[ApiKey.EndTxn](version=3, transactional_id=transactional_id, producer_id=1, producer_epoch=0,
                                     committed=True)).error_code


def heartbeat(wire, group):
    return wire.request(REQUESTS[ApiKey.Heartbeat](version=4, group_id=group, generation_id=1, member_id='m',
                                     group_instance_id=None)).error_code


def sync_group(wire, group):
    return wire.request(REQUESTS[ApiKey.SyncGroup](version=5, group_id=group, generation_id=1, member_id='m', group_instance_id=None,
                                     protocol_type='consumer', protocol_name='range', assignments=[])).error_code


def leave_group(wire, group):
    member = REQUESTS[ApiKey.LeaveGroup].MemberIdentity(member_id='m', group_instance_id=None)
    return wire.request(REQUESTS[ApiKey.LeaveGroup](version=3, group_id=group, members=[member])).error_code


OK, TOPIC, GROUP, CLUSTER, TXN = (NONE, TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
                                  CLUSTER_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
