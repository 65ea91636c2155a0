"""The ACL authorizer: who may do what on which resource, with Kafka's operations, errors and rules.

One cluster with SASL users, ``authorizer=True`` and a super user; ACLs created through kafka-python's admin
client. The matrix sends each API as each principal (raw requests, so that the answer's error code is what is
checked) and asserts Kafka's answer; the attacks of the issue (deleting another user's topic, group and records,
committing into its group) are tried with unmodified kafka-python clients and leave everything as it was.
"""
from __future__ import annotations

import pytest
from kafka import KafkaAdminClient as StockAdminClient
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import (
    GroupAuthorizationFailedError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafka.protocol.api_key import ApiKey
from kafka.structs import OffsetAndMetadata

import kafka_kip
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
from kafka_kip_reference.broker.acl import AclBinding, Authorizer
from kafka_kip_reference.broker.apis import HANDLERS
from kafka_kip_reference.broker.authorization import POLICIES
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.broker_process import BrokerProcess
from tests.support.consuming import read_to_end

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


@pytest.fixture(scope='module')
def cluster():
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

#: (principal, request, resource, Kafka's answer)
MATRIX = [
    # alice: everything on her prefixed topics, but the DENY on alice-secret wins; nothing on others
    ('alice', produce, 'alice-data', OK), ('alice', fetch, 'alice-data', OK),
    ('alice', follower_fetch, 'alice-data', TOPIC),
    ('alice', list_offsets, 'alice-data', OK), ('alice', metadata, 'alice-data', OK),
    ('alice', create_topic, 'alice-new', OK), ('alice', create_partitions, 'alice-data', OK),
    ('alice', describe_topic_configs, 'alice-data', OK), ('alice', delete_records, 'alice-data', OK),
    ('alice', delete_topic, 'alice-doomed', OK),
    ('alice', produce, 'alice-secret', TOPIC), ('alice', fetch, 'alice-secret', TOPIC),
    ('alice', metadata, 'alice-secret', TOPIC), ('alice', delete_topic, 'alice-secret', TOPIC),
    ('alice', produce, 'other', TOPIC), ('alice', create_topic, 'bob-new', TOPIC),
    ('alice', produce_with_offsets, 'alice-data', CLUSTER),  # REPLICATOR_WRITE is the mirror's only
    # her groups: READ on alice-*; DELETE only on alice-doomed-group
    ('alice', join_group, 'alice-group', MEMBER_ID_REQUIRED), ('alice', commit, 'alice-group', OK),
    ('alice', offset_fetch, 'alice-group', OK), ('alice', find_coordinator, 'alice-group', OK),
    ('alice', delete_group, 'alice-group', GROUP), ('alice', delete_group, 'alice-doomed-group', OK),
    ('alice', join_group, 'bob-group', GROUP), ('alice', leader_epochs_for_partition, 'alice-group', OK),
    # idempotence: WRITE on some topic is enough; transactions need their transactional id
    ('alice', init_producer_id, None, OK), ('alice', init_producer_id, 'alice-tx', OK),
    ('alice', init_producer_id, 'bob-tx', TXN),
    ('alice', describe_acls, None, CLUSTER), ('alice', describe_log_dirs, None, CLUSTER),
    ('alice', elect_leaders, 'alice-data', CLUSTER), ('alice', list_reassignments, None, CLUSTER),
    ('alice', alter_reassignments, None, CLUSTER), ('alice', describe_quorum, None, CLUSTER),
    ('alice', list_config_resources, None, CLUSTER), ('alice', end_txn, 'bob-tx', TXN),
    ('alice', describe_client_quotas, None, CLUSTER), ('alice', alter_client_quotas, 'app', CLUSTER),
    ('alice', describe_scram_credentials, None, CLUSTER), ('alice', alter_scram_credentials, 'alice', CLUSTER),
    ('alice', offset_for_leader_epoch, 'alice-data', OK), ('alice', offset_for_leader_epoch, 'other', TOPIC),
    ('alice', txn_offset_commit, 'other', TOPIC),  # her transactional id and group, a topic she may not read
    # bob: READ (hence DESCRIBE) on alice-shared only; his WRITE on 'other' is for another host
    ('bob', fetch, 'alice-shared', OK), ('bob', list_offsets, 'alice-shared', OK),
    ('bob', describe_producers, 'alice-shared', OK), ('bob', describe_producers, 'alice-data', TOPIC),
    ('bob', produce, 'alice-shared', TOPIC), ('bob', delete_topic, 'alice-shared', TOPIC),
    ('bob', fetch, 'alice-data', TOPIC), ('bob', produce, 'other', TOPIC),
    ('bob', commit, 'bob-group', TOPIC),  # his group, a topic he may not read
    ('bob', commit, 'alice-group', GROUP), ('bob', init_producer_id, None, CLUSTER),
    ('bob', leader_epochs_for_partition, 'bob-group', TOPIC),
    # everyone may DESCRIBE public, nothing else
    ('mallory', metadata, 'public', OK), ('mallory', list_offsets, 'public', OK),
    ('mallory', fetch, 'public', TOPIC), ('mallory', produce, 'public', TOPIC),
    ('mallory', delete_topic, 'alice-data', TOPIC), ('mallory', delete_records, 'alice-data', TOPIC),
    ('mallory', delete_group, 'alice-group', GROUP), ('mallory', commit, 'alice-group', GROUP),
    ('mallory', offset_fetch, 'alice-group', GROUP), ('mallory', find_coordinator, 'alice-group', GROUP),
    ('mallory', leader_epochs_for_partition, 'alice-group', GROUP),
    ('mallory', create_topic, 'mallory-topic', TOPIC), ('mallory', init_producer_id, None, CLUSTER),
    ('mallory', heartbeat, 'alice-group', GROUP), ('mallory', sync_group, 'alice-group', GROUP),
    ('mallory', leave_group, 'alice-group', GROUP),
    # the replicator: REPLICATOR_WRITE on the cluster and WRITE on its topic
    ('mirror', produce_with_offsets, 'mirrored', OK), ('mirror', produce, 'mirrored', OK),
    ('mirror', produce_with_offsets, 'alice-data', TOPIC),
    # the super user: everything, without ACLs
    ('admin', produce_with_offsets, 'other', OK), ('admin', delete_records, 'other', OK),
    ('admin', describe_acls, None, OK), ('admin', elect_leaders, 'other', 84),  # ELECTION_NOT_NEEDED
    ('admin', describe_log_dirs, None, OK), ('admin', join_group, 'any-group', MEMBER_ID_REQUIRED),
    ('admin', list_reassignments, None, OK), ('admin', alter_reassignments, None, OK),
    ('admin', list_config_resources, None, OK), ('admin', describe_client_quotas, None, OK),
    ('admin', alter_client_quotas, 'app', OK), ('admin', describe_scram_credentials, None, OK),
    ('admin', alter_scram_credentials, 'carol', OK),
]


@pytest.mark.parametrize('user, request_fn, resource, expected', MATRIX,
                         ids=[f'{user}-{fn.__name__}-{resource}' for user, fn, resource, _ in MATRIX])
def test_who_may_do_what_on_which_resource(cluster, user, request_fn, resource, expected):
    with login(cluster, user) as wire:
        assert request_fn(wire, resource) == expected
    assert cluster.internal_errors == []


def test_unauthorized_topics_and_groups_are_left_out_of_listings(cluster):
    with login(cluster, 'bob') as wire:
        listed = {t.name: t.error_code for t in wire.request(metadata_request(None)).topics}
        groups = {g.group_id for g in wire.request(REQUESTS[ApiKey.ListGroups](version=4, states_filter=[])).groups}
    assert listed == {'alice-shared': NONE, 'public': NONE}
    assert groups <= {'bob-group'}  # not alice's groups
    with login(cluster, 'admin') as wire:
        assert {'alice-group', 'alice-data'} <= {g.group_id for g in wire.request(
            REQUESTS[ApiKey.ListGroups](version=4, states_filter=[])).groups} | {t.name for t in wire.request(
                metadata_request(None)).topics}


def test_a_named_unknown_topic_is_not_created_without_create(cluster):
    with login(cluster, 'bob') as wire:
        request = metadata_request(['bob-auto'])
        request.allow_auto_topic_creation = True
        assert wire.request(request).topics[0].error_code == TOPIC
    with login(cluster, 'alice') as wire:
        request = metadata_request(['alice-auto'])
        request.allow_auto_topic_creation = True
        assert wire.request(request).topics[0].error_code == 5  # LEADER_NOT_AVAILABLE: being created
    assert cluster.topic_id('bob-auto') is None and cluster.topic_id('alice-auto') is not None


def test_the_attacks_of_the_issue_fail_and_change_nothing(cluster):
    """mallory, authenticated, tries on alice's topic and group what worked before the authorizer."""
    alice = dict(sasl_plain_username='alice', sasl_plain_password=USERS['alice'], **SASL)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id='alice-group',
                             enable_auto_commit=False, **alice)
    tp = TopicPartition('alice-data', 0)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(1, '', -1)})
    consumer.close()
    records = cluster.records(tp)
    mallory = dict(sasl_plain_username='mallory', sasl_plain_password=USERS['mallory'], **SASL)
    admin = StockAdminClient(bootstrap_servers=cluster.bootstrap_servers, **mallory)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            admin.delete_topics(['alice-data'])
        with pytest.raises(GroupAuthorizationFailedError):  # finding the group's coordinator needs DESCRIBE
            admin.delete_groups(['alice-group'])
        with pytest.raises(UnknownTopicOrPartitionError):  # its metadata is refused: kafka-python knows no leader
            admin.delete_records({tp: 0})
    finally:
        admin.close()
    intruder = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id='alice-group',
                             enable_auto_commit=False, **mallory)
    intruder.assign([tp])
    with pytest.raises(GroupAuthorizationFailedError):
        intruder.commit({tp: OffsetAndMetadata(0, '', -1)})
    intruder.close()
    assert cluster.records(tp) == records and cluster.topic_id('alice-data') is not None
    with login(cluster, 'alice') as wire:
        fetched = wire.request(REQUESTS[ApiKey.OffsetFetch](version=7, group_id='alice-group', topics=None, require_stable=False))
    assert [(t.name, p.committed_offset) for t in fetched.topics for p in t.partitions] == [('alice-data', 1)]


