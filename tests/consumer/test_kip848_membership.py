"""KIP-848 membership of a consumer-protocol member on the objects (no network): states and transitions, what
heartbeats carry, what answers and errors do, and each reconciliation's plan (kafka_kip.consumer.membership)."""
from __future__ import annotations

import asyncio
import uuid

import kafka.errors as Errors
import pytest
from kafka.structs import TopicPartition

from kafka_kip.consumer.membership import (
    MEMBER_TRANSITIONS,
    ErrorAction,
    Membership,
    MemberState,
    Reconciliation,
    carry_out,
    error_action,
    new_member_id,
)
from kafka_kip.state_machine import InvalidTransition

pytestmark = pytest.mark.kip848

A, B = uuid.UUID(int=1), uuid.UUID(int=2)
NAMES = {A: 'a', B: 'b'}


def joined(assignment: dict, epoch: int = 5) -> Membership:
    """A member that joined and was answered ``assignment`` at ``epoch``."""
    member = Membership(member_id='m1')
    member.join()
    member.on_response(member.heartbeat(), 'm1', epoch, 500, assignment)
    return member


def reconcile(member: Membership):
    plan = member.reconciliation(NAMES.get)
    assert plan is not None
    assert member.reconciled(plan)
    return plan


def test_join_heartbeat_carries_epoch_0_and_no_partitions():
    member = Membership(instance_id='i1', member_id='m1')
    assert member.state is MemberState.UNSUBSCRIBED and not member.in_group
    member.join()
    fields = member.heartbeat()
    assert (member.state, fields.member_id, fields.member_epoch, fields.instance_id, dict(fields.owned)) == (
        MemberState.JOINING, 'm1', 0, 'i1', {})
    assert member.wants_heartbeat_now


def test_first_assignment_reconciles_then_acknowledges_then_stable():
    member = joined({A: [0, 1], B: [2]}, epoch=3)
    assert (member.state, member.member_epoch, member.heartbeat_interval_ms) == (MemberState.RECONCILING, 3, 500)
    plan = member.reconciliation(NAMES.get)
    assert (plan.revoked, plan.added, plan.member_epoch) == (
        frozenset(), {TopicPartition('a', 0), TopicPartition('a', 1), TopicPartition('b', 2)}, 3)
    assert member.reconciled(plan)
    assert member.state is MemberState.ACKNOWLEDGING and member.wants_heartbeat_now
    ack = member.heartbeat()
    assert dict(ack.owned) == {A: frozenset({0, 1}), B: frozenset({2})}
    member.on_response(ack, 'm1', 3, 500, None)
    assert member.state is MemberState.STABLE and not member.wants_heartbeat_now


def test_answer_to_a_heartbeat_sent_before_the_reconciliation_does_not_acknowledge_it():
    member = joined({A: [0]})
    before = member.heartbeat()
    reconcile(member)
    member.on_response(before, 'm1', 5, 500, None)
    assert member.state is MemberState.ACKNOWLEDGING
    member.on_response(member.heartbeat(), 'm1', 5, 500, None)
    assert member.state is MemberState.STABLE


def test_empty_first_assignment_is_stable_at_once():
    member = joined({})
    assert (member.state, member.member_epoch) == (MemberState.STABLE, 5)


def test_incremental_reconciliation_revokes_only_what_moved():
    member = joined({A: [0, 1, 2]})
    reconcile(member)
    member.on_response(member.heartbeat(), 'm1', 5, 500, None)
    member.on_response(member.heartbeat(), 'm1', 5, 500, {A: [0]})
    assert member.state is MemberState.RECONCILING
    plan = member.reconciliation(NAMES.get)
    assert (plan.revoked, plan.added, plan.assignment) == (
        {TopicPartition('a', 1), TopicPartition('a', 2)}, frozenset(), {TopicPartition('a', 0)})
    member.reconciled(plan)
    member.on_response(member.heartbeat(), 'm1', 6, 500, {A: [0, 3]})
    plan = member.reconciliation(NAMES.get)
    assert (plan.revoked, plan.added, plan.member_epoch) == (frozenset(), {TopicPartition('a', 3)}, 6)


