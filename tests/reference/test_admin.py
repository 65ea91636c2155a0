"""The reference cluster's admin APIs, answered as Apache Kafka 4.x answers them: DescribeTopicPartitions,
ElectLeaders, AlterPartitionReassignments / ListPartitionReassignments, DescribeLogDirs, AlterReplicaLogDirs,
DescribeQuorum, DescribeConfigs (synonyms, node configs) and ListConfigResources."""
from __future__ import annotations

from kafka import TopicPartition
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import (
    ELECTION_NOT_NEEDED,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    INVALID_REQUEST,
    LOG_DIR_NOT_FOUND,
    NO_REASSIGNMENT_IN_PROGRESS,
    NONE,
    PREFERRED_LEADER_NOT_AVAILABLE,
    REPLICA_NOT_AVAILABLE,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_VERSION,
)
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import produce_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.support.clusters import cluster_with_topic_t

TP = TopicPartition('t', 0)
DEFAULT, STATIC = 5, 4


cluster = cluster_with_topic_t(brokers=3, partitions=2, replication_factor=2)


def ask(cluster: ReferenceCluster, request, broker_id: int = 0):
    with WireClient(cluster.brokers()[broker_id]) as wire:
        return wire.request(request)


# -- DescribeTopicPartitions ------------------------------------------------------------------------------


def describe_partitions(cluster, topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None):
    request_class = REQUESTS[ApiKey.DescribeTopicPartitions]
    answer = ask(cluster, request_class(
        version=0, topics=[request_class.TopicRequest(name=t) for t in topics], response_partition_limit=limit,
        cursor=None if cursor is None else request_class.Cursor(topic_name=cursor[0], partition_index=cursor[1])))
    rows = [(t.name, t.error_code, [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes)
                                    for p in t.partitions]) for t in answer.topics]
    next_cursor = answer.next_cursor
    return rows, None if next_cursor is None else (next_cursor.topic_name, next_cursor.partition_index)


def test_describe_topic_partitions_pages_through_topics_by_name(cluster):
    cluster.create_topic('a', 1, 1)
    assert describe_partitions(cluster, ['t', 'nope', 'a'], limit=2) == (
        [('a', NONE, [(0, 0, [0], [0])]), ('nope', UNKNOWN_TOPIC_OR_PARTITION, []), ('t', NONE, [(0, 0, [0, 1], [0, 1])])],
        ('t', 1))
    assert describe_partitions(cluster, ['t', 'nope', 'a'], limit=2, cursor=('t', 1)) == (
        [('t', NONE, [(1, 1, [1, 2], [1, 2])])], None)
    assert describe_partitions(cluster, [], limit=1) == ([('a', NONE, [(0, 0, [0], [0])])], ('t', 0))
    assert describe_partitions(cluster, ['a'], cursor=('t', 0))[0] == [('a', INVALID_REQUEST, [])]


# -- ElectLeaders -----------------------------------------------------------------------------------------


def elect(cluster, election_type: int, partitions: dict[str, list[int]] | None, version: int = 2, broker_id: int = 0):
    request_class = REQUESTS[ApiKey.ElectLeaders]
    answer = ask(cluster, request_class(
        version=version, election_type=election_type, timeout_ms=1000,
        topic_partitions=None if partitions is None else [
            request_class.TopicPartitions(topic=t, partitions=p) for t, p in partitions.items()]), broker_id)
    return [(r.topic, p.partition_id, p.error_code, p.error_message)
            for r in answer.replica_election_results for p in r.partition_result]


def test_preferred_election_moves_leadership_back_to_the_first_replica(cluster):
    assert elect(cluster, 0, {'t': [0, 1, 7]}) == [
        ('t', 0, ELECTION_NOT_NEEDED, 'Leader election not needed for topic partition.'),
        ('t', 1, ELECTION_NOT_NEEDED, 'Leader election not needed for topic partition.'),
        ('t', 7, UNKNOWN_TOPIC_OR_PARTITION, 'No such partition as t-7')]
    assert cluster.elect_leader(TP, 1) == 1
    assert elect(cluster, 0, None) == [('t', 0, NONE, None)]  # only the partition that needs it
    assert (cluster.leader(TP), cluster.leader_epoch(TP)) == (0, 2)
    cluster.elect_leader(TP, 1)
    cluster.pause_replication(TP, 0)  # the preferred replica leaves the ISR
    assert elect(cluster, 0, {'t': [0]}, version=0) == [('t', 0, PREFERRED_LEADER_NOT_AVAILABLE, None)]


def test_unclean_election_gives_a_leaderless_partition_a_live_replica(cluster):
    cluster.pause_replication(TP, 1)
    cluster.stop_broker(0)  # the only ISR member: no leader
    assert cluster.leader(TP) == -1
    assert elect(cluster, 1, {'t': [0, 1]}, broker_id=1) == [
        ('t', 0, NONE, None), ('t', 1, ELECTION_NOT_NEEDED, 'Leader election not needed for topic partition.')]
    assert (cluster.leader(TP), cluster.isr(TP)) == (1, [1])


