"""KIP-253's position exchange in KIP-848 consumer groups: the tagged fields of ConsumerGroupHeartbeat on a broker
advertising ``kip.253`` (docs/PROTOCOL.md, "KIP-253 in consumer groups"), on the group objects and on the wire."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.protocol.messages import REQUESTS
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.test_kip848_groups import join, make_group

pytestmark = [pytest.mark.kip848, pytest.mark.kip253]

ConsumerGroupHeartbeat = REQUESTS[ApiKey.ConsumerGroupHeartbeat]
T1_0, T1_4 = TopicPartition('t1', 0), TopicPartition('t1', 4)


def test_only_the_owner_of_a_partition_reports_its_position_and_a_release_drops_the_report() -> None:
    group, _, _ = make_group(t1=6)
    join(group, 'A')
    join(group, 'B')  # A holds 0-5 until it revokes 3-5 (its heartbeat has not reported yet)
    assert group.exchange_positions('B', [T1_0], {}) == ({}, frozenset({T1_0}))
    assert group.exchange_positions('A', [], {T1_0: 42, T1_4: 9}) == ({}, frozenset({T1_0}))
    assert group.exchange_positions('B', [T1_0], {T1_0: 99}) == ({T1_0: 42}, frozenset({T1_0}))
    group.fence('A')  # A's partitions are released: its report of t1-0 no longer holds
    assert group.exchange_positions('B', [T1_0], {}) == ({}, frozenset({T1_0}))
    assert group.exchange_positions('B', [], {}) == ({}, frozenset())


def heartbeat(wire: WireClient, member_id: str, epoch: int, needs: list[int] | None = None,
              reports: dict[int, int] | None = None) -> object:
    request = ConsumerGroupHeartbeat(
        group_id='g', member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30000 if epoch == 0 else -1, subscribed_topic_names=['t'] if epoch == 0 else None,
        server_assignor=None, topic_partitions=[] if epoch == 0 else None,
        need_positions=[ConsumerGroupHeartbeat.NeedPositionTopic(topic='t', partitions=needs)] if needs else None,
        positions=[ConsumerGroupHeartbeat.PositionTopic(topic='t', partitions=[
            ConsumerGroupHeartbeat.PositionTopic.PartitionPosition(partition_index=p, offset=o)
            for p, o in reports.items()])] if reports else None)
    response = wire.request(request, version=1)
    assert response.error_code == 0, response
    return response


def exchanged(response: object) -> tuple[list, list]:
    positions = [(t.topic, [(p.partition_index, p.offset) for p in t.partitions]) for t in response.positions or ()]
    needs = [(t.topic, t.partitions) for t in response.need_positions or ()]
    return positions, needs


@pytest.mark.parametrize(('features', 'answered'), [(None, True), ((), False)])
def test_consumer_group_heartbeats_exchange_positions_on_a_broker_advertising_kip253(
        reference_cluster_factory, features: tuple | None, answered: bool) -> None:
    kwargs = {} if features is None else {'features': features}
    cluster = reference_cluster_factory(1, **kwargs)
    cluster.create_topic('t', 3)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    with WireClient(cluster.brokers()[0]) as wire:
        owner = heartbeat(wire, first, 0)
        assert exchanged(owner) == ([], [])
        waiting = heartbeat(wire, second, 0, needs=[0])
        told = heartbeat(wire, first, owner.member_epoch, reports={0: 5, 2: 1})
        learned = heartbeat(wire, second, waiting.member_epoch, needs=[0])
        left = wire.request(ConsumerGroupHeartbeat(group_id='g', member_id=first, member_epoch=-1), version=1)
        forgotten = heartbeat(wire, second, waiting.member_epoch, needs=[0])
    if answered:
        assert [exchanged(r) for r in (waiting, told, learned, forgotten)] == [
            ([], [('t', [0])]), ([], [('t', [0])]), ([('t', [(0, 5)])], [('t', [0])]), ([], [('t', [0])])]
    else:
        assert [exchanged(r) for r in (waiting, told, learned, forgotten)] == [([], [])] * 4
    assert exchanged(left) == ([], [])
