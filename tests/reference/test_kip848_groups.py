"""The reference cluster's KIP-848 group state machine and server-side assignors, on objects without a network."""
from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from kafka.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    InvalidRequestError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)

from kafka_kip_reference.broker.committed_offsets import GroupOffsets
from kafka_kip_reference.broker.consumer_group_assignors import MemberSpec, range_, uniform
from kafka_kip_reference.broker.consumer_groups import (
    INVALID_REGULAR_EXPRESSION,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupError,
    ConsumerGroupState,
    HeartbeatRequest,
    MemberState,
    validate_heartbeat,
)

pytestmark = pytest.mark.kip848

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


class FakeTopics:
    def __init__(self, **counts: int) -> None:
        self.counts = dict(counts)
        self.ids = {'t1': T1, 't2': T2}

    def topic_id(self, name: str) -> uuid.UUID | None:
        return self.ids.get(name) if name in self.counts else None

    def partitions(self, topic: str) -> int | None:
        return self.counts.get(topic)

    def topic_names(self) -> list[str]:
        return sorted(self.counts)


class FakeTimer:
    def __init__(self, delay_ms: int, callback: Callable[[], None]) -> None:
        self.delay_ms, self.callback, self.cancelled = delay_ms, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class Timers:
    """A scheduler whose timers the test fires."""

    def __init__(self) -> None:
        self.all: list[FakeTimer] = []

    def __call__(self, delay_ms: int, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(delay_ms, callback)
        self.all.append(timer)
        return timer

    def live(self, delay_ms: int) -> list[FakeTimer]:
        return [t for t in self.all if not t.cancelled and t.delay_ms == delay_ms]


CONFIG = ConsumerGroupConfig(heartbeat_interval_ms=500, session_timeout_ms=45000)
REBALANCE_TIMEOUT = 30000


def make_group(**counts: int) -> tuple[ConsumerGroup, FakeTopics, Timers]:
    topics, timers = FakeTopics(**(counts or {'t1': 6})), Timers()
    return ConsumerGroup('g', topics, CONFIG, timers, GroupOffsets(None)), topics, timers  # type: ignore[arg-type]


def join(group: ConsumerGroup, member_id: str, topics: tuple[str, ...] = ('t1',), **kw) -> object:
    return group.heartbeat(HeartbeatRequest(member_id, 0, rebalance_timeout_ms=REBALANCE_TIMEOUT,
                                            subscribed_topic_names=topics, owned={}, **kw))


def beat(group: ConsumerGroup, member_id: str, epoch: int, owned: dict | None = None, **kw) -> object:
    owned_map = None if owned is None else {topic: frozenset(ps) for topic, ps in owned.items()}
    return group.heartbeat(HeartbeatRequest(member_id, epoch, owned=owned_map, **kw))


def parts(assignment: dict | None) -> dict:
    return {topic: sorted(ps) for topic, ps in (assignment or {}).items()}


def spec(subscribed: tuple[uuid.UUID, ...], previous: dict | None = None) -> MemberSpec:
    return MemberSpec(frozenset(subscribed), {t: frozenset(ps) for t, ps in (previous or {}).items()})


# -- assignors ---------------------------------------------------------------------------------------------------


def test_uniform_spreads_a_fresh_group_evenly() -> None:
    members = {m: spec((T1,)) for m in 'abc'}
    assert {m: parts(a) for m, a in uniform(members, {T1: 6}).items()} == {
        'a': {T1: [0, 3]}, 'b': {T1: [1, 4]}, 'c': {T1: [2, 5]}}


def test_uniform_keeps_previous_assignments_and_moves_only_what_balance_needs() -> None:
    members = {'a': spec((T1,), {T1: [0, 3]}), 'b': spec((T1,), {T1: [1, 4]}), 'c': spec((T1,), {T1: [2, 5]}),
               'd': spec((T1,))}
    assert {m: parts(a) for m, a in uniform(members, {T1: 6}).items()} == {
        'a': {T1: [0]}, 'b': {T1: [1, 4]}, 'c': {T1: [2, 5]}, 'd': {T1: [3]}}


def test_uniform_with_different_subscriptions_balances_within_what_each_may_take() -> None:
    members = {'a': spec((T1, T2)), 'b': spec((T1,))}
    result = uniform(members, {T1: 2, T2: 2})
    assert {m: parts(a) for m, a in result.items()} == {'a': {T2: [0, 1]}, 'b': {T1: [0, 1]}}


def test_range_gives_contiguous_ranges_by_member_id_per_topic() -> None:
    members = {'b': spec((T1, T2)), 'a': spec((T1, T2))}
    assert {m: parts(a) for m, a in range_(members, {T1: 5, T2: 2}).items()} == {
        'a': {T1: [0, 1, 2], T2: [0]}, 'b': {T1: [3, 4], T2: [1]}}


# -- reconciliation ----------------------------------------------------------------------------------------------


def test_a_second_member_gets_partitions_only_after_the_first_revoked_them() -> None:
    group, _, _ = make_group(t1=6)
    first = join(group, 'A')
    assert (first.member_epoch, parts(first.assignment)) == (2, {T1: [0, 1, 2, 3, 4, 5]})
    assert group.state is ConsumerGroupState.STABLE

    second = join(group, 'B')
    assert (group.group_epoch, group.assignment_epoch) == (3, 3)
    assert parts(group.target['A']) == {T1: [0, 1, 2]} and parts(group.target['B']) == {T1: [3, 4, 5]}
    # A still owns 3-5: B moves to epoch 3 with nothing yet
    assert (second.member_epoch, parts(second.assignment)) == (3, {})
    assert group.members['B'].state is MemberState.UNRELEASED_PARTITIONS
    assert group.state is ConsumerGroupState.RECONCILING

    revoke = beat(group, 'A', 2, {T1: range(6)})
    assert (revoke.member_epoch, parts(revoke.assignment)) == (2, {T1: [0, 1, 2]})
    assert group.members['A'].state is MemberState.UNREVOKED_PARTITIONS
    assert parts(group.members['A'].pending_revocation) == {T1: [3, 4, 5]}
    assert beat(group, 'B', 3).assignment is None  # 3-5 are not released yet

    acked = beat(group, 'A', 2, {T1: [0, 1, 2]})
    assert (acked.member_epoch, acked.assignment) == (3, None)  # same partitions, new epoch
    assert group.members['A'].state is MemberState.STABLE
    handed = beat(group, 'B', 3)
    assert (handed.member_epoch, parts(handed.assignment)) == (3, {T1: [3, 4, 5]})
    assert group.state is ConsumerGroupState.STABLE
    assert {tp: owner for tp, owner in group.owners.items()} == {
        (T1, 0): 'A', (T1, 1): 'A', (T1, 2): 'A', (T1, 3): 'B', (T1, 4): 'B', (T1, 5): 'B'}


def test_a_leaving_member_frees_its_partitions_for_the_others() -> None:
    group, _, _ = make_group(t1=4)
    join(group, 'A')
    join(group, 'B')
    beat(group, 'A', 2, {T1: range(4)})
    beat(group, 'A', 2, {T1: [0, 1]})
    beat(group, 'B', 3)
    left = group.heartbeat(HeartbeatRequest('B', -1))
    assert (left.member_id, left.member_epoch) == ('B', -1)
    assert group.group_epoch == 4 and 'B' not in group.members
    took = beat(group, 'A', 3, {T1: [0, 1]})
    assert (took.member_epoch, parts(took.assignment)) == (4, {T1: [0, 1, 2, 3]})
    assert group.state is ConsumerGroupState.STABLE


def test_partition_growth_bumps_the_group_epoch_and_assigns_the_new_partitions() -> None:
    group, topics, _ = make_group(t1=2)
    join(group, 'A')
    topics.counts['t1'] = 3
    grown = beat(group, 'A', 2, {T1: [0, 1]})
    assert (group.group_epoch, grown.member_epoch, parts(grown.assignment)) == (3, 3, {T1: [0, 1, 2]})


def test_regex_subscription_is_evaluated_by_the_group() -> None:
    group, _, _ = make_group(t1=1, t2=2)
    joined = group.heartbeat(HeartbeatRequest('A', 0, rebalance_timeout_ms=REBALANCE_TIMEOUT,
                                              subscribed_topic_regex='t[0-9]', owned={}))
    assert parts(joined.assignment) == {T1: [0], T2: [0, 1]}


# -- fencing and errors ------------------------------------------------------------------------------------------


def errno_of(call: Callable[[], object]) -> int:
    with pytest.raises(ConsumerGroupError) as raised:
        call()
    return raised.value.errno


def test_member_epochs_are_fenced_as_kafka_fences_them() -> None:
    group, _, _ = make_group(t1=2)
    join(group, 'A')
    assert errno_of(lambda: beat(group, 'A', 3)) == FencedMemberEpochError.errno  # ahead of the coordinator
    assert errno_of(lambda: beat(group, 'X', 2)) == UnknownMemberIdError.errno
    join(group, 'B')  # epoch 3; A must revoke
    beat(group, 'A', 2, {T1: [0, 1]})
    beat(group, 'A', 2, {T1: [0]})  # A at epoch 3, previous 2
    # the response with epoch 3 was lost: epoch 2 with a subset of the assignment is accepted
    assert beat(group, 'A', 2, {T1: [0]}).member_epoch == 3
    assert errno_of(lambda: beat(group, 'A', 2, {T1: [0, 1]})) == FencedMemberEpochError.errno


def test_a_fenced_member_rejoins_with_epoch_zero_and_starts_over() -> None:
    group, _, _ = make_group(t1=2)
    join(group, 'A')
    join(group, 'B')  # target A {0}, B {1}; B waits for A to release 1
    rejoined = join(group, 'A')  # fenced, A abandoned its partitions: it starts over as a new member
    assert (group.group_epoch, rejoined.member_epoch, parts(rejoined.assignment)) == (4, 4, {T1: [0]})
    assert group.owners == {(T1, 0): 'A'}
    handed = beat(group, 'B', 3)
    assert (handed.member_epoch, parts(handed.assignment)) == (4, {T1: [1]})
    assert group.state is ConsumerGroupState.STABLE


def test_static_membership_instance_ids() -> None:
    group, _, _ = make_group(t1=2)
    join(group, 'A', instance_id='i1')
    assert errno_of(lambda: join(group, 'B', instance_id='i1')) == UnreleasedInstanceIdError.errno
    assert errno_of(lambda: beat(group, 'B', 2, instance_id='i1')) == FencedInstanceIdError.errno
    assert errno_of(lambda: beat(group, 'B', 2, instance_id='i9')) == UnknownMemberIdError.errno
    left = group.heartbeat(HeartbeatRequest('A', -2, instance_id='i1'))
    assert left.member_epoch == -2 and group.members['A'].member_epoch == -2
    back = join(group, 'B', instance_id='i1')  # the same instance, a new member id, no new group epoch
    assert (back.member_id, back.member_epoch, parts(back.assignment)) == ('B', 2, {T1: [0, 1]})
    assert 'A' not in group.members and group.group_epoch == 2
    assert group.owners == {(T1, 0): 'B', (T1, 1): 'B'}


def test_session_timeout_removes_the_member_and_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    group, _, timers = make_group(t1=2)
    join(group, 'A')
    join(group, 'B')
    beat(group, 'A', 2, {T1: [0, 1]})  # A must revoke 1
    [rebalance] = timers.live(REBALANCE_TIMEOUT)
    rebalance.callback()
    assert 'A' not in group.members and group.group_epoch == 4
    [session] = timers.live(CONFIG.session_timeout_ms)
    session.callback()  # B's
    assert group.members == {} and group.state is ConsumerGroupState.EMPTY


def test_a_second_revocation_restarts_the_rebalance_timeout_at_the_new_epoch() -> None:
    group, _, timers = make_group(t1=4)
    join(group, 'A')
    join(group, 'B')  # target A {0, 1}, B {2, 3}
    beat(group, 'A', 2, {T1: range(4)})  # A revokes 2 and 3 at epoch 2
    [first] = timers.live(REBALANCE_TIMEOUT)
    join(group, 'C')  # target A {0}, B {2, 3}, C {1} before A acknowledged
    again = beat(group, 'A', 2, {T1: [0, 1]})
    assert (again.member_epoch, parts(again.assignment)) == (3, {T1: [0]})
    assert parts(group.members['A'].pending_revocation) == {T1: [1]} and first.cancelled
    [second] = timers.live(REBALANCE_TIMEOUT)
    second.callback()
    assert 'A' not in group.members and group.group_epoch == 5


def test_offset_commit_and_fetch_check_member_epochs() -> None:
    group, _, _ = make_group(t1=2)
    assert group.validate_offset_commit('', None, -1) == 0  # empty group: a simple commit
    join(group, 'A')
    assert group.validate_offset_commit('', None, -1) == UnknownMemberIdError.errno
    assert group.validate_offset_commit('A', None, 2) == 0
    assert group.validate_offset_commit('A', None, 1) == StaleMemberEpochError.errno
    assert group.validate_offset_commit('A', None, 2, api_version_9=False) == UnsupportedVersionError.errno
    assert group.validate_offset_fetch(None, -1) == 0
    assert group.validate_offset_fetch('A', 3) == StaleMemberEpochError.errno


@pytest.mark.parametrize('request_, errno', [
    (HeartbeatRequest('A', 0, subscribed_topic_names=('t1',), owned={}), InvalidRequestError.errno),
    (HeartbeatRequest('A', 0, rebalance_timeout_ms=1, subscribed_topic_names=('t1',), owned=None),
     InvalidRequestError.errno),
    (HeartbeatRequest('', 3), InvalidRequestError.errno),
    (HeartbeatRequest('A', -3), InvalidRequestError.errno),
    (HeartbeatRequest('A', 0, rebalance_timeout_ms=1, subscribed_topic_names=('t1',), owned={},
                      server_assignor='sticky'), UnsupportedAssignorError.errno),
    (HeartbeatRequest('A', 0, rebalance_timeout_ms=1, subscribed_topic_regex='(', owned={}),
     INVALID_REGULAR_EXPRESSION),
])
def test_invalid_heartbeats_are_refused(request_: HeartbeatRequest, errno: int) -> None:
    assert errno_of(lambda: validate_heartbeat(request_, 'g', CONFIG)) == errno


def test_unknown_assignor_config_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="'sticky': the reference cluster has the assignors uniform, range"):
        ConsumerGroupConfig(assignors=('sticky',))