# -- reassignments ----------------------------------------------------------------------------------------


def reassign(cluster, replicas: list[int] | None, version: int = 1, allow_factor_change: bool = True):
    request_class = REQUESTS[ApiKey.AlterPartitionReassignments]
    topic = request_class.ReassignableTopic
    answer = ask(cluster, request_class(
        version=version, timeout_ms=1000, allow_replication_factor_change=allow_factor_change,
        topics=[topic(name='t', partitions=[topic.ReassignablePartition(partition_index=0, replicas=replicas)])]))
    return answer.responses[0].partitions[0].error_code


def ongoing(cluster):
    answer = ask(cluster, REQUESTS[ApiKey.ListPartitionReassignments](version=0, timeout_ms=1000, topics=None))
    return [(t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
            for t in answer.topics for p in t.partitions]


def test_a_reassignment_to_running_brokers_completes_at_once_and_moves_the_data(cluster):
    with WireClient(cluster.brokers()[0]) as wire:
        wire.request(produce_request('t', 0, build_batch([(None, b'a'), (None, b'b')])))
    assert reassign(cluster, [1, 2]) == NONE
    assert (cluster.replicas(TP), cluster.isr(TP), cluster.leader(TP), cluster.leader_epoch(TP)) == ([1, 2], [1, 2], 1, 1)
    assert [r.value for r in cluster.records(TP, broker_id=2)] == [b'a', b'b']
    assert ongoing(cluster) == []


def test_a_reassignment_waits_for_a_stopped_broker_and_can_be_cancelled(cluster):
    cluster.stop_broker(2)
    assert reassign(cluster, [0, 2]) == NONE
    assert ongoing(cluster) == [('t', 0, [0, 2, 1], [2], [1])]
    assert reassign(cluster, None) == NONE  # cancelled: back to [0, 1]
    assert (ongoing(cluster), cluster.replicas(TP)) == ([], [0, 1])
    assert reassign(cluster, None) == NO_REASSIGNMENT_IN_PROGRESS
    assert reassign(cluster, [0, 2]) == NONE
    cluster.start_broker(2)
    assert (ongoing(cluster), cluster.replicas(TP), cluster.isr(TP)) == ([], [0, 2], [0, 2])


def test_invalid_reassignments_are_refused(cluster):
    assert reassign(cluster, [0, 9]) == INVALID_REPLICA_ASSIGNMENT
    assert reassign(cluster, [0, 0]) == INVALID_REPLICA_ASSIGNMENT
    assert reassign(cluster, [0, 1, 2], allow_factor_change=False) == INVALID_REPLICATION_FACTOR
    assert cluster.replicas(TP) == [0, 1]


# -- log directories --------------------------------------------------------------------------------------


def test_describe_log_dirs_lists_this_brokers_replicas_and_their_sizes(cluster):
    batch = build_batch([(None, b'x' * 50)])
    with WireClient(cluster.brokers()[0]) as wire:
        wire.request(produce_request('t', 0, batch))
    answer = ask(cluster, REQUESTS[ApiKey.DescribeLogDirs](version=4, topics=None), broker_id=1)
    [result] = answer.results
    assert (result.error_code, result.log_dir, result.total_bytes, result.usable_bytes) == (
        NONE, 'memory://broker-1', -1, -1)
    assert sorted((t.name, p.partition_index, p.partition_size, p.offset_lag) for t in result.topics
                  for p in t.partitions) == [('t', 0, len(batch), 0), ('t', 1, 0, 0)]


def test_moving_a_replica_to_its_own_log_dir_is_a_no_op(cluster):
    request_class = REQUESTS[ApiKey.AlterReplicaLogDirs]
    directory = request_class.AlterReplicaLogDir

    def move(path: str, partitions: list[int], topic: str = 't') -> list[int]:
        answer = ask(cluster, request_class(version=2, dirs=[directory(path=path, topics=[
            directory.AlterReplicaLogDirTopic(name=topic, partitions=partitions)])]))
        return [p.error_code for r in answer.results for p in r.partitions]

    assert move('memory://broker-0', [0, 1, 5]) == [NONE, REPLICA_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION]
    assert move('/var/lib/kafka', [0]) == [LOG_DIR_NOT_FOUND]


# -- DescribeQuorum ---------------------------------------------------------------------------------------


def quorum(cluster, broker_id: int = 0, topic: str = '__cluster_metadata'):
    request_class = REQUESTS[ApiKey.DescribeQuorum]
    answer = ask(cluster, request_class(version=2, topics=[request_class.TopicData(
        topic_name=topic, partitions=[request_class.TopicData.PartitionData(partition_index=0)])]), broker_id)
    p = answer.topics[0].partitions[0]
    return (p.error_code, p.leader_id, p.leader_epoch, p.high_watermark, [v.replica_id for v in p.current_voters],
            [o.replica_id for o in p.observers], [n.node_id for n in answer.nodes])


def test_describe_quorum_names_the_controller_as_leader_and_only_voter(cluster):
    error, leader, epoch, high_watermark, voters, observers, nodes = quorum(cluster)
    assert (error, leader, epoch, voters, observers, nodes) == (NONE, 0, 1, [0], [1, 2], [0])
    cluster.create_topic('more', 1, 1)
    assert quorum(cluster)[3] > high_watermark  # every metadata change is an entry of the metadata log
    cluster.stop_broker(0)
    assert quorum(cluster, broker_id=1)[1:3] == (1, 2)
    assert quorum(cluster, broker_id=1, topic='t')[0] == UNKNOWN_TOPIC_OR_PARTITION


# -- DescribeConfigs / ListConfigResources ----------------------------------------------------------------


def describe_configs(cluster, resource_type: int, name: str, keys: list[str] | None = None):
    request_class = REQUESTS[ApiKey.DescribeConfigs]
    answer = ask(cluster, request_class(version=4, include_synonyms=True, include_documentation=False, resources=[
        request_class.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                              configuration_keys=keys)]))
    result = answer.results[0]
    return result.error_code, result.error_message, {
        c.name: (c.value, c.read_only, c.config_source, c.config_type, [(s.name, s.value, s.source) for s in c.synonyms])
        for c in result.configs}