def test_a_refused_acks_0_produce_closes_the_connection_after_writing_what_was_allowed(cluster):
    """No answer is expected with acks=0: as Kafka, a refusal closes the connection so that the producer notices."""
    data, secret = TopicPartition('alice-data', 0), TopicPartition('alice-secret', 0)
    before = {tp: len(cluster.records(tp)) for tp in (data, secret)}
    both = produce_request('alice-data', 0, build_batch([(None, b'acks 0')]), acks=0)
    both.topic_data += produce_request('alice-secret', 0, build_batch([(None, b'acks 0')]), acks=0).topic_data
    with_offsets = produce_request('alice-data', 0, build_batch([(None, b'x')], base_offset=1000), acks=0,
                                   use_offset=True)
    for request in (both, with_offsets):
        with login(cluster, 'alice') as wire:
            wire.send(ApiKey.Produce, 9, request.encode(version=9))
            with pytest.raises(ConnectionError):
                wire.read_frame()
    assert {tp: len(cluster.records(tp)) for tp in (data, secret)} == {data: before[data] + 1,
                                                                       secret: before[secret]}
    with login(cluster, 'alice') as wire:  # an allowed acks=0 produce keeps the connection
        wire.send(ApiKey.Produce, 9, produce_request('alice-data', 0, build_batch([(None, b'fine')]), acks=0).encode(version=9))
        assert produce(wire, 'alice-data') == OK
    assert [r.value for r in cluster.records(data)][-2:] == [b'fine', b'x']


