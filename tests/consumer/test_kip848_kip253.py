"""KIP-253's key order in KIP-848 consumer groups (``group_protocol='consumer'``): the holds' positions ride
ConsumerGroupHeartbeat's tagged fields 10064-10067 on a broker advertising ``kip.253`` (docs/PROTOCOL.md,
"KIP-253 in consumer groups"), as classic groups exchange them through Heartbeat v4."""
from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

import kafka_kip
from kafka_kip.consumer.expansion import Expansion, TopicExpansions
from kafka_kip.consumer.membership import HeartbeatFields, MemberState
from kafka_kip.protocol.messages import REQUESTS, RESPONSES
from kafka_kip.protocol.requests import exchanged_positions, position_fields
from kafka_kip_reference.broker.control import ControlledRequest
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.support.keyed import inversions, produce_growing
from tests.support.kip848_clusters import FAST_CONSUMER_GROUP_HEARTBEATS

pytestmark = [pytest.mark.kip848, pytest.mark.kip253]

Request, Response = REQUESTS[ApiKey.ConsumerGroupHeartbeat], RESPONSES[ApiKey.ConsumerGroupHeartbeat]
T0, T1, T2 = (TopicPartition('t', p) for p in range(3))


def round_trip(message: object, version: int = 1) -> object:
    """``message`` encoded and decoded again (the tagged fields on the wire)."""
    return type(message).decode(message.encode(version=version), version=version)


def test_a_held_member_asks_for_the_prior_positions_and_the_answer_releases_its_hold(reference_cluster) -> None:
    """On the objects: t grew 2 -> 3 (thresholds 10 and 20); the member owns t-0 at 10 and the new t-2. Its heartbeat
    asks for t-1 (10064) and reports t-0, which the coordinator asked for (10065); an answer with t-1 at 20 (10066)
    releases t-2. Without kip.253 the heartbeat carries neither field."""
    consumer = kafka_kip.KafkaConsumer(bootstrap_servers=reference_cluster.bootstrap_servers, group_id='g',
                                       group_protocol='consumer', enable_auto_commit=False)
    try:
        coordinator, order = consumer._coordinator, consumer._coordinator.expansion_order
        consumer.assign([T0, T2])
        consumer.seek(T0, 10)
        consumer.seek(T2, 0)
        order.active = True
        order.learn('t', TopicExpansions(3, (Expansion(2, (0, 0), (10, 20)),), {0: 1, 1: 1, 2: 0}))
        order.snapshot({T0: 10, T2: 0})
        order.heard({}, [T0])  # an earlier answer: some member needs t-0
        assert order.hold(T2, 0).waiting_for == {T1: 20}
        fields = HeartbeatFields('m1', 3, None, {}, 1)
        sent = round_trip(coordinator._heartbeat_request(fields, True))
        assert [(t.topic, t.partitions) for t in sent.need_positions] == [('t', [1])]
        assert [(t.topic, [(p.partition_index, p.offset) for p in t.partitions]) for t in sent.positions] == [
            ('t', [(0, 10)])]
        plain = round_trip(coordinator._heartbeat_request(fields, False))
        assert (plain.need_positions, plain.positions) == (None, None)
    finally:
        consumer.close()
    answer = Response(throttle_time_ms=0, error_code=0, error_message=None, member_id='m1', member_epoch=3,
                      heartbeat_interval_ms=500, assignment=None,
                      **position_fields(Response, [T0, T1], {T1: 20}))
    order.heard(*exchanged_positions(round_trip(answer)))
    assert (order.group_position(T1), order.requested, order.hold(T2, 0)) == (20, {T0, T1}, None)


class HeartbeatTags:
    """A ``control()`` function counting the member heartbeats that carried each KIP-253 request tag."""

    def __init__(self) -> None:
        self.needs = self.reports = 0

    def __call__(self, request: ControlledRequest) -> None:
        heartbeat = request.request
        self.needs += bool(heartbeat.need_positions)
        self.reports += bool(heartbeat.positions)