def test_broker_configs_carry_synonyms_and_the_nodes_own_settings(reference_cluster_factory):
    cluster = reference_cluster_factory(1, broker_config={'log.segment.bytes': '16777216'})
    address = cluster.brokers()[0]
    error, _, configs = describe_configs(cluster, 4, '0', ['log.segment.bytes', 'num.partitions', 'log.retention.ms',
                                                             'advertised.listeners', 'listeners', 'log.dirs'])
    assert error == NONE
    assert configs == {
        'log.segment.bytes': ('16777216', False, STATIC, 3, [('log.segment.bytes', '16777216', STATIC),
                                                             ('log.segment.bytes', '1073741824', DEFAULT)]),
        'num.partitions': ('1', True, DEFAULT, 3, [('num.partitions', '1', DEFAULT)]),
        'log.retention.ms': (None, False, DEFAULT, 5, []),
        'advertised.listeners': (f'PLAINTEXT://127.0.0.1:{address.port}', True, STATIC, 7,
                                 [('advertised.listeners', f'PLAINTEXT://127.0.0.1:{address.port}', STATIC)]),
        'listeners': (f'PLAINTEXT://127.0.0.1:{address.port}', False, STATIC, 7,
                      [('listeners', f'PLAINTEXT://127.0.0.1:{address.port}', STATIC)]),
        'log.dirs': ('memory://broker-0', True, STATIC, 7, [('log.dirs', 'memory://broker-0', STATIC)]),
    }
    assert describe_configs(cluster, 4, '') == (NONE, None, {})  # no cluster-wide dynamic defaults
    assert describe_configs(cluster, 4, '1')[:2] == (
        INVALID_REQUEST, 'Unexpected broker id, expected 0 or empty string, but received 1')


def test_topic_configs_report_the_broker_configs_they_default_to(reference_cluster_factory):
    cluster = reference_cluster_factory(1, broker_config={'log.segment.bytes': '16777216'})
    cluster.create_topic('t', 1, 1, configs={'cleanup.policy': 'compact'})
    error, _, configs = describe_configs(cluster, 2, 't', ['segment.bytes', 'retention.ms', 'max.message.bytes',
                                                           'cleanup.policy'])
    assert configs == {
        'segment.bytes': ('16777216', False, STATIC, 3, [('log.segment.bytes', '16777216', STATIC),
                                                         ('log.segment.bytes', '1073741824', DEFAULT)]),
        'retention.ms': ('604800000', False, DEFAULT, 5, []),
        'max.message.bytes': ('1048588', False, DEFAULT, 3, [('message.max.bytes', '1048588', DEFAULT)]),
        'cleanup.policy': ('compact', False, 1, 7, [('cleanup.policy', 'compact', 1),
                                                   ('log.cleanup.policy', 'delete', DEFAULT)]),
    }


def test_list_config_resources(cluster):
    def listed(version: int, types: list[int]) -> tuple[int, list[tuple[int, str]]]:
        answer = ask(cluster, REQUESTS[ApiKey.ListConfigResources](version=version, resource_types=types))
        return answer.error_code, [(r.resource_type, r.resource_name) for r in answer.config_resources]

    assert listed(0, []) == (NONE, [])  # v0: client metrics resources only
    assert listed(1, []) == (NONE, [(8, '0'), (8, '1'), (8, '2'), (4, '0'), (4, '1'), (4, '2'), (2, 't')])
    assert listed(1, [2, 32]) == (NONE, [(2, 't')])
    assert listed(1, [7]) == (UNSUPPORTED_VERSION, [])