def test_the_transactional_id_is_checked_when_the_records_are_transactional(cluster):
    """As Kafka's ``RequestUtils.hasTransactionalRecords``: a transactional batch needs WRITE on the request's
    transactional id (none at all: refused); a plain batch is not checked against the id it names."""
    def answer(transactional_id, transactional):
        batch = build_batch([(None, b't')], producer_id=7, producer_epoch=0, base_sequence=0,
                            transactional=transactional)
        request = produce_request('alice-data', 0, batch, acks=1, transactional_id=transactional_id)
        with login(cluster, 'alice') as wire:
            partition = wire.request(request).responses[0].partition_responses[0]
        return partition.error_code

    before = len(cluster.records(TopicPartition('alice-data', 0)))
    assert [answer('bob-tx', True), answer(None, True)] == [TXN, TXN]
    assert len(cluster.records(TopicPartition('alice-data', 0))) == before
    assert answer('bob-tx', False) == OK


def test_kafka_pythons_admin_client_manages_acls(cluster):
    admin = StockAdminClient(bootstrap_servers=cluster.bootstrap_servers, sasl_plain_username='admin',
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
        with login(cluster, 'bob') as wire:
            assert create_topic(wire, 'bob-topic') == TOPIC  # WRITE is not CREATE
            assert produce(wire, 'other') == TOPIC
        [(_, deleted, error)] = admin.delete_acls([ACLFilter('User:bob', None, ACLOperation.WRITE,
                                                             ACLPermissionType.ALLOW, ResourcePatternFilter(
                                                                 ResourceType.TOPIC, 'bob-',
                                                                 ACLResourcePatternType.PREFIXED))])
        assert ([a.resource_pattern.resource_name for a in deleted], error.errno) == (['bob-'], 0)
    finally:
        admin.close()
    bob = StockAdminClient(bootstrap_servers=cluster.bootstrap_servers, sasl_plain_username='bob',
                           sasl_plain_password=USERS['bob'], **SASL)
    try:
        result = bob.create_acls([allow('User:bob', ACLOperation.ALL, ResourceType.TOPIC, '*')])
        assert result == {'succeeded': [], 'failed': [kafka_kip.errors.ClusterAuthorizationFailedError]}
    finally:
        bob.close()


def test_kafka_kips_admin_client_grants_and_reads_replicator_write(cluster):
    admin = kafka_kip.KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, sasl_plain_username='admin',
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
        with login(cluster, 'bob') as wire:  # REPLICATOR_WRITE alone: the topic still needs WRITE
            assert produce_with_offsets(wire, 'alice-shared') == TOPIC
        admin.delete_acls([kafka_kip.admin.ACLFilter('User:bob', None, operation, ACLPermissionType.ANY,
                                                     ResourcePatternFilter(ResourceType.ANY, None,
                                                                           ACLResourcePatternType.ANY))])
    finally:
        admin.close()


def test_invalid_acls_are_refused_with_kafkas_reasons(cluster):
    with login(cluster, 'admin') as wire:
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


def test_kafka_4_4s_two_phase_commit_is_an_operation_on_transactional_ids(cluster):
    """KIP-939's TWO_PHASE_COMMIT (15), which kafka-python's enum lacks: stored, described, reported."""
    grant = REQUESTS[ApiKey.CreateAcls].AclCreation(resource_type=ResourceType.TRANSACTIONAL_ID, resource_name='tpc-',
                                     resource_pattern_type=ACLResourcePatternType.PREFIXED, principal='User:carol',
                                     host='*', operation=15, permission_type=ACLPermissionType.ALLOW)
    with login(cluster, 'admin') as wire:
        assert [r.error_code for r in wire.request(REQUESTS[ApiKey.CreateAcls](version=3, creations=[grant])).results] == [OK]
        described = wire.request(REQUESTS[ApiKey.DescribeAcls](version=3, resource_type_filter=ResourceType.TRANSACTIONAL_ID,
                                              resource_name_filter=None, pattern_type_filter=1,
                                              principal_filter='User:carol', host_filter=None, operation=1,
                                              permission_type=1))
        assert [(r.resource_name, [a.operation for a in r.acls]) for r in described.resources] == [('tpc-', [15])]
        assert cluster.state.authorizer.authorized_operations(
            'User:carol', '127.0.0.1', ResourceType.TRANSACTIONAL_ID, 'tpc-1') == {15}  # it implies nothing
        filters = [REQUESTS[ApiKey.DeleteAcls].DeleteAclsFilter(
            resource_type_filter=ResourceType.TRANSACTIONAL_ID, resource_name_filter=None, pattern_type_filter=1,
            principal_filter='User:carol', host_filter=None, operation=15, permission_type=1)]
        deleted = wire.request(REQUESTS[ApiKey.DeleteAcls](version=3, filters=filters)).filter_results[0]
        assert [(a.resource_name, a.operation) for a in deleted.matching_acls] == [('tpc-', 15)]


def test_acl_changes_go_to_the_metadata_log(cluster):
    start = len(cluster.metadata_log())
    with login(cluster, 'admin') as wire:
        creation = REQUESTS[ApiKey.CreateAcls].AclCreation
        wire.request(REQUESTS[ApiKey.CreateAcls](version=3, creations=[creation(
            resource_type=3, resource_name='logged', resource_pattern_type=3, principal='User:bob', host='*',
            operation=3, permission_type=3)]))
    [record] = cluster.metadata_log(start)
    assert record.change == ('ACL created: (principal=User:bob, host=*, operation=READ, permissionType=ALLOW) on '
                             'GROUP:LITERAL:logged')


def test_without_an_authorizer_acl_apis_answer_security_disabled():
    with ReferenceCluster(brokers=1) as cluster:
        admin = StockAdminClient(bootstrap_servers=cluster.bootstrap_servers)
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


def test_every_api_the_brokers_handle_has_an_authorization_policy():
    assert sorted(key for key in HANDLERS if key not in POLICIES) == []


def test_anonymous_connections_are_user_anonymous():
    with ReferenceCluster(brokers=1, authorizer=True) as cluster:
        cluster.create_topic('t', 1, 1)
        with WireClient(cluster.brokers()[0]) as wire:
            assert produce(wire, 't') == TOPIC  # nothing is allowed until ACLs allow it
        cluster.add_acls(AclBinding(ResourceType.TOPIC, 't', ACLResourcePatternType.LITERAL, 'User:ANONYMOUS', '*',
                                    ACLOperation.WRITE, ACLPermissionType.ALLOW))
        with WireClient(cluster.brokers()[0]) as wire:
            assert produce(wire, 't') == OK
            assert produce_with_offsets(wire, 't') == CLUSTER  # no REPLICATOR_WRITE: unauthenticated writes append
        assert [r.offset for r in cluster.records(TopicPartition('t', 0))] == [0]


# -- the rules, on the authorizer itself ---------------------------------------------------------------------


def binding(principal: str, operation: int, name: str = 't', *, deny: bool = False, host: str = '*',
            pattern: int = ACLResourcePatternType.LITERAL, resource_type: int = ResourceType.TOPIC) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation,
                      ACLPermissionType.DENY if deny else ACLPermissionType.ALLOW)