# -- on the wire (one reference broker) --------------------------------------------------------------------------


def test_consumer_group_apis_on_the_wire(reference_cluster_factory) -> None:
    """ConsumerGroupHeartbeat joins and leaves; ListGroups, DescribeGroups, ConsumerGroupDescribe, OffsetCommit,
    OffsetFetch, JoinGroup and ApiVersions answer for a consumer group as Kafka 4.4 does."""
    from kafka.errors import GroupIdNotFoundError, InconsistentGroupProtocolError, MemberIdRequiredError
    from kafka.protocol.api_key import ApiKey

    from kafka_kip.protocol.messages import REQUESTS
    from kafka_kip_reference.fixtures.wire_client import WireClient

    cluster = reference_cluster_factory(1)
    cluster.create_topic('t', 3)
    topic_id = cluster.state.topic_id('t')
    heartbeat = REQUESTS[ApiKey.ConsumerGroupHeartbeat]
    commit_topic = REQUESTS[ApiKey.OffsetCommit].OffsetCommitRequestTopic

    def commit(wire: WireClient, version: int, epoch: int) -> int:
        request = REQUESTS[ApiKey.OffsetCommit](
            group_id='g', generation_id_or_member_epoch=epoch, member_id='m1', topics=[commit_topic(
                name='t', partitions=[commit_topic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata='')])])
        return wire.request(request, version=version).topics[0].partitions[0].error_code

    with WireClient(cluster.brokers()[0]) as wire:
        joined = wire.request(heartbeat(group_id='g', member_id='m1', member_epoch=0, rebalance_timeout_ms=30000,
                                        subscribed_topic_names=['t'], topic_partitions=[]), version=1)
        assert (joined.error_code, joined.member_id, joined.member_epoch, joined.heartbeat_interval_ms) == (
            0, 'm1', 2, 5000)
        assert [(tp.topic_id, tp.partitions) for tp in joined.assignment.topic_partitions] == [(topic_id, [0, 1, 2])]
        no_id = wire.request(heartbeat(group_id='g', member_id='', member_epoch=0, rebalance_timeout_ms=1,
                                       subscribed_topic_names=['t'], topic_partitions=[]), version=1)
        assert (no_id.error_code, no_id.error_message) == (InvalidRequestError.errno, "MemberId can't be empty.")

        [listed] = wire.request(REQUESTS[ApiKey.ListGroups](states_filter=[], types_filter=['consumer']),
                                version=5).groups
        assert (listed.group_id, listed.protocol_type, listed.group_state, listed.group_type) == (
            'g', 'consumer', 'Stable', 'consumer')
        [classic_view] = wire.request(REQUESTS[ApiKey.DescribeGroups](groups=['g'], include_authorized_operations=False),
                                      version=6).groups
        assert (classic_view.error_code, classic_view.error_message) == (
            GroupIdNotFoundError.errno, 'Group g is not a classic group.')
        [described, missing] = wire.request(REQUESTS[ApiKey.ConsumerGroupDescribe](
            group_ids=['g', 'nope'], include_authorized_operations=False), version=1).groups
        assert (missing.error_code, missing.error_message) == (GroupIdNotFoundError.errno, 'Group nope not found.')
        [member] = described.members
        assert (described.group_state, described.group_epoch, described.assignment_epoch, described.assignor_name) == (
            'Stable', 2, 2, 'uniform')
        assert (member.member_id, member.member_epoch, member.subscribed_topic_names, member.member_type) == (
            'm1', 2, ['t'], 1)
        assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [('t', [0, 1, 2])]

        assert commit(wire, 9, 1) == StaleMemberEpochError.errno
        assert commit(wire, 8, 2) == UnsupportedVersionError.errno
        assert commit(wire, 9, 2) == 0
        fetch_group = REQUESTS[ApiKey.OffsetFetch].OffsetFetchRequestGroup
        [stale, current] = wire.request(REQUESTS[ApiKey.OffsetFetch](groups=[
            fetch_group(group_id='g', member_id='m1', member_epoch=3, topics=None)], require_stable=False),
            version=9).groups + wire.request(REQUESTS[ApiKey.OffsetFetch](groups=[
                fetch_group(group_id='g', member_id='m1', member_epoch=2, topics=None)], require_stable=False),
                version=9).groups
        assert stale.error_code == StaleMemberEpochError.errno
        assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in current.topics] == [
            ('t', [(0, 5)])]

        # a classic member may join a consumer group (tests/reference/test_kip848_migration.py); not of another type
        joined_classic = wire.request(REQUESTS[ApiKey.JoinGroup](
            group_id='g', session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id='', group_instance_id=None,
            protocol_type='connect', protocols=[REQUESTS[ApiKey.JoinGroup].JoinGroupRequestProtocol(
                name='range', metadata=b'')], reason=None), version=9)
        assert joined_classic.error_code == InconsistentGroupProtocolError.errno

        versions = wire.request(REQUESTS[ApiKey.ApiVersions](client_software_name='t', client_software_version='1'),
                                version=3)
        assert [(f.name, f.min_version_level, f.max_version_level) for f in versions.finalized_features] == [
            ('group.version', 1, 1), ('transaction.version', 2, 2)]

        left = wire.request(heartbeat(group_id='g', member_id='m1', member_epoch=-1), version=1)
        assert (left.error_code, left.member_epoch) == (0, -1)
        [empty] = wire.request(REQUESTS[ApiKey.ListGroups](states_filter=[], types_filter=[]), version=5).groups
        assert (empty.group_state, empty.group_type) == ('Empty', 'consumer')

        # an empty consumer group becomes a classic group on a JoinGroup, keeping its offsets
        joined_classic = wire.request(REQUESTS[ApiKey.JoinGroup](
            group_id='g', session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id='', group_instance_id=None,
            protocol_type='consumer', protocols=[REQUESTS[ApiKey.JoinGroup].JoinGroupRequestProtocol(
                name='range', metadata=b'')], reason=None), version=9)
        assert joined_classic.error_code == MemberIdRequiredError.errno
        [converted] = wire.request(REQUESTS[ApiKey.ListGroups](states_filter=[], types_filter=[]), version=5).groups
        assert converted.group_type == 'classic'
        [kept] = wire.request(REQUESTS[ApiKey.OffsetFetch](groups=[
            fetch_group(group_id='g', member_id=None, member_epoch=-1, topics=None)], require_stable=False),
            version=9).groups
        assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in kept.topics] == [
            ('t', [(0, 5)])]
