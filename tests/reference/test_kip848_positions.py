"""KIP-253's position exchange in KIP-848 consumer groups: the tagged fields of ConsumerGroupHeartbeat on a broker
advertising ``kip.253`` (docs/PROTOCOL.md, "KIP-253 in consumer groups"), on the group objects and on the wire."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.consumer.expansion import Expansion, ExpansionOrder, TopicExpansions
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip_reference.broker.consumer_groups import ConsumerGroup
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.test_kip848_groups import T1, beat, join, make_group

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


def settle(group: ConsumerGroup, members: list[str]) -> dict[str, set[TopicPartition]]:
    """Heartbeat ``members`` (joined) until every one owns its target; what each owns."""
    owned: dict[str, set[int]] = {m: set() for m in members}
    epochs = {m: group.members[m].member_epoch for m in members}
    for _ in range(10):
        for m in members:
            answer = beat(group, m, epochs[m], {T1: owned[m]})
            epochs[m] = answer.member_epoch
            if answer.assignment is not None:
                owned[m] = set(answer.assignment.get(T1, ()))
        if all(owned[m] == set(group.target[m].get(T1, ())) for m in members) and group.owners.keys() == {
                (T1, p) for ps in owned.values() for p in ps}:
            return {m: {TopicPartition('t1', p) for p in ps} for m, ps in owned.items()}
    raise AssertionError(f'no stable assignment: {owned}')


def test_a_hold_waiting_for_two_owners_is_released_whatever_order_their_reports_come_in() -> None:
    """On the objects (the client's ExpansionOrder and the broker's ConsumerGroup, no network): t1 grew 2 -> 3
    (thresholds 10 and 20) in a 3-member group; the owner of t1-2 waits for t1-0 and t1-1 of the two others. t1-0's
    owner is at its threshold at once, t1-1's reaches it only after reporting 15. Each member heartbeats in turn, as
    a client does (its needs, its reports, what it heard). The hold is released in the round of the report at the
    threshold and stays released: a member that learned one prior position keeps asking for it until its hold is
    released, so the coordinator keeps that report (it keeps reports only of partitions some member asks for)."""
    group, _, _ = make_group(t1=3)
    for member in ('A', 'B', 'C'):
        join(group, member)
    owned = settle(group, ['A', 'B', 'C'])
    owner = {tp: m for m, tps in owned.items() for tp in tps}
    t0, t1, t2 = (TopicPartition('t1', p) for p in range(3))
    positions = {t0: 10, t1: 15, t2: 0}
    orders = {m: ExpansionOrder() for m in owned}
    for order in orders.values():
        order.active = True
        order.learn('t1', TopicExpansions(3, (Expansion(2, (0, 0), (10, 20)),), {0: 1, 1: 1, 2: 0}))
    held = orders[owner[t2]]
    released_at = []
    for round_ in range(12):
        if round_ == 3:
            positions[t1] = 20
        for member in sorted(owned, key=lambda m: m != owner[t1]):  # t1-1's owner first, then the others
            order, mine = orders[member], {tp: positions[tp] for tp in owned[member]}
            order.snapshot(mine)
            order.heard(*group.exchange_positions(member, order.needs(owned[member], mine), order.reports()))
        released_at.append(held.hold(t2, 0) is None)
    assert released_at == [False] * 3 + [True] * 9


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