def test_kafkas_rules_deny_wins_implied_describe_wildcards_prefixes_hosts():
    authorizer = Authorizer(super_users={'root'})
    for acl in (binding('User:a', ACLOperation.READ, 'orders'),
                binding('User:a', ACLOperation.READ, 'orders', deny=True, host='10.0.0.9'),
                binding('User:b', ACLOperation.ALL, 'team-', pattern=ACLResourcePatternType.PREFIXED),
                binding('User:b', ACLOperation.DELETE, 'team-keep', deny=True),
                binding('User:*', ACLOperation.ALTER_CONFIGS, '*'),
                binding('User:c', ACLOperation.READ, 'x', deny=True)):
        authorizer.create(acl)

    def may(user: str, operation: int, name: str, host: str = '127.0.0.1') -> bool:
        return authorizer.authorize(f'User:{user}', host, operation, ResourceType.TOPIC, name)

    assert may('a', ACLOperation.READ, 'orders') and may('a', ACLOperation.DESCRIBE, 'orders')  # READ => DESCRIBE
    assert not may('a', ACLOperation.WRITE, 'orders')
    assert not may('a', ACLOperation.READ, 'orders', host='10.0.0.9')  # the DENY of that host wins
    assert may('b', ACLOperation.WRITE, 'team-x') and not may('b', ACLOperation.WRITE, 'teamx')
    assert may('b', ACLOperation.READ, 'team-keep') and not may('b', ACLOperation.DELETE, 'team-keep')
    assert may('anyone', ACLOperation.DESCRIBE_CONFIGS, 'whatever')  # ALTER_CONFIGS => DESCRIBE_CONFIGS, User:*
    assert not may('anyone', ACLOperation.DESCRIBE, 'whatever')
    assert not may('c', ACLOperation.DESCRIBE, 'x')  # a DENY of READ implies no DENY of DESCRIBE: no ACL allows
    assert may('root', ACLOperation.DELETE, 'anything')  # a super user
    assert authorizer.authorized_operations('User:b', '127.0.0.1', ResourceType.TOPIC, 'team-keep') == {
        3, 4, 5, 7, 8, 10, 11}  # all but DELETE (6)
    # authorize_any: an ALLOW no DENY covers entirely (Kafka's authorizeByResourceType, used for idempotence)
    assert authorizer.authorize_any('User:b', '127.0.0.1', ACLOperation.WRITE, ResourceType.TOPIC)
    authorizer.create(binding('User:b', ACLOperation.WRITE, 'team', deny=True, pattern=ACLResourcePatternType.PREFIXED))
    assert not authorizer.authorize_any('User:b', '127.0.0.1', ACLOperation.WRITE, ResourceType.TOPIC)
    assert not authorizer.authorize_any('User:a', '127.0.0.1', ACLOperation.WRITE, ResourceType.TOPIC)