def test_target_that_changes_during_a_reconciliation_reconciles_again():
    member = joined({A: [0, 1]})
    plan = member.reconciliation(NAMES.get)
    member.on_response(member.heartbeat(), 'm1', 6, 500, {A: [1]})
    assert not member.reconciled(plan)
    assert member.state is MemberState.RECONCILING
    assert member.owned_partitions == {TopicPartition('a', 0), TopicPartition('a', 1)}
    again = member.reconciliation(NAMES.get)
    assert (again.revoked, again.added, again.member_epoch) == ({TopicPartition('a', 0)}, frozenset(), 6)


def test_unknown_topic_id_waits_for_metadata():
    member = joined({uuid.UUID(int=9): [0]})
    assert member.reconciliation(NAMES.get) is None
    assert member.unresolved_topics() == {uuid.UUID(int=9)}
    assert member.reconciliation({uuid.UUID(int=9): 'c'}.get).added == {TopicPartition('c', 0)}


@pytest.mark.parametrize('error', [Errors.FencedMemberEpochError, Errors.UnknownMemberIdError])
def test_fenced_member_loses_its_partitions_and_rejoins_at_epoch_0_with_its_id(error):
    member = joined({A: [0, 1]})
    reconcile(member)
    assert member.on_error(error.errno, error()) is ErrorAction.FENCE
    assert (member.state, member.in_group) == (MemberState.FENCED, False)
    assert member.lost() == {TopicPartition('a', 0), TopicPartition('a', 1)}
    member.rejoin()
    fields = member.heartbeat()
    assert (member.state, fields.member_id, fields.member_epoch, dict(fields.owned), member.lost()) == (
        MemberState.JOINING, 'm1', 0, {}, frozenset())


@pytest.mark.parametrize('error', [Errors.UnreleasedInstanceIdError, Errors.FencedInstanceIdError,
                                   Errors.GroupAuthorizationFailedError, Errors.UnsupportedAssignorError,
                                   Errors.GroupMaxSizeReachedError, Errors.InvalidRequestError])
def test_fatal_errors_stop_the_member(error):
    member = joined({A: [0]})
    exc = error('message')
    assert member.on_error(error.errno, exc) is ErrorAction.FATAL
    assert (member.state, member.fatal_error, member.in_group) == (MemberState.FATAL, exc, False)
    assert MEMBER_TRANSITIONS[MemberState.FATAL] == frozenset()


@pytest.mark.parametrize('error, action', [(Errors.NotCoordinatorError, ErrorAction.FIND_COORDINATOR),
                                           (Errors.CoordinatorNotAvailableError, ErrorAction.FIND_COORDINATOR),
                                           (Errors.CoordinatorLoadInProgressError, ErrorAction.RETRY)])
def test_coordinator_errors_are_retried_in_the_same_state(error, action):
    member = joined({A: [0]})
    assert (error_action(error.errno), member.on_error(error.errno, error())) == (action, action)
    assert member.state is MemberState.RECONCILING


@pytest.mark.parametrize('instance_id, epoch', [(None, -1), ('i1', -2)])
def test_leave_sends_minus_1_or_minus_2_for_a_static_member(instance_id, epoch):
    member = Membership(instance_id=instance_id, member_id='m1')
    member.join()
    member.on_response(member.heartbeat(), 'm1', 4, 500, {A: [0]})
    reconcile(member)
    assert member.prepare_leaving()
    member.leave()
    fields = member.heartbeat()
    assert (member.state, fields.member_epoch, dict(fields.owned)) == (MemberState.LEAVING, epoch, {})
    member.left()
    assert (member.state, member.prepare_leaving()) == (MemberState.UNSUBSCRIBED, False)


