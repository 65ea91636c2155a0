"""Classic members in consumer groups and the protocol conversions on the wire, request by request, with Kafka 4.4's
errors and messages where it refuses: the reference cluster and Apache Kafka 4.4 give the same answers."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kafka.errors import (
    GroupIdNotFoundError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from kafka_kip.protocol.messages import REQUESTS
from kafka_kip_reference.broker.committed_offsets import GroupOffsets
from kafka_kip_reference.broker.consumer_groups import (
    ClassicJoin,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupError,
    ConsumerGroupState,
    HeartbeatRequest,
)
from kafka_kip_reference.broker.embedded_protocol import decode_assignment, encode_assignment
from kafka_kip_reference.broker.group_migration import check_upgrade, downgraded_members, upgraded_members
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.test_kip848_groups import (
    CONFIG,
    T1,
    FakeTopics,
    Timers,
    beat,
    errno_of,
    join,
    make_group,
    parts,
)

pytestmark = pytest.mark.kip848

JoinGroup, SyncGroup, Heartbeat = REQUESTS[ApiKey.JoinGroup], REQUESTS[ApiKey.SyncGroup], REQUESTS[ApiKey.Heartbeat]
ConsumerGroupHeartbeat = REQUESTS[ApiKey.ConsumerGroupHeartbeat]


@pytest.fixture(params=['reference', 'apache-kafka'])
def bootstrap(request: pytest.FixtureRequest) -> str:
    if request.param == 'reference':
        return request.getfixturevalue('reference_cluster_factory')(1, broker_config={
            'group.initial.rebalance.delay.ms': 0, 'group.min.session.timeout.ms': 1000}).bootstrap_servers
    return request.getfixturevalue('apache_kafka').bootstrap_servers


@pytest.fixture
def topic(bootstrap: str) -> str:
    from kafka_kip import KafkaAdminClient
    from kafka_kip.admin import NewTopic

    name = f'mig-{uuid.uuid4().hex[:8]}'
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, 3, 1)])
        wait_until(lambda: name in admin.list_topics(), f'topic {name}')
    finally:
        admin.close()
    return name


@pytest.fixture
def coordinator(bootstrap: str) -> Iterator[Any]:
    """``coordinator(group_id)``: a WireClient to the group's coordinator (closed after the test)."""
    opened: list[WireClient] = []

    def ready(group_id: str) -> WireClient | None:
        with WireClient(bootstrap.split(',')[0]) as wire:
            found = wire.request(REQUESTS[ApiKey.FindCoordinator](key=group_id, key_type=0), version=3)
        if found.error_code:
            return None
        wire = WireClient(f'{found.host}:{found.port}')
        [described] = wire.request(REQUESTS[ApiKey.DescribeGroups](
            groups=[group_id], include_authorized_operations=False), version=5).groups
        if described.error_code:  # Apache Kafka: the coordinator is still loading its offsets partition
            wire.close()
            return None
        return wire

    def connect(group_id: str) -> WireClient:
        opened.append(wait_until(lambda: ready(group_id), f'the coordinator of {group_id}'))
        return opened[-1]

    yield connect
    for wire in opened:
        wire.close()


def subscription(topic: str) -> bytes:
    return ConsumerProtocolSubscription(topics=[topic], user_data=None, version=0).encode()


def join_group(wire: WireClient, group_id: str, member_id: str, protocol_type: str = 'consumer',
         protocols: tuple[tuple[str, bytes], ...] = ()) -> Any:
    return wire.request(JoinGroup(
        group_id=group_id, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
        group_instance_id=None, protocol_type=protocol_type, reason=None,
        protocols=[JoinGroup.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols]), version=9)