def test_unmodified_kafka_python_groups_and_transactions_under_acls(cluster):
    alice = dict(sasl_plain_username='alice', sasl_plain_password=USERS['alice'], **SASL)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, transactional_id='alice-tx', **alice)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send('alice-data', value=b'in a transaction', partition=0)
    producer.commit_transaction()
    producer.close()
    consumer = KafkaConsumer('alice-data', bootstrap_servers=cluster.bootstrap_servers, group_id='alice-readers',
                             auto_offset_reset='earliest', isolation_level='read_committed',
                             **alice)
    partitions = [TopicPartition('alice-data', p) for p in consumer.partitions_for_topic('alice-data')]
    values = [record.value for record in read_to_end(consumer, partitions)]
    consumer.commit()
    consumer.close()
    assert values[-1] == b'in a transaction'
    bob = dict(sasl_plain_username='bob', sasl_plain_password=USERS['bob'], **SASL)
    intruder = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, transactional_id='alice-tx', **bob)
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            intruder.init_transactions()
    finally:
        intruder.close()


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


def test_partly_authorized_requests_are_answered_per_resource(cluster):
    """Kafka's per-resource answers; kafka-python reads authorized-operations bitfields as sets of operation codes
    (None: Kafka's 'not sent', Integer.MIN_VALUE)."""
    with login(cluster, 'alice') as wire:
        fetch = fetch_request('alice-data', 0, 0)
        fetch.topics.append(fetch_request('alice-secret', 0, 0).topics[0])
        assert sorted((t.topic, t.partitions[0].error_code) for t in wire.request(fetch).responses) == [
            ('alice-data', OK), ('alice-secret', TOPIC)]
        only_refused = fetch_request('alice-secret', 0, 0, max_wait_ms=60_000, min_bytes=10**6)
        assert wire.request(only_refused).responses[0].partitions[0].error_code == TOPIC  # answered at once
        described = metadata_request(['alice-data', 'other'])
        described.include_topic_authorized_operations = True
        topics = {t.name: (t.error_code, t.authorized_operations) for t in wire.request(described).topics}
        assert topics == {'alice-data': (OK, {3, 4, 5, 6, 7, 8, 10, 11}), 'other': (TOPIC, None)}
        configs = REQUESTS[ApiKey.DescribeConfigs](version=4, include_synonyms=False, include_documentation=False, resources=[
            REQUESTS[ApiKey.DescribeConfigs].DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=['x'])
            for kind, name in ((2, 'alice-data'), (2, 'other'), (4, '0'), (32, 'alice-group'))])
        assert sorted((r.resource_type, r.resource_name, r.error_code) for r in wire.request(configs).results) == [
            (2, 'alice-data', OK), (2, 'other', TOPIC), (4, '0', CLUSTER), (32, 'alice-group', GROUP)]
        coordinators = wire.request(REQUESTS[ApiKey.FindCoordinator](version=4, key_type=0, coordinator_keys=['alice-group', 'bob-group']))
        assert sorted((c.key, c.error_code) for c in coordinators.coordinators) == [('alice-group', OK),
                                                                                     ('bob-group', GROUP)]
        groups = wire.request(REQUESTS[ApiKey.DescribeGroups](version=5, groups=['alice-group', 'bob-group'],
                                           include_authorized_operations=True)).groups
        assert sorted((g.group_id, g.error_code, g.authorized_operations) for g in groups) == [
            ('alice-group', OK, {3, 8}), ('bob-group', GROUP, None)]
        fetched = wire.request(REQUESTS[ApiKey.OffsetFetch](version=8, require_stable=False, groups=[
            REQUESTS[ApiKey.OffsetFetch].OffsetFetchRequestGroup(group_id=group, topics=None)
            for group in ('alice-group', 'bob-group')]))
        assert sorted((g.group_id, g.error_code, [t.name for t in g.topics]) for g in fetched.groups) == [
            ('alice-group', OK, ['alice-data']), ('bob-group', GROUP, [])]
        partitions = REQUESTS[ApiKey.DescribeTopicPartitions](version=0, response_partition_limit=100, cursor=None, topics=[
            REQUESTS[ApiKey.DescribeTopicPartitions].TopicRequest(name=name) for name in ('alice-data', 'public', 'other')])
        assert sorted((t.name, t.error_code, t.topic_authorized_operations)
                      for t in wire.request(partitions).topics) == [  # an int bitfield in this API
            ('alice-data', OK, sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))), ('other', TOPIC, -2**31),
            ('public', OK, 1 << 8)]
        txn = REQUESTS[ApiKey.AddPartitionsToTxn](version=3, v3_and_below_transactional_id='alice-tx', v3_and_below_producer_id=1,
                           v3_and_below_producer_epoch=0, v3_and_below_topics=[
                               REQUESTS[ApiKey.AddPartitionsToTxn].AddPartitionsToTxnTopic(name=name, partitions=[0])
                               for name in ('alice-data', 'other')])
        assert sorted((t.name, t.results_by_partition[0].partition_error_code)
                      for t in wire.request(txn).results_by_topic_v3_and_below) == [
            ('alice-data', 55), ('other', TOPIC)]  # OPERATION_NOT_ATTEMPTED: nothing is added
        offsets = REQUESTS[ApiKey.AddOffsetsToTxn](version=3, transactional_id='alice-tx', producer_id=1, producer_epoch=0,
                               group_id='bob-group')
        assert wire.request(offsets).error_code == GROUP
        by_id = REQUESTS[ApiKey.DeleteTopics](version=6, timeout_ms=5000, topics=[
            REQUESTS[ApiKey.DeleteTopics].DeleteTopicState(name=None, topic_id=cluster.topic_id('other'))])
        assert wire.request(by_id).responses[0].error_code == TOPIC
        cluster_ops = wire.request(REQUESTS[ApiKey.DescribeCluster](version=1, include_cluster_authorized_operations=True))
        assert cluster_ops.authorized_operations == set()  # no DESCRIBE on the cluster: 0, as Kafka answers
    with login(cluster, 'admin') as wire:
        cluster_ops = wire.request(REQUESTS[ApiKey.DescribeCluster](version=1, include_cluster_authorized_operations=True))
        assert cluster_ops.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
    assert cluster.internal_errors == []


def test_transactions_are_described_and_listed_to_who_may_describe_their_transactional_id(cluster):
    with login(cluster, 'admin') as wire:
        assert init_producer_id(wire, 'alice-tx') == OK
    with login(cluster, 'alice') as wire:  # her WRITE on alice-tx implies DESCRIBE
        assert (describe_transaction(wire, 'alice-tx'), describe_transaction(wire, 'bob-tx')) == (OK, TXN)
        assert 'alice-tx' in listed_transactions(wire)
    with login(cluster, 'bob') as wire:
        assert describe_transaction(wire, 'alice-tx') == TXN
        assert 'alice-tx' not in listed_transactions(wire)
    assert cluster.internal_errors == []
