"""KIP-253's broker side in the reference cluster, over real sockets.

- ``create_partitions`` bumps the leader epoch of every existing partition (a new epoch-cache entry at its log
  end, so OffsetForLeaderEpoch of the old epoch answers the log end at the expansion) and records for each
  new partition its prior partitions with their leader epochs from before the bump;
- Produce with a ``partition_count`` other than the topic's: INVALID_PARTITION_COUNT for that topic's
  partitions, nothing appended;
- LeaderEpochsForPartition (API key 10000), answered by the group coordinator;
- the Heartbeat position exchange (need_positions / positions), kept for one generation;
- a cluster without ``kip.253`` does none of it, as a stock broker.
"""
from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip import KafkaAdminClient
from kafka_kip.errors import InvalidPartitionCountError
from kafka_kip.protocol.constants import NONE, NOT_COORDINATOR, UNKNOWN_TOPIC_OR_PARTITION
from kafka_kip.protocol.messages import LEADER_EPOCHS_FOR_PARTITION_API_KEY, REQUESTS
from kafka_kip.protocol.requests import offset_for_leader_epoch_request, produce_request
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.positions import PositionExchange
from kafka_kip_reference.fixtures.wire_client import WireClient

pytestmark = pytest.mark.kip253

LEFP = REQUESTS[LEADER_EPOCHS_FOR_PARTITION_API_KEY]
HEARTBEAT = REQUESTS[ApiKey.Heartbeat]
JOIN, SYNC = REQUESTS[ApiKey.JoinGroup], REQUESTS[ApiKey.SyncGroup]


def _write(cluster, topic: str, partition: int, count: int) -> None:
    leader = cluster.leader(TopicPartition(topic, partition))
    with WireClient(cluster.brokers()[leader]) as wire:
        for i in range(count):
            response = wire.request(produce_request(topic, partition, build_batch([(b'k', b'%d' % i)])))
            assert response.responses[0].partition_responses[0].error_code == NONE


def _prior_epochs(cluster, group: str, topic: str, partitions: list[int], broker: int | None = None) -> tuple:
    broker = cluster.state.coordinator_for(group) if broker is None else broker
    with WireClient(cluster.brokers()[broker]) as wire:
        response = wire.request(LEFP(version=0, group_id=group, topics=[
            LEFP.LeaderEpochsForPartitionTopic(name=topic, partitions=partitions)]))
    if response.error_code:
        return response.error_code, None
    return NONE, {p.partition_index: (p.error_code, {q.partition_index: q.leader_epoch for q in p.prior_partitions})
                  for t in response.topics for p in t.partitions}


def _end_offset_for_epoch(cluster, tp: TopicPartition, epoch: int) -> tuple[int, int, int]:
    with WireClient(cluster.brokers()[cluster.leader(tp)]) as wire:
        answer = wire.request(offset_for_leader_epoch_request(tp.topic, tp.partition, epoch)).topics[0].partitions[0]
    return answer.error_code, answer.leader_epoch, answer.end_offset


def test_an_expansion_bumps_every_existing_partition_and_records_the_prior_epochs(reference_cluster):
    cluster = reference_cluster
    cluster.create_topic('t', 2, 3)
    _write(cluster, 't', 0, 3)
    _write(cluster, 't', 1, 1)
    cluster.create_partitions('t', 4)
    assert [cluster.leader_epoch(TopicPartition('t', p)) for p in range(4)] == [1, 1, 0, 0]
    assert cluster.epochs(TopicPartition('t', 0)) == [(0, 0), (1, 3)]
    assert cluster.epochs(TopicPartition('t', 1)) == [(0, 0), (1, 1)]
    # The threshold of a prior partition: the end of its pre-expansion epoch is the log end at the bump.
    _write(cluster, 't', 0, 2)
    assert _end_offset_for_epoch(cluster, TopicPartition('t', 0), 0) == (NONE, 0, 3)
    assert _prior_epochs(cluster, 'g', 't', [0, 1, 2, 3, 9]) == (NONE, {
        0: (NONE, {}), 1: (NONE, {}), 2: (NONE, {0: 0, 1: 0}), 3: (NONE, {0: 0, 1: 0}),
        9: (UNKNOWN_TOPIC_OR_PARTITION, {})})
    # A second expansion: every partition of the first one is a prior partition of the new ones.
    cluster.elect_leader(TopicPartition('t', 1), cluster.replicas(TopicPartition('t', 1))[1])  # epoch 2 on 1
    cluster.create_partitions('t', 6)
    assert [cluster.leader_epoch(TopicPartition('t', p)) for p in range(6)] == [2, 3, 1, 1, 0, 0]
    assert _prior_epochs(cluster, 'g', 't', [2, 4, 5])[1] == {
        2: (NONE, {0: 0, 1: 0}), 4: (NONE, {0: 1, 1: 2, 2: 0, 3: 0}), 5: (NONE, {0: 1, 1: 2, 2: 0, 3: 0})}
    assert _end_offset_for_epoch(cluster, TopicPartition('t', 0), 1) == (NONE, 1, 5)
    assert _end_offset_for_epoch(cluster, TopicPartition('t', 2), 0) == (NONE, 0, 0)