def join_with_id(wire: WireClient, group_id: str, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> Any:
    first = join_group(wire, group_id, '', protocol_type, protocols)
    assert first.error_code == MemberIdRequiredError.errno
    return join_group(wire, group_id, first.member_id, protocol_type, protocols)


def sync(wire: WireClient, group_id: str, member_id: str, generation: int, protocol_name: str,
         assignments: dict[str, bytes] | None = None) -> Any:
    return wire.request(SyncGroup(
        group_id=group_id, generation_id=generation, member_id=member_id, group_instance_id=None,
        protocol_type='consumer', protocol_name=protocol_name,
        assignments=[SyncGroup.SyncGroupRequestAssignment(member_id=m, assignment=a)
                     for m, a in (assignments or {}).items()]), version=5)


def heartbeat(wire: WireClient, group_id: str, member_id: str, generation: int) -> int:
    return wire.request(Heartbeat(group_id=group_id, generation_id=generation, member_id=member_id,
                                  group_instance_id=None), version=4).error_code


def consumer_heartbeat(wire: WireClient, group_id: str, member_id: str, epoch: int, topic: str | None = None,
                       owned: list[Any] | None = None) -> Any:
    return wire.request(ConsumerGroupHeartbeat(
        group_id=group_id, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30000 if epoch == 0 else -1, subscribed_topic_names=[topic] if topic else None,
        server_assignor=None, topic_partitions=owned), version=1)


def assigned(sync_response: Any) -> list[int]:
    decoded = ConsumerProtocolAssignment.decode(bytes(sync_response.assignment))
    return sorted(p for tp in decoded.assigned_partitions for p in tp.partitions)


def listed(wire: WireClient, group_id: str, type_and_state: tuple[str, str]) -> None:
    """Wait until ListGroups lists the group with this type and state (Apache Kafka lists what its offsets
    partition has committed, a moment after the request that changed it)."""
    def found() -> list[tuple[str, str]]:
        groups = wire.request(REQUESTS[ApiKey.ListGroups](states_filter=[], types_filter=[]), version=5).groups
        return [(g.group_type, g.group_state) for g in groups if g.group_id == group_id]

    wait_until(lambda: found() == [type_and_state], f'{group_id} listed as {type_and_state}')


def test_a_classic_group_not_of_consumers_refuses_the_upgrade(topic: str, coordinator: Any) -> None:
    group_id = f'{topic}-connect'
    wire = coordinator(group_id)
    joined = join_with_id(wire, group_id, 'connect', (('default', b'\x00'),))
    assert (joined.error_code, joined.generation_id) == (0, 1)
    refused = consumer_heartbeat(wire, group_id, str(uuid.uuid4()), 0, topic, [])
    assert (refused.error_code, refused.error_message) == (
        GroupIdNotFoundError.errno, f'Cannot upgrade classic group {group_id} to consumer group because the group '
                                    'does not use the consumer embedded protocol.')
    not_joining = consumer_heartbeat(wire, group_id, str(uuid.uuid4()), 1)
    assert (not_joining.error_code, not_joining.error_message) == (
        GroupIdNotFoundError.errno, f'Group {group_id} is not a consumer group.')
    listed(wire, group_id, ('classic', 'CompletingRebalance'))


def describe(wire: WireClient, group_id: str) -> Any:
    [described] = wire.request(REQUESTS[ApiKey.ConsumerGroupDescribe](
        group_ids=[group_id], include_authorized_operations=False), version=1).groups
    return described


def test_a_classic_member_joins_a_consumer_group_and_the_group_downgrades_when_the_consumer_member_leaves(
        topic: str, coordinator: Any) -> None:
    """Driven as clients drive it (Apache Kafka 4.4 may batch target assignments, KIP-1263, so intermediate epochs
    differ): the classic member joins with Kafka's answer, the two end with disjoint, complete assignments, and the
    consumer member's leave turns the group into a classic group whose member rejoins as its leader."""
    group_id = f'{topic}-mixed'
    wire = coordinator(group_id)
    modern_id = str(uuid.uuid4())
    first = consumer_heartbeat(wire, group_id, modern_id, 0, topic, [])
    assert first.error_code == 0
    topic_id = first.assignment.topic_partitions[0].topic_id
    assert [sorted(tp.partitions) for tp in first.assignment.topic_partitions] == [[0, 1, 2]]

    range_only = (('range', subscription(topic)),)
    wrong_type = join_group(wire, group_id, '', 'connect', range_only)
    assert wrong_type.error_code == InconsistentGroupProtocolError.errno
    classic = join_with_id(wire, group_id, 'consumer', range_only)
    assert (classic.error_code, classic.protocol_type, classic.protocol_name, classic.leader, classic.members) == (
        0, 'consumer', 'range', '', [])
    [joined] = [m for m in describe(wire, group_id).members if m.member_id == classic.member_id]
    assert (joined.member_type, joined.member_epoch, joined.assignment.topic_partitions) == (
        0, classic.generation_id, [])
    other_protocol = join_group(wire, group_id, '', 'consumer', (('roundrobin', subscription(topic)),))
    assert other_protocol.error_code == InconsistentGroupProtocolError.errno
    listed(wire, group_id, ('consumer', describe(wire, group_id).group_state))

    state = {'epoch': first.member_epoch, 'owned': [0, 1, 2], 'generation': classic.generation_id,
             'classic': [], 'synced': False}

    def step() -> bool:
        beat = consumer_heartbeat(wire, group_id, modern_id, state['epoch'], topic, [
            ConsumerGroupHeartbeat.TopicPartitions(topic_id=topic_id, partitions=state['owned'])])
        assert beat.error_code == 0, beat
        state['epoch'] = beat.member_epoch
        if beat.assignment is not None:
            state['owned'] = sorted(p for tp in beat.assignment.topic_partitions for p in tp.partitions)
        error = heartbeat(wire, group_id, classic.member_id, state['generation']) if state['synced'] else RebalanceInProgressError.errno
        if error == RebalanceInProgressError.errno:
            rejoined = join_group(wire, group_id, classic.member_id, 'consumer', range_only)
            assert rejoined.error_code == 0, rejoined
            state['generation'] = rejoined.generation_id
            synced = sync(wire, group_id, classic.member_id, rejoined.generation_id, 'range')
            state['synced'] = synced.error_code == 0
            state['classic'] = assigned(synced) if state['synced'] else []
        described = describe(wire, group_id)
        return (described.group_state == 'Stable' and len(state['classic']) == 1
                and sorted(state['classic'] + state['owned']) == [0, 1, 2])

    wait_until(step, 'the classic member holding one partition, the consumer member the two others')
    assert sorted((m.member_id == classic.member_id, m.member_type, m.member_epoch)
                  for m in describe(wire, group_id).members) == [
        (False, 1, state['epoch']), (True, 0, state['generation'])]

    left = consumer_heartbeat(wire, group_id, modern_id, -1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    listed(wire, group_id, ('classic', 'PreparingRebalance'))
    assert heartbeat(wire, group_id, classic.member_id, state['generation']) == RebalanceInProgressError.errno
    alone = join_group(wire, group_id, classic.member_id, 'consumer', range_only)
    assert (alone.error_code, alone.generation_id, alone.leader, [m.member_id for m in alone.members]) == (
        0, state['generation'] + 1, classic.member_id, [classic.member_id])


# -- on the objects, without a network ---------------------------------------------------------------------------


@dataclass
class ClassicMemberStub:
    member_id: str
    assignment: bytes
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    client_id: str = 'kp'
    session_timeout_ms: int = 10000
    rebalance_timeout_ms: int = 20000


@dataclass
class ClassicGroupStub:
    members: dict[str, ClassicMemberStub]
    group_id: str = 'g'
    generation_id: int = 5
    protocol_type: str | None = 'consumer'
    protocol_name: str | None = 'range'


def classic_stub(**assigned: list[int]) -> ClassicGroupStub:
    return ClassicGroupStub({m: ClassicMemberStub(m, encode_assignment({'t1': ps}, 0), (('range', subscription('t1')),))
                             for m, ps in assigned.items()})


def upgraded(config: ConsumerGroupConfig = CONFIG, **assigned: list[int]) -> tuple[ConsumerGroup, Timers]:
    classic = classic_stub(**assigned)
    group, topics, timers = make_group(t1=6)
    group = ConsumerGroup('g', topics, config, timers, GroupOffsets(None))  # type: ignore[arg-type]
    check_upgrade(classic, config)
    group.adopt(classic.generation_id, upgraded_members(classic, topics))
    return group, timers


def classic_join(group: ConsumerGroup, member_id: str, protocols: tuple[tuple[str, bytes], ...] = (),
                 protocol_type: str = 'consumer') -> Any:
    return group.classic_join(ClassicJoin(member_id, None, protocol_type, protocols or (('range', subscription('t1')),),
                                          10000, 20000, require_known_member_id=True))


@pytest.mark.parametrize(('config', 'change', 'message'), [
    (ConsumerGroupConfig(migration_policy='disabled'), {}, 'online upgrade is disabled.'),
    (ConsumerGroupConfig(migration_policy='downgrade'), {}, 'online upgrade is disabled.'),
    (CONFIG, {'protocol_type': 'connect'}, 'the group does not use the consumer embedded protocol.'),
    (ConsumerGroupConfig(max_size=1), {}, 'the group size exceeds the consumer group maximum size.'),
])
def test_upgrade_refusals_are_kafkas(config: ConsumerGroupConfig, change: dict, message: str) -> None:
    classic = classic_stub(c1=[0, 1, 2], c2=[3, 4, 5])
    for name, value in change.items():
        setattr(classic, name, value)
    with pytest.raises(ConsumerGroupError) as refused:
        check_upgrade(classic, config)
    assert (refused.value.errno, refused.value.message) == (
        GroupIdNotFoundError.errno, f'Cannot upgrade classic group g to consumer group because {message}')


def test_a_malformed_embedded_protocol_refuses_the_upgrade() -> None:
    classic = classic_stub(c1=[0])
    classic.members['c1'].assignment = b'\x00\x00\x00'
    with pytest.raises(ConsumerGroupError) as refused:
        upgraded_members(classic, FakeTopics(t1=6))
    assert (refused.value.errno, refused.value.message) == (
        GroupIdNotFoundError.errno,
        'Cannot upgrade classic group g to consumer group because the embedded consumer protocol is malformed.')


def test_upgraded_classic_members_rejoin_to_hand_partitions_to_a_joining_consumer_member() -> None:
    group, timers = upgraded(c1=[0, 1, 2], c2=[3, 4, 5])
    assert (group.state, group.group_epoch, group.assignment_epoch) == (ConsumerGroupState.STABLE, 5, 5)
    assert {m: (group.members[m].member_epoch, parts(group.members[m].assigned)) for m in group.members} == {
        'c1': (5, {T1: [0, 1, 2]}), 'c2': (5, {T1: [3, 4, 5]})}
    assert group.classic_heartbeat('c1', None, 5) == 0

    joined = join(group, 'n')
    target = {m: parts(a) for m, a in group.target.items()}
    assert (group.group_epoch, joined.member_epoch, parts(joined.assignment)) == (6, 6, {})
    assert sorted(len(a[T1]) for a in target.values()) == [2, 2, 2]
    assert sorted(p for a in target.values() for p in a[T1]) == [0, 1, 2, 3, 4, 5]
    assert group.classic_heartbeat('c1', None, 5) == RebalanceInProgressError.errno
    assert [t.delay_ms for t in timers.live(20000)] == [20000]  # the join timeout
    assert errno_of(lambda: group.classic_sync('c1', None, 5, 'consumer', 'range')) == RebalanceInProgressError.errno
    assert errno_of(lambda: group.classic_heartbeat('c1', None, 4)) == IllegalGenerationError.errno

    for member_id in ('c1', 'c2'):
        rejoined = classic_join(group, member_id)
        assert (rejoined.error, rejoined.generation_id, rejoined.protocol_name) == (0, 6, 'range')
        synced = group.classic_sync(member_id, None, 6, 'consumer', 'range')
        assert decode_assignment(synced) == {'t1': target[member_id][T1]}
        assert group.classic_heartbeat(member_id, None, 6) == 0
    assert parts(beat(group, 'n', 6).assignment) == target['n']
    assert group.state is ConsumerGroupState.STABLE
    assert group.validate_offset_commit('c1', None, 6, api_version_9=False) == 0
    assert group.validate_offset_commit('c1', None, 5, api_version_9=False) == IllegalGenerationError.errno
    assert group.validate_offset_commit('n', None, 6, api_version_9=False) == UnsupportedVersionError.errno


def test_the_last_consumer_member_leaving_downgrades_the_group_when_the_policy_allows_it() -> None:
    for policy, downgraded in (('bidirectional', True), ('upgrade', False)):
        group, _ = upgraded(ConsumerGroupConfig(migration_policy=policy), c1=[0, 1, 2])
        handed: list[ConsumerGroup] = []
        group.on_downgrade = handed.append
        join(group, 'n')
        target = parts(group.target['c1'])
        group.heartbeat(HeartbeatRequest('n', -1))
        assert (handed == [group], sorted(group.members)) == (downgraded, ['c1'])
        if downgraded:
            [member] = downgraded_members(group)
            assert (member.member_id, decode_assignment(member.assignment)) == ('c1', {'t1': target[T1]})
        else:
            assert group.group_epoch == 7


def test_classic_members_must_rejoin_and_sync_within_their_rebalance_timeout() -> None:
    group, timers = upgraded(c1=[0, 1, 2], c2=[3, 4, 5])
    join(group, 'n')
    assert group.classic_heartbeat('c1', None, 5) == RebalanceInProgressError.errno
    [join_timeout] = timers.live(20000)
    join_timeout.callback()
    assert sorted(group.members) == ['c2', 'n']
    assert classic_join(group, 'c2').generation_id == 7
    [sync_timeout] = [t for t in timers.live(20000) if t is not join_timeout]
    sync_timeout.callback()
    assert sorted(group.members) == ['n']


def test_a_classic_join_to_a_consumer_group_is_checked_as_kafka_checks_it() -> None:
    group, _, _ = make_group(t1=6)
    join(group, 'n')
    required = classic_join(group, '')
    assert (required.error, bool(required.member_id)) == (MemberIdRequiredError.errno, True)
    assert errno_of(lambda: classic_join(group, 'x', protocol_type='connect')) == InconsistentGroupProtocolError.errno
    assert classic_join(group, 'c1').error == 0
    roundrobin = (('roundrobin', subscription('t1')),)
    assert errno_of(lambda: classic_join(group, 'c2', roundrobin)) == InconsistentGroupProtocolError.errno
    assert errno_of(lambda: group.classic_heartbeat('n', None, 2)) == UnknownMemberIdError.errno
    assert group.classic_leave([('c1', None), ('n', None)]) == [0, UnknownMemberIdError.errno]