def test_two_members_keep_key_order_while_the_topic_grows_2_4(reference_cluster_factory) -> None:
    """2 consumer-protocol members own 1 of t's 2 partitions each; a keyed producer writes 600 records, t grows to 4,
    600 more (the producer still partitioning by 2 at first); then the members poll, one after the other (the global
    order of poll returns). Every record is returned once and no key is out of order:
    the members holding new partitions learned the others' positions through the heartbeats' tags (no commit in the
    test's time)."""
    cluster = reference_cluster_factory(3, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS)
    cluster.create_topic('t', 2, 3)
    tags = HeartbeatTags()
    cluster.control(ApiKey.ConsumerGroupHeartbeat, tags, keep=True)
    members = [kafka_kip.KafkaConsumer('t', bootstrap_servers=cluster.bootstrap_servers, group_id='g',
                                       group_protocol='consumer', auto_offset_reset='earliest',
                                       auto_commit_interval_ms=600_000, metadata_max_age_ms=500) for _ in range(2)]
    returned: list[tuple[int, bytes, int]] = []

    def poll_all(count: int, partitions: int) -> bool:
        for consumer in members:
            returned.extend((r.partition, r.key, int(r.value))
                            for records in consumer.poll(50).values() for r in records)
        stable = all(c._coordinator.membership.state is MemberState.STABLE for c in members)
        return stable and len(returned) >= count and sum(len(c.assignment()) for c in members) == partitions

    try:
        # one partition each: a partition that moves later is committed at its revocation, which releases holds
        # with no exchange of positions
        wait_until(lambda: poll_all(0, 2) and all(len(c.assignment()) == 1 for c in members),
                   'the 2 partitions assigned, one to each member', timeout=60)
        produce_growing(cluster, [range(0, 600), range(600, 1200)], [4])
        wait_until(lambda: poll_all(1200, 4), '1200 records over 4 partitions', timeout=120)
    finally:
        for consumer in members:
            consumer.close()
    assert sorted(value for *_, value in returned) == list(range(1200))
    assert inversions(returned) == 0
    assert {p for p, *_ in returned} == set(range(4))
    assert tags.needs > 0 and tags.reports > 0


@pytest.mark.parametrize('group_protocol', ['classic', 'consumer'])
def test_three_members_keep_key_order_while_the_topic_grows_6_9_12(reference_cluster_factory,
                                                                   group_protocol: str) -> None:
    """3 members own 2 of t's 6 partitions each (auto-commit every 10 minutes: in the test's time, only at a
    revocation); 600 keyed records, t grows to 9, 600 more, to 12, 600 more. Every record is returned once, no key
    out of order, and every hold is released (t-10 gets no record): by the positions the owners of the prior
    partitions reported in heartbeats, a consumer-protocol group committing nothing once its 3 members joined (its
    assignment only grows)."""
    cluster = reference_cluster_factory(3, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS)
    cluster.create_topic('t', 6, 3)
    protocol = {'heartbeat_interval_ms': 500} if group_protocol == 'classic' else {}
    members = [kafka_kip.KafkaConsumer('t', bootstrap_servers=cluster.bootstrap_servers, group_id='g',
                                       group_protocol=group_protocol, auto_offset_reset='earliest',
                                       auto_commit_interval_ms=600_000, metadata_max_age_ms=500, **protocol)
               for _ in range(3)]
    returned: list[tuple[int, bytes, int]] = []

    def poll_all(count: int, partitions: int) -> bool:
        for consumer in members:
            returned.extend((r.partition, r.key, int(r.value))
                            for records in consumer.poll(50).values() for r in records)
        assigned = sorted(len(c.assignment()) for c in members)
        held = any(c._subscription.partitions_held_at_expansions() for c in members)
        return len(returned) >= count and assigned == [partitions // 3] * 3 and not held

    try:
        wait_until(lambda: poll_all(0, 6), 'the 6 partitions assigned', timeout=60)
        produce_growing(cluster, [range(0, 600), range(600, 1200), range(1200, 1800)], [9, 12])
        wait_until(lambda: poll_all(1800, 12), '1800 records over 12 partitions, no hold left', timeout=120)
        committed = {o.offset for ps in cluster.groups.groups['g'].offsets.all().values() for o in ps.values()}
    finally:
        for consumer in members:
            consumer.close()
    assert sorted(value for *_, value in returned) == list(range(1800))
    assert inversions(returned) == 0
    if group_protocol == 'consumer':  # (classic members commit at each rebalance: eager revocation)
        assert committed <= {0}  # the revocations as the members joined, before the first record
