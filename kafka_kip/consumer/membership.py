"""KIP-848 membership of a consumer-protocol group, without a network: the member's states and their transitions
as data, what its next ConsumerGroupHeartbeat carries, what a response or an error does, and the plan of each
reconciliation.

Modelled on Apache Kafka's ``ConsumerMembershipManager`` / ``AbstractMembershipManager`` (Java's
``group.protocol=consumer``)::

    UNSUBSCRIBED -> JOINING --(assignment)--> RECONCILING -> ACKNOWLEDGING -> STABLE
                              (same as owned)-------------------------------^
    STABLE / ACKNOWLEDGING --(new assignment)--> RECONCILING
    any member state --(FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID)--> FENCED --(partitions lost)--> JOINING (epoch 0)
    any member state --(close, unsubscribe)--> PREPARE_LEAVING --(revoked)--> LEAVING (epoch -1, static -2)
                                                                               --> UNSUBSCRIBED
    any member state --(poll() not called within max_poll_interval_ms)--> STALE --(partitions lost)--> JOINING
    any state --(UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, authorization, ...)--> FATAL (raised by poll())

The coordinator (:mod:`kafka_kip.consumer.consumer_protocol`) sends what :meth:`Membership.heartbeat` says,
hands each answer to :meth:`Membership.on_response` / :meth:`Membership.on_error`, and carries out each
:class:`Reconciliation` with :func:`carry_out` (Java's order: stop fetching the revoked partitions -> commit
(auto-commit) -> ``on_partitions_revoked`` -> assign -> ``on_partitions_assigned``) before reporting it done with
:meth:`Membership.reconciled`; the next heartbeat, sent at once, acknowledges it.
"""
from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import kafka.errors as Errors
from kafka.structs import TopicPartition

from kafka_kip.state_machine import Transitions

#: The member epochs a heartbeat carries to join, to leave, and (static members) to leave for now.
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2

#: A member's assignment as the protocol speaks it: topic id -> partitions.
Assignment = Mapping[uuid.UUID, frozenset[int]]


class MemberState(str, enum.Enum):
    """Where a consumer-protocol member stands (Java's ``MemberState``)."""

    UNSUBSCRIBED = 'unsubscribed'  # not in the group: no subscription yet, or it left
    JOINING = 'joining'  # its next heartbeat carries epoch 0 and every field
    RECONCILING = 'reconciling'  # a target assignment differs from the partitions it owns
    ACKNOWLEDGING = 'acknowledging'  # reconciled; the next heartbeat (sent at once) reports the owned partitions
    STABLE = 'stable'  # owns its target assignment
    FENCED = 'fenced'  # the coordinator fenced it: its partitions are lost, then it rejoins at epoch 0
    PREPARE_LEAVING = 'prepare_leaving'  # closing or unsubscribing: its partitions are being revoked
    LEAVING = 'leaving'  # the leave heartbeat (epoch -1, or -2 for a static member) is to be sent
    STALE = 'stale'  # left because poll() was not called in time: its partitions are lost, then it rejoins
    FATAL = 'fatal'  # an error it cannot recover from; poll() raises it

    def __str__(self) -> str:
        return self.value


_S = MemberState
_IN_GROUP = (_S.JOINING, _S.RECONCILING, _S.ACKNOWLEDGING, _S.STABLE)
MEMBER_TRANSITIONS: Transitions[MemberState] = Transitions({
    _S.UNSUBSCRIBED: (_S.JOINING, _S.FATAL),
    _S.JOINING: (_S.RECONCILING, _S.STABLE, _S.FENCED, _S.PREPARE_LEAVING, _S.STALE, _S.FATAL),
    _S.RECONCILING: (_S.RECONCILING, _S.ACKNOWLEDGING, _S.STABLE, _S.FENCED, _S.PREPARE_LEAVING, _S.STALE, _S.FATAL),
    _S.ACKNOWLEDGING: (_S.STABLE, _S.RECONCILING, _S.FENCED, _S.PREPARE_LEAVING, _S.STALE, _S.FATAL),
    _S.STABLE: (_S.RECONCILING, _S.FENCED, _S.PREPARE_LEAVING, _S.STALE, _S.FATAL),
    _S.FENCED: (_S.JOINING, _S.PREPARE_LEAVING, _S.FATAL),
    _S.PREPARE_LEAVING: (_S.LEAVING, _S.UNSUBSCRIBED, _S.FATAL),
    _S.LEAVING: (_S.UNSUBSCRIBED, _S.FATAL),
    _S.STALE: (_S.JOINING, _S.PREPARE_LEAVING, _S.FATAL),
    _S.FATAL: (),
})


class ErrorAction(enum.Enum):
    """What a ConsumerGroupHeartbeat error makes the member do (Java's heartbeat request manager)."""

    FIND_COORDINATOR = 'find the coordinator again, then retry'
    RETRY = 'retry after the backoff'
    FENCE = 'give up every partition (lost) and rejoin at epoch 0'
    FATAL = 'stop; poll() raises the error'