def test_stale_member_loses_partitions_then_rejoins():
    member = joined({A: [0]})
    reconcile(member)
    member.went_stale()
    assert (member.state, member.lost()) == (MemberState.STALE, {TopicPartition('a', 0)})
    member.rejoin()
    assert (member.state, member.member_epoch) == (MemberState.JOINING, 0)


def test_answers_after_leaving_change_nothing():
    member = joined({A: [0]})
    sent = member.heartbeat()
    member.prepare_leaving()
    member.leave()
    member.on_response(sent, 'm1', 9, 500, {A: [0, 1]})
    assert (member.state, member.member_epoch, member.target) == (MemberState.LEAVING, -1, None)


def test_transitions_the_table_does_not_allow_are_refused():
    member = Membership(member_id='m1')
    with pytest.raises(InvalidTransition) as raised:
        member.leave()
    assert (raised.value.current, raised.value.wanted) == (MemberState.UNSUBSCRIBED, MemberState.LEAVING)


def test_member_ids_are_22_url_safe_characters_and_distinct():
    ids = {new_member_id() for _ in range(100)}
    assert len(ids) == 100 and {len(i) for i in ids} == {22}
    assert all(set(i) <= set('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_') for i in ids)


class RecordedSteps:
    """carry_out's steps, recorded in order; ``failing`` names a listener method that raises."""

    def __init__(self, failing: str | None = None) -> None:
        self.calls: list[tuple] = []
        self.failing = failing

    def stop_fetching(self, partitions):
        self.calls.append(('stop_fetching', sorted(partitions)))

    async def commit_consumed(self):
        self.calls.append(('commit',))

    async def call_listener(self, method, partitions):
        self.calls.append((method, sorted(partitions)))
        return ValueError(method) if method == self.failing else None

    def assign(self, partitions):
        self.calls.append(('assign', sorted(partitions)))


def moved_plan() -> Reconciliation:
    """Owning a-0, a-1, a-2; the target a-0, b-0."""
    member = joined({A: [0, 1, 2]})
    reconcile(member)
    member.on_response(member.heartbeat(), 'm1', 6, 500, {A: [0], B: [0]})
    return member.reconciliation(NAMES.get)


def test_reconciliation_revokes_commits_and_calls_listeners_in_javas_order():
    steps = RecordedSteps()
    assert asyncio.run(carry_out(moved_plan(), steps, auto_commit=True)) is None
    a0, a1, a2, b0 = (TopicPartition('a', 0), TopicPartition('a', 1), TopicPartition('a', 2), TopicPartition('b', 0))
    assert steps.calls == [('stop_fetching', [a1, a2]), ('commit',), ('on_partitions_revoked', [a1, a2]),
                           ('assign', [a0, b0]), ('on_partitions_assigned', [b0])]


def test_reconciliation_without_auto_commit_or_revocation():
    steps = RecordedSteps()
    asyncio.run(carry_out(moved_plan(), steps, auto_commit=False))
    assert [call[0] for call in steps.calls] == ['stop_fetching', 'on_partitions_revoked', 'assign',
                                                 'on_partitions_assigned']
    first = joined({A: [0]}).reconciliation(NAMES.get)
    steps = RecordedSteps()
    asyncio.run(carry_out(first, steps, auto_commit=True))
    assert steps.calls == [('assign', [TopicPartition('a', 0)]), ('on_partitions_assigned', [TopicPartition('a', 0)])]


def test_a_failing_revoke_listener_does_not_stop_the_reconciliation():
    steps = RecordedSteps(failing='on_partitions_revoked')
    error = asyncio.run(carry_out(moved_plan(), steps, auto_commit=True))
    assert (type(error), str(error)) == (ValueError, 'on_partitions_revoked')
    assert [call[0] for call in steps.calls][-2:] == ['assign', 'on_partitions_assigned']