def test_leader_epochs_for_partition_is_answered_by_the_group_coordinator_only(reference_cluster):
    cluster = reference_cluster
    cluster.create_topic('t', 1, 3)
    cluster.create_partitions('t', 2)
    coordinator = cluster.state.coordinator_for('g')
    other = next(b for b in range(3) if b != coordinator)
    assert _prior_epochs(cluster, 'g', 't', [1], broker=other) == (NOT_COORDINATOR, None)
    assert _prior_epochs(cluster, 'g', 't', [1]) == (NONE, {1: (NONE, {0: 0})})


def _produce_with_count(cluster, partition_counts: dict[str, int]) -> dict[str, int]:
    """One ProduceRequest to broker 0 with a batch for partition 0 of every topic; error code per topic."""
    data = REQUESTS[ApiKey.Produce].TopicProduceData
    request = REQUESTS[ApiKey.Produce](version=9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        data(name=topic, partition_count=count, partition_data=[
            data.PartitionProduceData(index=0, records=build_batch([(b'k', b'v')]))])
        for topic, count in partition_counts.items()])
    with WireClient(cluster.brokers()[0]) as wire:
        response = wire.request(request)
    return {topic.name: topic.partition_responses[0].error_code for topic in response.responses}


def test_produce_with_another_partition_count_is_refused_for_that_topic_and_appends_nothing(reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    cluster.create_topic('a', 2, 1)
    cluster.create_topic('b', 1, 1)
    assert _produce_with_count(cluster, {'a': 2, 'b': -1}) == {'a': NONE, 'b': NONE}
    cluster.create_partitions('a', 4)
    refused = InvalidPartitionCountError.errno
    assert _produce_with_count(cluster, {'a': 2, 'b': 1}) == {'a': refused, 'b': NONE}
    assert _produce_with_count(cluster, {'a': 5, 'b': 7}) == {'a': refused, 'b': refused}
    assert _produce_with_count(cluster, {'a': 4}) == {'a': NONE}
    assert [r.offset for r in cluster.records(TopicPartition('a', 0))] == [0, 1]
    assert [r.offset for r in cluster.records(TopicPartition('b', 0))] == [0, 1]


def test_a_stock_cluster_neither_bumps_nor_refuses_nor_knows_the_api(reference_cluster_factory):
    cluster = reference_cluster_factory(1, features=())
    cluster.create_topic('a', 1, 1)
    cluster.create_partitions('a', 2)
    assert [cluster.leader_epoch(TopicPartition('a', p)) for p in range(2)] == [0, 0]
    assert _produce_with_count(cluster, {'a': 1}) == {'a': NONE}  # the unknown tag is ignored
    assert LEADER_EPOCHS_FOR_PARTITION_API_KEY not in cluster.api_versions
    with WireClient(cluster.brokers()[0]) as wire:
        wire.send(LEADER_EPOCHS_FOR_PARTITION_API_KEY, 0, LEFP(version=0, group_id='g', topics=[]).encode(version=0))
        with pytest.raises(ConnectionError):
            wire.read_frame()  # a broker closes the connection on an API key it does not know


def _join_alone(wire: WireClient, group: str) -> tuple[str, int]:
    protocol = [JOIN.JoinGroupRequestProtocol(name='range', metadata=b'm')]
    join = dict(version=7, group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                group_instance_id=None, protocol_type='consumer', protocols=protocol)
    member_id = wire.request(JOIN(member_id='', **join)).member_id
    joined = wire.request(JOIN(member_id=member_id, **join))
    assert joined.error_code == NONE
    synced = wire.request(SYNC(version=5, group_id=group, generation_id=joined.generation_id, member_id=member_id,
                               group_instance_id=None, protocol_type='consumer', protocol_name='range',
                               assignments=[SYNC.SyncGroupRequestAssignment(member_id=member_id, assignment=b'a')]))
    assert synced.error_code == NONE
    return member_id, joined.generation_id


def _heartbeat(wire: WireClient, group: str, member_id: str, generation: int, needs: dict[str, list[int]],
               reports: dict[tuple[str, int], int]) -> tuple[int, dict, dict]:
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in reports.items():
        by_topic.setdefault(topic, []).append(HEARTBEAT.PositionTopic.PartitionPosition(partition_index=partition,
                                                                                        offset=offset))
    response = wire.request(HEARTBEAT(
        version=4, group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None,
        need_positions=[HEARTBEAT.NeedPositionTopic(topic=t, partitions=ps) for t, ps in needs.items()] or None,
        positions=[HEARTBEAT.PositionTopic(topic=t, partitions=ps) for t, ps in by_topic.items()] or None))
    positions = {(t.topic, p.partition_index): p.offset for t in response.positions or () for p in t.partitions}
    needed = {t.topic: list(t.partitions) for t in response.need_positions or ()}
    return response.error_code, positions, needed


def test_heartbeats_exchange_the_positions_of_needed_partitions(reference_cluster):
    cluster = reference_cluster
    with WireClient(cluster.brokers()[cluster.state.coordinator_for('g')]) as wire:
        member, generation = _join_alone(wire, 'g')
        assert _heartbeat(wire, 'g', member, generation, {'t': [0, 1]}, {}) == (NONE, {}, {'t': [0, 1]})
        # reports of needed partitions are kept, others are not
        assert _heartbeat(wire, 'g', member, generation, {'t': [0, 1]}, {('t', 0): 7, ('t', 5): 3}) == (
            NONE, {('t', 0): 7}, {'t': [0, 1]})
        assert _heartbeat(wire, 'g', member, generation, {'t': [0, 1]}, {('t', 1): 4}) == (
            NONE, {('t', 0): 7, ('t', 1): 4}, {'t': [0, 1]})
        # needing nothing any more: nothing is kept
        assert _heartbeat(wire, 'g', member, generation, {}, {}) == (NONE, {}, {})
        assert _heartbeat(wire, 'g', member, generation, {'t': [0]}, {}) == (NONE, {}, {'t': [0]})
        # a member of another generation gets its error and no positions
        assert _heartbeat(wire, 'g', member, generation + 1, {'t': [0]}, {('t', 0): 9}) == (22, {}, {})


def test_the_position_exchange_forgets_reports_at_a_new_generation_and_needs_of_members_that_left():
    a, b = TopicPartition('t', 0), TopicPartition('t', 1)
    exchange = PositionExchange()
    assert exchange.exchange('m1', [a], {}) == ({}, frozenset({a}))
    assert exchange.exchange('m2', [b], {a: 10}) == ({}, frozenset({a, b}))
    assert exchange.exchange('m1', [a], {b: 4}) == ({a: 10}, frozenset({a, b}))
    assert exchange.exchange('m2', [b], {}) == ({b: 4}, frozenset({a, b}))
    exchange.new_generation()
    assert exchange.exchange('m1', [a], {}) == ({}, frozenset({a, b}))
    exchange.forget_member('m2')
    assert exchange.needed() == frozenset({a})


def test_kafka_kip_admin_api_versions_copes_with_the_extension_api_key(reference_cluster):
    admin = KafkaAdminClient(bootstrap_servers=reference_cluster.bootstrap_servers)
    try:
        versions = admin.api_versions()
    finally:
        admin.close()
    assert versions[LEADER_EPOCHS_FOR_PARTITION_API_KEY] == (0, 0)
    assert type(next(iter(k for k in versions if k != LEADER_EPOCHS_FOR_PARTITION_API_KEY))) is ApiKey
    assert versions[ApiKey.Produce] == (0, 13)