_RETRIABLE_ACTIONS = {
    Errors.NotCoordinatorError.errno: ErrorAction.FIND_COORDINATOR,
    Errors.CoordinatorNotAvailableError.errno: ErrorAction.FIND_COORDINATOR,
    Errors.CoordinatorLoadInProgressError.errno: ErrorAction.RETRY,
    Errors.FencedMemberEpochError.errno: ErrorAction.FENCE,
    Errors.UnknownMemberIdError.errno: ErrorAction.FENCE,
}


def error_action(error_code: int) -> ErrorAction:
    """What ``error_code`` in a ConsumerGroupHeartbeatResponse calls for; every code not retried or fenced is fatal
    (UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED, UNSUPPORTED_ASSIGNOR, ...), as in Java."""
    return _RETRIABLE_ACTIONS.get(error_code, ErrorAction.FATAL)


def new_member_id() -> str:
    """A member id as Java's consumer generates it (ConsumerGroupHeartbeat v1: the member chooses): a random UUID
    in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b'=').decode()


@dataclass(frozen=True)
class HeartbeatFields:
    """What the member's next ConsumerGroupHeartbeat carries besides the group and the subscription."""

    member_id: str
    member_epoch: int
    instance_id: str | None
    owned: Assignment  # sent as TopicPartitions (empty when joining)
    assignment_version: int  # which reconciled assignment ``owned`` is (see :meth:`Membership.on_response`)


@dataclass(frozen=True)
class Reconciliation:
    """One step from the owned partitions to the target assignment: revoke first, then assign."""

    revoked: frozenset[TopicPartition]
    added: frozenset[TopicPartition]
    assignment: frozenset[TopicPartition]  # the partitions owned once it is done
    target: Assignment  # the same, by topic id
    member_epoch: int


