"""The ACL authorizer, request by request: each API sent as each principal (raw requests, so that the
answer's error code is what is checked) gets Kafka's answer; listings leave out what a principal may not
describe; a partly authorized request is answered per resource. The cluster: tests/reference/acl_helpers.py.
"""
from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import NONE
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import fetch_request, metadata_request
from tests.reference.acl_helpers import (
    CLUSTER,
    GROUP,
    MEMBER_ID_REQUIRED,
    OK,
    TOPIC,
    TXN,
    alter_client_quotas,
    alter_reassignments,
    alter_scram_credentials,
    commit,
    create_partitions,
    create_topic,
    delete_group,
    delete_records,
    delete_topic,
    describe_acls,
    describe_client_quotas,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_scram_credentials,
    describe_topic_configs,
    describe_transaction,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    follower_fetch,
    heartbeat,
    init_producer_id,
    join_group,
    leader_epochs_for_partition,
    leave_group,
    list_config_resources,
    list_offsets,
    list_reassignments,
    listed_transactions,
    login,
    metadata,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    produce_with_offsets,
    sync_group,
    txn_offset_commit,
)

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
def test_who_may_do_what_on_which_resource(acl_cluster, user, request_fn, resource, expected):
    with login(acl_cluster, user) as wire:
        assert request_fn(wire, resource) == expected
    assert acl_cluster.internal_errors == []


def test_unauthorized_topics_and_groups_are_left_out_of_listings(acl_cluster):
    with login(acl_cluster, 'bob') as wire:
        listed = {t.name: t.error_code for t in wire.request(metadata_request(None)).topics}
        groups = {g.group_id for g in wire.request(REQUESTS[ApiKey.ListGroups](version=4, states_filter=[])).groups}
    assert listed == {'alice-shared': NONE, 'public': NONE}
    assert groups <= {'bob-group'}  # not alice's groups
    with login(acl_cluster, 'admin') as wire:
        assert {'alice-group', 'alice-data'} <= {g.group_id for g in wire.request(
            REQUESTS[ApiKey.ListGroups](version=4, states_filter=[])).groups} | {t.name for t in wire.request(
                metadata_request(None)).topics}


def test_a_named_unknown_topic_is_not_created_without_create(acl_cluster):
    with login(acl_cluster, 'bob') as wire:
        request = metadata_request(['bob-auto'])
        request.allow_auto_topic_creation = True
        assert wire.request(request).topics[0].error_code == TOPIC
    with login(acl_cluster, 'alice') as wire:
        request = metadata_request(['alice-auto'])
        request.allow_auto_topic_creation = True
        assert wire.request(request).topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION: being created
    assert acl_cluster.topic_id('bob-auto') is None and acl_cluster.topic_id('alice-auto') is not None


def test_partly_authorized_requests_are_answered_per_resource(acl_cluster):
    """Kafka's per-resource answers; kafka-python reads authorized-operations bitfields as sets of operation codes
    (None: Kafka's 'not sent', Integer.MIN_VALUE)."""
    with login(acl_cluster, 'alice') as wire:
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
            REQUESTS[ApiKey.DeleteTopics].DeleteTopicState(name=None, topic_id=acl_cluster.topic_id('other'))])
        assert wire.request(by_id).responses[0].error_code == TOPIC
        cluster_ops = wire.request(REQUESTS[ApiKey.DescribeCluster](version=1, include_cluster_authorized_operations=True))
        assert cluster_ops.authorized_operations == set()  # no DESCRIBE on the acl_cluster: 0, as Kafka answers
    with login(acl_cluster, 'admin') as wire:
        cluster_ops = wire.request(REQUESTS[ApiKey.DescribeCluster](version=1, include_cluster_authorized_operations=True))
        assert cluster_ops.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
    assert acl_cluster.internal_errors == []


def test_transactions_are_described_and_listed_to_who_may_describe_their_transactional_id(acl_cluster):
    with login(acl_cluster, 'admin') as wire:
        assert init_producer_id(wire, 'alice-tx') == OK
    with login(acl_cluster, 'alice') as wire:  # her WRITE on alice-tx implies DESCRIBE
        assert (describe_transaction(wire, 'alice-tx'), describe_transaction(wire, 'bob-tx')) == (OK, TXN)
        assert 'alice-tx' in listed_transactions(wire)
    with login(acl_cluster, 'bob') as wire:
        assert describe_transaction(wire, 'alice-tx') == TXN
        assert 'alice-tx' not in listed_transactions(wire)
    assert acl_cluster.internal_errors == []