class Membership:
    """The membership of one consumer-protocol member: its state, id, epoch, owned and target assignments.

    Pure bookkeeping: nothing here sends a request or calls a listener.
    """

    def __init__(self, instance_id: str | None = None, member_id: str | None = None) -> None:
        self.state = MemberState.UNSUBSCRIBED
        self.member_id = member_id or new_member_id()
        self.instance_id = instance_id
        self.member_epoch = JOIN_EPOCH
        #: The heartbeat interval the coordinator dictates (ms); None until its first answer.
        self.heartbeat_interval_ms: int | None = None
        self.owned: Assignment = {}
        self.owned_partitions: frozenset[TopicPartition] = frozenset()
        self.target: Assignment | None = None
        self.fatal_error: Exception | None = None
        self._version = 0  # bumped by each reconciliation; a response acknowledges it once a heartbeat carried it

    def _to(self, state: MemberState) -> None:
        self.state = MEMBER_TRANSITIONS.check(f'member {self.member_id}', self.state, state)

    # -- joining and heartbeats ------------------------------------------------------------------------

    @property
    def in_group(self) -> bool:
        """Whether the member heartbeats (joining, reconciling, acknowledging or stable)."""
        return self.state in _IN_GROUP

    @property
    def wants_heartbeat_now(self) -> bool:
        """A heartbeat should go out without waiting for the interval: to join, to acknowledge, or to leave."""
        return self.state in (MemberState.JOINING, MemberState.ACKNOWLEDGING, MemberState.LEAVING)

    def join(self) -> None:
        """Start (or restart, after fencing or going stale) membership: the next heartbeat carries epoch 0."""
        self._to(MemberState.JOINING)
        self.member_epoch = JOIN_EPOCH
        self.target = None

    def heartbeat(self) -> HeartbeatFields:
        """The member-specific fields of the next heartbeat."""
        owned = {} if self.state is MemberState.JOINING else self.owned
        return HeartbeatFields(self.member_id, self.member_epoch, self.instance_id, owned, self._version)

    def on_response(self, sent: HeartbeatFields, member_id: str | None, member_epoch: int, interval_ms: int,
                    assignment: Assignment | None) -> None:
        """A successful heartbeat answer to ``sent``: the epoch and interval it gives, and the new target
        ``assignment`` when it carries one (None: unchanged)."""
        if not self.in_group or (self.state is MemberState.JOINING and sent.member_epoch != self.member_epoch):
            return  # an answer to a heartbeat from before a leave or a fencing
        if member_id:
            self.member_id = member_id
        self.member_epoch = member_epoch
        self.heartbeat_interval_ms = interval_ms
        if assignment is not None:
            self.target = {topic: frozenset(partitions) for topic, partitions in assignment.items() if partitions}
        if self.target is None:
            return
        if self.target != self.owned:
            if self.state is not MemberState.RECONCILING:
                self._to(MemberState.RECONCILING)
        elif self.state in (MemberState.JOINING, MemberState.RECONCILING):
            self._to(MemberState.STABLE)
        elif self.state is MemberState.ACKNOWLEDGING and sent.assignment_version == self._version:
            self._to(MemberState.STABLE)

    def on_error(self, error_code: int, error: Exception) -> ErrorAction:
        """A heartbeat error: the action it calls for, with the state moved accordingly (FENCE: FENCED unless the
        member is leaving; FATAL: FATAL with ``error`` kept for poll() to raise)."""
        action = error_action(error_code)
        if action is ErrorAction.FENCE and self.in_group:
            self._to(MemberState.FENCED)
        elif action is ErrorAction.FATAL and self.state is not MemberState.FATAL:
            self.fatal_error = error
            self._to(MemberState.FATAL)
        return action

    # -- reconciliation --------------------------------------------------------------------------------

    def reconciliation(self, topic_name: Callable[[uuid.UUID], str | None]) -> Reconciliation | None:
        """The next reconciliation, or None if none is due or a topic id of the target has no name yet (the caller
        refreshes metadata and asks again)."""
        if self.state is not MemberState.RECONCILING or self.target is None:
            return None
        names = {topic_id: topic_name(topic_id) for topic_id in self.target}
        if None in names.values():
            return None
        assignment = frozenset(TopicPartition(names[topic_id], p)
                               for topic_id, partitions in self.target.items() for p in partitions)
        return Reconciliation(revoked=self.owned_partitions - assignment, added=assignment - self.owned_partitions,
                              assignment=assignment, target=dict(self.target), member_epoch=self.member_epoch)

    def unresolved_topics(self) -> set[uuid.UUID]:
        """Topic ids of the target (while reconciling)."""
        return set(self.target or ()) if self.state is MemberState.RECONCILING else set()

    def reconciled(self, done: Reconciliation) -> bool:
        """``done`` was carried out: the member owns its partitions and acknowledges them with its next heartbeat.
        False if it got another target meanwhile (it reconciles again from what it owns now), was fenced or went
        stale (what it owns now is lost), or left (it owns nothing)."""
        if self.state not in (MemberState.RECONCILING, MemberState.FENCED, MemberState.STALE):
            return False
        self.owned, self.owned_partitions = done.target, done.assignment
        self._version += 1
        if self.state is not MemberState.RECONCILING or self.target != done.target:
            return False
        self._to(MemberState.ACKNOWLEDGING)
        return True

    # -- losing the partitions: fenced, stale ----------------------------------------------------------

    def lost(self) -> frozenset[TopicPartition]:
        """The partitions a FENCED or STALE member lost (the listener's ``on_partitions_lost``); empty otherwise."""
        return self.owned_partitions if self.state in (MemberState.FENCED, MemberState.STALE) else frozenset()

    def rejoin(self) -> None:
        """After the lost partitions were given up: owns nothing, joins again at epoch 0 (keeping its member id)."""
        self._forget_assignment()
        self.join()

    def went_stale(self) -> None:
        """poll() was not called within max_poll_interval_ms: the member leaves (:meth:`leave_epoch`) and rejoins
        at its next poll."""
        self._to(MemberState.STALE)

    # -- leaving ---------------------------------------------------------------------------------------

    def prepare_leaving(self) -> bool:
        """Close or unsubscribe: True if the member is in the group (its owned partitions are revoked next, then
        :meth:`leave` sends the leave heartbeat); False if there is nothing to leave."""
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL, MemberState.PREPARE_LEAVING,
                          MemberState.LEAVING):
            return False
        self._to(MemberState.PREPARE_LEAVING)
        return True

    def leave(self) -> None:
        """The revocation is done: the next heartbeat leaves the group."""
        self._to(MemberState.LEAVING)
        self.member_epoch = self.leave_epoch
        self._forget_assignment()

    @property
    def leave_epoch(self) -> int:
        """-2 for a static member (it keeps its place for the session timeout), -1 otherwise."""
        return STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH

    def left(self) -> None:
        """The leave heartbeat was answered (or could not be sent): not in the group."""
        self._to(MemberState.UNSUBSCRIBED)
        self.member_epoch = JOIN_EPOCH

    def _forget_assignment(self) -> None:
        self.owned, self.owned_partitions, self.target = {}, frozenset(), None
        self._version += 1


class ReconciliationSteps(Protocol):
    """What :func:`carry_out` needs from the consumer (its coordinator implements it)."""

    def stop_fetching(self, partitions: frozenset[TopicPartition]) -> None: ...

    async def commit_consumed(self) -> None: ...

    async def call_listener(self, method: str, partitions: frozenset[TopicPartition]) -> Exception | None: ...

    def assign(self, partitions: frozenset[TopicPartition]) -> None: ...


async def carry_out(plan: Reconciliation, steps: ReconciliationSteps, *, auto_commit: bool) -> Exception | None:
    """Carry out ``plan`` in Java's order: the revoked partitions stop being fetched, the consumed offsets are
    committed (``auto_commit``), ``on_partitions_revoked(revoked)``; the assignment takes effect,
    ``on_partitions_assigned(added)``. Returns what a listener raised (the last one), for the caller to raise once the
    member acknowledged; a listener error never stops the steps after it."""
    error = None
    if plan.revoked:
        steps.stop_fetching(plan.revoked)
        if auto_commit:
            await steps.commit_consumed()
        error = await steps.call_listener('on_partitions_revoked', plan.revoked)
    steps.assign(plan.assignment)
    if plan.added:
        error = await steps.call_listener('on_partitions_assigned', plan.added) or error
    return error
