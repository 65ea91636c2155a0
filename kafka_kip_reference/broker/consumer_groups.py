"""KIP-848 consumer groups of the reference cluster: the group epoch, the target assignment and each member's
incremental reconciliation, as Apache Kafka 4.4's group coordinator runs them.

A :class:`ConsumerGroup` has three epochs: the *group epoch* (bumped whenever membership, a subscription or the
subscribed topics' partitions change), the *assignment epoch* (the group epoch the target assignment was computed
at, by a server-side assignor of :mod:`kafka_kip_reference.broker.consumer_group_assignors`) and each member's *member
epoch* (the assignment epoch it has reconciled to). A member moves towards its target in steps (Kafka's
``CurrentAssignmentBuilder``): partitions it must give up are revoked first, with its epoch unchanged, until its
heartbeat no longer reports them; only then does it move to the assignment epoch, and partitions another member
still owns are handed to it only once that member has released them. Both lifecycles are explicit states with
their allowed transitions as data (:data:`MEMBER_TRANSITIONS`, :data:`GROUP_TRANSITIONS`), as in
:mod:`kafka_kip.mirror.state`; a transition the table does not allow raises :class:`InvalidTransition`.

Members may also speak the classic protocol (JoinGroup / SyncGroup / Heartbeat / LeaveGroup), as in Kafka 4.4
after an online upgrade or when a classic consumer joins a consumer group: such a member carries its
:class:`ClassicProtocol`, is assigned by the server-side assignor like the others, reconciles at each JoinGroup
(its generation is its member epoch) and is told REBALANCE_IN_PROGRESS when it must rejoin to move on.

Errors are Kafka's: UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
UNSUPPORTED_ASSIGNOR, INVALID_REQUEST, GROUP_MAX_SIZE_REACHED, INVALID_REGULAR_EXPRESSION, and STALE_MEMBER_EPOCH
for offset commits and fetches of a member whose epoch is not its current one. Timers (session and rebalance
timeouts) go through the ``schedule`` callable the group is given, so unit tests drive them without a clock.
"""
from __future__ import annotations

import enum
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidRequestError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)
from kafka.structs import TopicPartition

from kafka_kip.protocol import constants
from kafka_kip_reference.broker.committed_offsets import GroupOffsets
from kafka_kip_reference.broker.config import MIGRATION_POLICIES
from kafka_kip_reference.broker.consumer_group_assignors import ASSIGNORS, Assignment, MemberSpec
from kafka_kip_reference.broker.embedded_protocol import (
    MalformedConsumerProtocol,
    decode_subscription,
    encode_assignment,
)
from kafka_kip_reference.broker.positions import PositionExchange

#: Kafka's INVALID_REGULAR_EXPRESSION (kafka-python has no class for it).
INVALID_REGULAR_EXPRESSION = 128
#: Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
#: The group and assignment epochs of a new group (Kafka 4.4, KAFKA-20268): epoch 1 is an empty target assignment,
#: so the first member's join computes the first real one at epoch 2.
NEW_GROUP_EPOCH = 1


class ConsumerGroupError(Exception):
    """A heartbeat or commit refused with Kafka's ``errno`` and message."""

    def __init__(self, errno: int, message: str) -> None:
        super().__init__(message)
        self.errno, self.message = errno, message


class InvalidTransition(RuntimeError):
    """A member or group was asked to make a transition its table does not allow (a bug)."""


class _Named(str, enum.Enum):
    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class MemberState(_Named):
    """Where a member's reconciliation stands (Kafka's MemberState)."""

    STABLE = 'stable'  # its assignment is its target at its epoch
    UNREVOKED_PARTITIONS = 'unrevoked_partitions'  # it must revoke partitions before it moves on (epoch unchanged)
    UNRELEASED_PARTITIONS = 'unreleased_partitions'  # at the target epoch, waiting for partitions others still own


#: Allowed member transitions (a step of reconciliation may also leave the state unchanged).
MEMBER_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    MemberState.STABLE: frozenset(MemberState),
    MemberState.UNREVOKED_PARTITIONS: frozenset(MemberState),
    MemberState.UNRELEASED_PARTITIONS: frozenset(MemberState),
}


class ConsumerGroupState(_Named):
    """A consumer group's state; the value is Kafka's name for it (ListGroups, ConsumerGroupDescribe)."""

    EMPTY = 'Empty'  # no members
    ASSIGNING = 'Assigning'  # the group epoch is ahead of the target assignment
    RECONCILING = 'Reconciling'  # some member has not reached the target assignment
    STABLE = 'Stable'  # every member holds its target at the assignment epoch
    DEAD = 'Dead'  # deleted


_LIVE = frozenset({ConsumerGroupState.EMPTY, ConsumerGroupState.ASSIGNING, ConsumerGroupState.RECONCILING,
                   ConsumerGroupState.STABLE})
#: Allowed group transitions: any live state to any live state; only an empty group may die.
GROUP_TRANSITIONS: dict[ConsumerGroupState, frozenset[ConsumerGroupState]] = {
    ConsumerGroupState.EMPTY: _LIVE | {ConsumerGroupState.DEAD},
    ConsumerGroupState.ASSIGNING: _LIVE,
    ConsumerGroupState.RECONCILING: _LIVE,
    ConsumerGroupState.STABLE: _LIVE,
    ConsumerGroupState.DEAD: frozenset(),
}


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """The ``group.consumer.*`` broker configs a group acts on (Kafka 4.4's defaults)."""

    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    assignors: tuple[str, ...] = ('uniform', 'range')
    max_size: int = 2**31 - 1
    migration_policy: str = 'bidirectional'

    def __post_init__(self) -> None:
        unknown = [name for name in self.assignors if name not in ASSIGNORS]
        if unknown or not self.assignors:
            raise ValueError(f'group.consumer.assignors {",".join(self.assignors)!r}: the reference cluster has '
                             f'the assignors {", ".join(ASSIGNORS)}')
        if self.migration_policy not in MIGRATION_POLICIES:
            raise ValueError(f'group.consumer.migration.policy {self.migration_policy!r}: one of '
                             f'{", ".join(MIGRATION_POLICIES)}')

    @property
    def upgrade_enabled(self) -> bool:
        """A classic group with members may become a consumer group."""
        return self.migration_policy in ('upgrade', 'bidirectional')

    @property
    def downgrade_enabled(self) -> bool:
        """A consumer group left with classic members only may become a classic group."""
        return self.migration_policy in ('downgrade', 'bidirectional')


class Topics(Protocol):
    """What a group reads of the cluster's metadata (``ClusterState`` provides it)."""

    def topic_id(self, name: str) -> uuid.UUID | None: ...

    def partitions(self, topic: str) -> int | None: ...

    def topic_names(self) -> Iterable[str]: ...


class Timer(Protocol):
    def cancel(self) -> None: ...


#: ``schedule(delay_ms, callback) -> Timer``: run ``callback`` after ``delay_ms`` unless cancelled.
Schedule = Callable[[int, Callable[[], None]], Timer]


@dataclass(frozen=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat independent of its version (None: unchanged since the last heartbeat)."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ''
    client_host: str = ''


@dataclass(frozen=True)
class ClassicProtocol:
    """What a member speaking the classic protocol told the coordinator in its last JoinGroup."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol the member is told to use: its first (Kafka answers the member's own preference)."""
        return self.protocols[0][0]


@dataclass(frozen=True)
class ClassicJoin:
    """A JoinGroup to a consumer group, independent of its version."""

    member_id: str
    instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    require_known_member_id: bool
    client_id: str = ''
    client_host: str = ''


@dataclass(frozen=True)
class ClassicJoined:
    """The answer to a JoinGroup of a classic member: its id, generation (its member epoch) and protocol."""

    error: int
    member_id: str
    generation_id: int = -1
    protocol_name: str | None = None


@dataclass(frozen=True)
class HeartbeatResult:
    """The answer: the member's id and epoch, and its assignment when it must be sent."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None = None


@dataclass(eq=False)
class ConsumerMember:
    """One member: its subscription, its epochs and where its reconciliation stands."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ''
    client_host: str = ''
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: set while the member speaks the classic protocol (JoinGroup / SyncGroup / Heartbeat)
    classic: ClassicProtocol | None = None
    session_timer: Timer | None = field(default=None, repr=False)
    rebalance_timer: Timer | None = field(default=None, repr=False)
    #: classic members: told to rejoin, they must within their rebalance timeout; joined, they must sync
    join_timer: Timer | None = field(default=None, repr=False)
    sync_timer: Timer | None = field(default=None, repr=False)

    def go(self, state: MemberState) -> None:
        if state not in MEMBER_TRANSITIONS[self.state]:
            raise InvalidTransition(f'member {self.member_id}: no transition from {self.state} to {state}')
        self.state = state

    def owns(self) -> set[tuple[uuid.UUID, int]]:
        """Every partition the member may still hold: assigned plus pending revocation."""
        return {(t, p) for part in (self.assigned, self.pending_revocation) for t, ps in part.items() for p in ps}

    def subscription_changed_by(self, request: HeartbeatRequest) -> bool:
        return ((request.subscribed_topic_names is not None
                 and tuple(sorted(request.subscribed_topic_names)) != self.subscribed_topic_names)
                or (request.subscribed_topic_regex is not None
                    and request.subscribed_topic_regex != self.subscribed_topic_regex)
                or (request.server_assignor is not None and request.server_assignor != self.server_assignor))


def _partitions(assignment: Mapping[uuid.UUID, Iterable[int]]) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def _by_topic(partitions: Iterable[tuple[uuid.UUID, int]]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in partitions:
        out.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(ps) for topic_id, ps in out.items()}


@dataclass(frozen=True)
class Reconciled:
    """One reconciliation step of a member (Kafka's CurrentAssignmentBuilder): its next state, epoch,
    assigned partitions and partitions pending revocation."""

    state: MemberState
    member_epoch: int
    assigned: Assignment
    pending_revocation: Assignment


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment,
              owner_of: Callable[[uuid.UUID, int], str | None], owned: Assignment | None) -> Reconciled | None:
    """The member's next step towards ``target`` at ``target_epoch``, or None when there is nothing to do.

    ``owner_of(topic_id, partition)`` names the member that still holds a partition (None: free); ``owned`` is
    what the member's heartbeat reports holding (None: not reported, so revocations count as not done).
    """
    def still_owns(revoking: set[tuple[uuid.UUID, int]]) -> bool:
        return owned is None or bool(revoking & _partitions(owned))

    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return None
        epoch = member.member_epoch
    elif member.state is MemberState.UNREVOKED_PARTITIONS:
        if still_owns(_partitions(member.pending_revocation)):
            return None
        epoch = member.member_epoch + 1  # revoked: it moves on (to its target, or revokes again at epoch + 1)
    else:
        epoch = member.member_epoch
    current, wanted = _partitions(member.assigned), _partitions(target)
    keep = current & wanted
    revoke = current - wanted
    pending = wanted - current
    unreleased = {tp for tp in pending if owner_of(*tp) not in (None, member.member_id)}
    if revoke and still_owns(revoke):
        return Reconciled(MemberState.UNREVOKED_PARTITIONS, epoch, _by_topic(keep), _by_topic(revoke))
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciled(state, target_epoch, _by_topic(keep | (pending - unreleased)), {})


class ConsumerGroup:
    """One KIP-848 consumer group. Every method runs on the cluster's event loop thread (or a test's)."""

    group_type = 'consumer'
    protocol_type = 'consumer'

    def __init__(self, group_id: str, topics: Topics, config: ConsumerGroupConfig, schedule: Schedule,
                 offsets: GroupOffsets) -> None:
        self.group_id = group_id
        self.state = ConsumerGroupState.EMPTY
        self.group_epoch = NEW_GROUP_EPOCH
        self.assignment_epoch = NEW_GROUP_EPOCH
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        #: member id -> its target assignment at the assignment epoch
        self.target: dict[str, Assignment] = {}
        #: (topic id, partition) -> the member that holds it (assigned or pending revocation)
        self.owners: dict[tuple[uuid.UUID, int], str] = {}
        #: subscribed topic name -> (topic id, partition count) the target assignment was computed from
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.assignor_name = config.assignors[0]
        self.offsets = offsets
        #: KIP-253: the positions members need and report (classic members through Heartbeat v4)
        self.positions = PositionExchange()
        self.coordinator_id: int | None = None
        #: called with the group when its last consumer-protocol member is gone and only classic members remain
        #: (and ``group.consumer.migration.policy`` allows a downgrade): the coordinator replaces it by a classic group
        self.on_downgrade: Callable[[ConsumerGroup], None] | None = None
        self._topics = topics
        self._config = config
        self._schedule = schedule

    # -- classic-coordinator interface (offsets, listing, deletion) ------------------------------------------

    @property
    def generation_id(self) -> int:
        return self.group_epoch

    def is_empty(self) -> bool:
        return not self.members and not self.offsets

    def moved_to(self, broker_id: int) -> None:
        """The coordinator moved: every member gets a fresh session timeout, as after a coordinator load."""
        self.coordinator_id = broker_id
        for member in self.members.values():
            self._schedule_session_timeout(member)

    def close(self, dead: bool = False) -> None:
        for member in self.members.values():
            self._cancel_timers(member)
        if dead:
            self._go(ConsumerGroupState.DEAD)
            self.offsets.clear()

    def validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                               api_version_9: bool = True, transactional: bool = False) -> int:
        """Kafka's checks of an OffsetCommit to a consumer group: anyone with epoch -1 while the group is
        empty; else a member at its current epoch (STALE_MEMBER_EPOCH otherwise) using OffsetCommit v9+."""
        if member_epoch < 0 and not self.members:
            return constants.NONE
        member = self.members.get(member_id)
        if member is None:
            return UnknownMemberIdError.errno
        if not transactional and member.classic is None and not api_version_9:
            return UnsupportedVersionError.errno
        if member_epoch == member.member_epoch:
            return constants.NONE
        return IllegalGenerationError.errno if member.classic is not None else StaleMemberEpochError.errno

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+: without member id and epoch (an admin) anyone; else a member at its epoch."""
        if member_id is None and member_epoch < 0:
            return constants.NONE
        member = self.members.get(member_id or '')
        if member is None:
            return UnknownMemberIdError.errno
        return constants.NONE if member_epoch == member.member_epoch else StaleMemberEpochError.errno

    # -- heartbeat ---------------------------------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat: join, reconcile or leave. Raises :class:`ConsumerGroupError`."""
        if self.state is ConsumerGroupState.DEAD:
            raise ConsumerGroupError(UnknownMemberIdError.errno, f'Group {self.group_id} is dead.')
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request)
        member, is_new = self._member_for(request)
        before = member.assigned
        self._advance(member, is_new, request)
        full = request.member_epoch == JOIN_EPOCH or (
            request.rebalance_timeout_ms != -1 and request.subscribed_topic_names is not None
            and request.owned is not None)
        send = full or member.assigned != before
        return HeartbeatResult(member.member_id, member.member_epoch, self._config.heartbeat_interval_ms,
                               dict(member.assigned) if send else None)

    def _advance(self, member: ConsumerMember, is_new: bool, request: HeartbeatRequest) -> None:
        """Kafka's three steps for a member's heartbeat or classic join: update the member (a new member or a
        changed subscription bumps the group epoch), recompute the target if the group epoch is ahead of it, and
        move the member one reconciliation step towards its target."""
        bump = is_new or member.subscription_changed_by(request)
        self._update_member(member, request)
        metadata = self._subscription_metadata()
        if metadata != self.subscription_metadata:
            self.subscription_metadata = metadata
            bump = True
        if bump:
            self.group_epoch += 1
        if self.group_epoch > self.assignment_epoch:
            self._compute_target()
        self._reconcile(member, request.owned)
        self._schedule_session_timeout(member)
        self._update_state()

    def _member_for(self, request: HeartbeatRequest) -> tuple[ConsumerMember, bool]:
        """The member the heartbeat is from, checked as Kafka checks it; (member, newly created)."""
        joining = request.member_epoch == JOIN_EPOCH
        if request.instance_id is not None:
            existing_id = self.static_members.get(request.instance_id)
            existing = self.members.get(existing_id) if existing_id is not None else None
            if joining:
                if existing is None:
                    return self._new_member(request), True
                if existing.member_id != request.member_id and existing.member_epoch != STATIC_LEAVE_EPOCH:
                    raise ConsumerGroupError(
                        UnreleasedInstanceIdError.errno,
                        f'Static member {request.member_id} with instance id {request.instance_id} cannot join the '
                        f'group because the instance id is owned by {existing.member_id} member.')
                if existing.member_id == request.member_id:
                    self._remove_member(existing)  # a static member rejoining with its own id starts over
                    return self._new_member(request), True
                return self._replace_static_member(existing, request.member_id), False
            if existing is None:
                raise ConsumerGroupError(UnknownMemberIdError.errno, f'Instance id {request.instance_id} is unknown.')
            if existing.member_id != request.member_id:
                raise ConsumerGroupError(
                    FencedInstanceIdError.errno,
                    f'Static member {request.member_id} with instance id {request.instance_id} was fenced by member '
                    f'{existing.member_id}.')
            self._check_epoch(existing, request)
            return existing, False
        member = self.members.get(request.member_id)
        if joining:
            if member is not None:
                # KIP-1082: a member keeps its id across a fencing and rejoins with epoch 0; it has given up
                # every partition, so it starts over as a new member.
                self._remove_member(member)
            return self._new_member(request), True
        if member is None:
            raise ConsumerGroupError(UnknownMemberIdError.errno,
                                     f'Member {request.member_id} is not a member of group {self.group_id}.')
        self._check_epoch(member, request)
        return member, False

    def _new_member(self, request: HeartbeatRequest) -> ConsumerMember:
        if len(self.members) >= self._config.max_size:
            raise ConsumerGroupError(GroupMaxSizeReachedError.errno,
                                     f'The consumer group has reached its maximum capacity of '
                                     f'{self._config.max_size} members.')
        member = ConsumerMember(request.member_id or str(uuid.uuid4()), instance_id=request.instance_id)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        return member

    def _replace_static_member(self, old: ConsumerMember, member_id: str) -> ConsumerMember:
        """A static member that left with epoch -2 is back under a new member id: it takes the old place,
        its assignment and its target, at epoch 0 (no group epoch bump)."""
        self._cancel_timers(old)
        del self.members[old.member_id]
        self.positions.forget_member(old.member_id)
        member = ConsumerMember(
            member_id or str(uuid.uuid4()), instance_id=old.instance_id, rack_id=old.rack_id,
            rebalance_timeout_ms=old.rebalance_timeout_ms, subscribed_topic_names=old.subscribed_topic_names,
            subscribed_topic_regex=old.subscribed_topic_regex, server_assignor=old.server_assignor,
            state=old.state, member_epoch=0, previous_member_epoch=0, assigned=dict(old.assigned))
        self.members[member.member_id] = member
        self.static_members[member.instance_id or ''] = member.member_id
        self.target[member.member_id] = self.target.pop(old.member_id, {})
        for tp, owner in self.owners.items():
            if owner == old.member_id:
                self.owners[tp] = member.member_id
        return member

    def _check_epoch(self, member: ConsumerMember, request: HeartbeatRequest) -> None:
        """FENCED_MEMBER_EPOCH unless the epoch is the member's, or its previous one with owned partitions that
        are a subset of its assignment (the response with the new epoch was lost)."""
        received = request.member_epoch
        if received > member.member_epoch:
            raise ConsumerGroupError(
                FencedMemberEpochError.errno,
                f'The consumer group member has a greater member epoch ({received}) than the one known by the group '
                f'coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.')
        if received < member.member_epoch:
            subset = request.owned is not None and _partitions(request.owned) <= _partitions(member.assigned)
            if received != member.previous_member_epoch or not subset:
                raise ConsumerGroupError(
                    FencedMemberEpochError.errno,
                    f'The consumer group member has a smaller member epoch ({received}) than the one known by the '
                    f'group coordinator ({member.member_epoch}). The member must abandon all its partitions and '
                    'rejoin.')

    def _update_member(self, member: ConsumerMember, request: HeartbeatRequest) -> None:
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(request.subscribed_topic_names))
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        member.client_id, member.client_host = request.client_id, request.client_host

    # -- classic members (JoinGroup / SyncGroup / Heartbeat / LeaveGroup to a consumer group) -------------------

    def supports_classic_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """Kafka's check of a classic join: protocol type ``consumer`` and, once the group has classic members,
        a protocol every one of them supports."""
        if protocol_type != self.protocol_type:
            return False
        names = set(protocols)
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        if not self.members:
            return bool(names)
        return any(all(name in {p for p, _ in c.protocols} for c in classic) for name in names)

    def classic_join(self, join: ClassicJoin) -> ClassicJoined:
        """A JoinGroup: the member joins or rejoins and takes one reconciliation step at once (no join phase to
        wait for); raises :class:`ConsumerGroupError`."""
        member_id = join.member_id or str(uuid.uuid4())
        if member_id not in self.members and len(self.members) >= self._config.max_size:
            raise ConsumerGroupError(GroupMaxSizeReachedError.errno,
                                     f'The consumer group has reached its maximum capacity of '
                                     f'{self._config.max_size} members.')
        if not self.supports_classic_protocols(join.protocol_type, (name for name, _ in join.protocols)):
            raise ConsumerGroupError(InconsistentGroupProtocolError.errno,
                                     f"Member {member_id}'s protocols are not supported.")
        if not join.member_id and join.instance_id is None and join.require_known_member_id:
            return ClassicJoined(MemberIdRequiredError.errno, member_id)
        try:
            subscription = decode_subscription(join.protocols[0][1])
        except MalformedConsumerProtocol as exc:
            raise ConsumerGroupError(InconsistentGroupProtocolError.errno, str(exc)) from None
        member, is_new = self._classic_member_for(join, member_id)
        owned = {}
        for topic, partition in subscription.owned:
            topic_id = self._topics.topic_id(topic)
            if topic_id is not None:
                owned.setdefault(topic_id, set()).add(partition)
        member.classic = ClassicProtocol(join.session_timeout_ms, join.protocols)
        self._cancel_timer(member, 'join_timer')
        self._advance(member, is_new, HeartbeatRequest(
            member_id=member.member_id, member_epoch=member.member_epoch, instance_id=join.instance_id,
            rack_id=subscription.rack_id, rebalance_timeout_ms=join.rebalance_timeout_ms,
            subscribed_topic_names=subscription.topics,
            owned={topic_id: frozenset(ps) for topic_id, ps in owned.items()},
            client_id=join.client_id, client_host=join.client_host))
        self._cancel_timer(member, 'sync_timer')
        member.sync_timer = self._schedule(max(join.rebalance_timeout_ms, 0),
                                           lambda: self._expire_classic(member.member_id, 'sync_timer'))
        return ClassicJoined(constants.NONE, member.member_id, member.member_epoch,
                             member.classic.protocol_name)

    def _classic_member_for(self, join: ClassicJoin, member_id: str) -> tuple[ConsumerMember, bool]:
        if join.instance_id is None:
            member = self.members.get(member_id)
            return (member, False) if member is not None else (self._new_classic_member(member_id, None), True)
        existing_id = self.static_members.get(join.instance_id)
        if existing_id is None:
            return self._new_classic_member(member_id, join.instance_id), True
        if existing_id == member_id:
            return self.members[existing_id], False
        if join.member_id:
            raise ConsumerGroupError(
                FencedInstanceIdError.errno,
                f'Static member {member_id} with instance id {join.instance_id} was fenced by member {existing_id}.')
        return self._replace_static_member(self.members[existing_id], member_id), False

    def _new_classic_member(self, member_id: str, instance_id: str | None) -> ConsumerMember:
        member = ConsumerMember(member_id, instance_id=instance_id)
        self.members[member_id] = member
        if instance_id is not None:
            self.static_members[instance_id] = member_id
        return member

    def classic_sync(self, member_id: str, instance_id: str | None, generation_id: int, protocol_type: str | None,
                     protocol_name: str | None) -> bytes:
        """A SyncGroup: the member's assigned partitions as a ConsumerProtocolAssignment; raises
        :class:`ConsumerGroupError` (REBALANCE_IN_PROGRESS when the group epoch moved on and it must rejoin)."""
        member = self._classic_member(member_id, instance_id, generation_id)
        assert member.classic is not None
        if protocol_type is not None and protocol_type != self.protocol_type:
            raise ConsumerGroupError(
                InconsistentGroupProtocolError.errno,
                f'The protocol type {protocol_type} from member {member_id} request is not equal to the group '
                f'protocol type {self.protocol_type}.')
        if protocol_name is not None and protocol_name != member.classic.protocol_name:
            raise ConsumerGroupError(
                InconsistentGroupProtocolError.errno,
                f'The protocol name {protocol_name} from member {member_id} request is not equal to the protocol '
                f'name {member.classic.protocol_name} returned in the join response.')
        if self.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout(member)
            raise ConsumerGroupError(RebalanceInProgressError.errno,
                                     f'A new rebalance is triggered in group {self.group_id} and member '
                                     f'{member_id} should rejoin to catch up.')
        self._cancel_timer(member, 'sync_timer')
        self._schedule_session_timeout(member)
        return self.classic_assignment(member, member.assigned)

    def classic_heartbeat(self, member_id: str, instance_id: str | None, generation_id: int) -> int:
        """A Heartbeat: REBALANCE_IN_PROGRESS when the member must rejoin (the group epoch moved on, it has
        partitions to revoke, or the partitions it waits for are free); raises :class:`ConsumerGroupError`."""
        member = self._classic_member(member_id, instance_id, generation_id)
        self._schedule_session_timeout(member)
        if (member.member_epoch < self.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS and not self._waits_for_others(member))):
            self._schedule_join_timeout(member)
            return RebalanceInProgressError.errno
        return constants.NONE

    def classic_leave(self, identities: Iterable[tuple[str, str | None]]) -> list[int]:
        """A LeaveGroup of ``(member_id, instance_id)`` pairs (an admin may name static members by instance id
        alone): one error code each."""
        errors = []
        for member_id, instance_id in identities:
            try:
                member = self._classic_member(member_id, instance_id, None, admin=True)
            except ConsumerGroupError as exc:
                errors.append(exc.errno)
                continue
            self.fence(member.member_id)
            errors.append(constants.NONE)
        return errors

    def _classic_member(self, member_id: str, instance_id: str | None, generation_id: int | None,
                        admin: bool = False) -> ConsumerMember:
        """The classic member a request is from (Kafka's checks and errors, in Kafka's order)."""
        if instance_id is None:
            member = self.members.get(member_id)
            if member is None:
                raise ConsumerGroupError(UnknownMemberIdError.errno,
                                         f'Member {member_id} is not a member of group {self.group_id}.')
        else:
            known = self.static_members.get(instance_id)
            if known is None:
                raise ConsumerGroupError(UnknownMemberIdError.errno,
                                         f'Member with instance id {instance_id} is not a member of group '
                                         f'{self.group_id}.')
            if known != member_id and not (admin and member_id == ''):
                raise ConsumerGroupError(
                    FencedInstanceIdError.errno,
                    f'Static member {member_id} with instance id {instance_id} was fenced by member {known}.')
            member = self.members[known]
        if member.classic is None:
            raise ConsumerGroupError(UnknownMemberIdError.errno,
                                     f'Member {member.member_id} does not use the classic protocol.')
        if generation_id is not None and generation_id != member.member_epoch:
            raise ConsumerGroupError(IllegalGenerationError.errno,
                                     f'The member {member.member_id} is of generation {member.member_epoch}, not '
                                     f'{generation_id}.')
        return member

    def _waits_for_others(self, member: ConsumerMember) -> bool:
        """Some partition of the member's target is still held by another member."""
        return any(self.owners.get(tp) not in (None, member.member_id)
                   for tp in _partitions(self.target.get(member.member_id, {})) - _partitions(member.assigned))

    def classic_assignment(self, member: ConsumerMember, assignment: Assignment) -> bytes:
        """``assignment`` as the ConsumerProtocolAssignment a classic ``member`` reads (its protocol's version)."""
        assert member.classic is not None
        names = self._topic_names()
        metadata = member.classic.protocols[0][1]
        version = int.from_bytes(metadata[:2], 'big', signed=True) if len(metadata) >= 2 else 0
        return encode_assignment({names[t]: ps for t, ps in assignment.items() if t in names}, version)

    def _schedule_join_timeout(self, member: ConsumerMember) -> None:
        """A classic member told to rejoin must within its rebalance timeout (once scheduled, it stays)."""
        if member.join_timer is None:
            member.join_timer = self._schedule(max(member.rebalance_timeout_ms, 0),
                                               lambda: self._expire_classic(member.member_id, 'join_timer'))

    def _expire_classic(self, member_id: str, timer: str) -> None:
        member = self.members.get(member_id)
        if member is not None:
            setattr(member, timer, None)
            self.fence(member_id)

    # -- online upgrade and downgrade --------------------------------------------------------------------------

    def adopt(self, epoch: int, members: Iterable[ConsumerMember]) -> None:
        """Take over the members of a classic group at its generation ``epoch`` (Kafka's online upgrade): each
        keeps its assignment, which is also its target, so nothing moves until the group epoch does."""
        self.group_epoch = self.assignment_epoch = epoch
        for member in members:
            self.members[member.member_id] = member
            if member.instance_id is not None:
                self.static_members[member.instance_id] = member.member_id
            self.target[member.member_id] = dict(member.assigned)
            for tp in _partitions(member.assigned):
                self.owners.setdefault(tp, member.member_id)
            self._schedule_session_timeout(member)
        self.subscription_metadata = self._subscription_metadata()
        self._update_state()

    def _downgrades_without(self, leaving: ConsumerMember) -> bool:
        """Kafka's check before fencing ``leaving``: the others are all classic members (at least one) and
        ``group.consumer.migration.policy`` allows a downgrade."""
        others = [m for m in self.members.values() if m is not leaving]
        return (self.on_downgrade is not None and bool(others) and all(m.classic is not None for m in others)
                and self._config.downgrade_enabled)

    # -- target assignment ---------------------------------------------------------------------------------------

    def subscribed_topics(self) -> set[str]:
        """The topics some member subscribes to (OffsetDelete keeps their offsets, as for classic groups)."""
        return {name for member in self.members.values() for name in self.member_topics(member)}

    def member_topics(self, member: ConsumerMember) -> set[str]:
        """The topics ``member`` subscribes to: its names, plus every topic of the cluster its regex matches
        whole (internal topics included, as on Kafka)."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            pattern = re.compile(member.subscribed_topic_regex)
            names.update(name for name in self._topics.topic_names() if pattern.fullmatch(name))
        return names

    def _subscription_metadata(self) -> dict[str, tuple[uuid.UUID, int]]:
        metadata = {}
        for name in sorted(self.subscribed_topics()):
            topic_id, count = self._topics.topic_id(name), self._topics.partitions(name)
            if topic_id is not None and count:
                metadata[name] = (topic_id, count)
        return metadata

    def _select_assignor(self) -> str:
        """The assignor most members ask for (ties: the configured order), else the first configured one."""
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if not votes:
            return self._config.assignors[0]
        return max(votes, key=lambda name: (votes[name], -self._config.assignors.index(name)))

    def _compute_target(self) -> None:
        self.assignor_name = self._select_assignor()
        ids = {name: topic_id for name, (topic_id, _) in self.subscription_metadata.items()}
        specs = {m.member_id: MemberSpec(frozenset(ids[n] for n in self.member_topics(m) if n in ids),
                                         self.target.get(m.member_id, {}))
                 for m in self.members.values()}
        counts = {topic_id: count for topic_id, count in self.subscription_metadata.values()}
        self.target = ASSIGNORS[self.assignor_name](specs, counts)
        self.assignment_epoch = self.group_epoch

    # -- reconciliation ------------------------------------------------------------------------------------------

    def _reconcile(self, member: ConsumerMember, owned: Assignment | None) -> None:
        step = reconcile(member, self.assignment_epoch, self.target.get(member.member_id, {}),
                         lambda t, p: self.owners.get((t, p)), owned)
        if step is None:
            return
        before = member.owns()
        revoking_anew = step.state is MemberState.UNREVOKED_PARTITIONS and (
            member.state is not MemberState.UNREVOKED_PARTITIONS or step.member_epoch != member.member_epoch)
        member.go(step.state)
        if step.member_epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = step.member_epoch
        member.assigned, member.pending_revocation = step.assigned, step.pending_revocation
        after = member.owns()
        self._release(member, before - after)
        for tp in sorted(after - before):
            holder = self.owners.get(tp)
            if holder is not None and holder != member.member_id:
                raise InvalidTransition(f'{tp} assigned to {member.member_id} while {holder} holds it')
            self.owners[tp] = member.member_id
        if member.rebalance_timer is not None and (revoking_anew or member.state is not MemberState.UNREVOKED_PARTITIONS):
            member.rebalance_timer.cancel()
            member.rebalance_timer = None
        if revoking_anew:
            self._schedule_rebalance_timeout(member)

    def _release(self, member: ConsumerMember, partitions: Iterable[tuple[uuid.UUID, int]]) -> None:
        released = [tp for tp in partitions if self.owners.get(tp) == member.member_id]
        for tp in released:
            del self.owners[tp]
        names = self._topic_names()
        self.positions.forget_partitions(TopicPartition(names[t], p) for t, p in released if t in names)

    # -- KIP-253 ----------------------------------------------------------------------------------------------

    def exchange_positions(self, member_id: str, needs: Iterable[TopicPartition], reports: Mapping[TopicPartition, int]
                           ) -> tuple[dict[TopicPartition, int], frozenset[TopicPartition]]:
        """KIP-253 after a successful heartbeat of ``member_id`` (:meth:`PositionExchange.exchange`); only its
        reports of partitions it owns count (a report is dropped when the partition is released)."""
        ids = {name: topic_id for name, (topic_id, _) in self.subscription_metadata.items()}
        owned = {tp: offset for tp, offset in reports.items()
                 if tp.topic in ids and self.owners.get((ids[tp.topic], tp.partition)) == member_id}
        return self.positions.exchange(member_id, needs, owned)

    def _topic_names(self) -> dict[uuid.UUID, str]:
        return {topic_id: name for name, (topic_id, _) in self.subscription_metadata.items()}

    # -- leaving and timeouts ----------------------------------------------------------------------------------

    def _leave(self, request: HeartbeatRequest) -> HeartbeatResult:
        if request.instance_id is None:
            member = self.members.get(request.member_id)
            if member is None:
                raise ConsumerGroupError(UnknownMemberIdError.errno,
                                         f'Member {request.member_id} is not a member of group {self.group_id}.')
        else:
            member_id = self.static_members.get(request.instance_id)
            if member_id is None:
                raise ConsumerGroupError(UnknownMemberIdError.errno, f'Instance id {request.instance_id} is unknown.')
            member = self.members[member_id]
            if member.member_id != request.member_id:
                raise ConsumerGroupError(
                    FencedInstanceIdError.errno,
                    f'Static member {request.member_id} with instance id {request.instance_id} was fenced by member '
                    f'{member.member_id}.')
            if request.member_epoch == STATIC_LEAVE_EPOCH:
                # Temporarily gone: it keeps its assignment for its session timeout, epoch -2.
                self._release(member, _partitions(member.pending_revocation))
                member.pending_revocation = {}
                member.member_epoch = STATIC_LEAVE_EPOCH
                self._update_state()
                return HeartbeatResult(member.member_id, STATIC_LEAVE_EPOCH, self._config.heartbeat_interval_ms)
        self.fence(member.member_id)
        return HeartbeatResult(request.member_id, request.member_epoch, self._config.heartbeat_interval_ms)

    def fence(self, member_id: str) -> None:
        """Remove a member (it left, or its session or rebalance timed out): its partitions are free and the
        group epoch moves on so the others get a new target."""
        member = self.members.get(member_id)
        if member is None:
            return
        downgrade = self._downgrades_without(member)
        self._remove_member(member)
        if downgrade and self.on_downgrade is not None:
            self.on_downgrade(self)  # the classic group takes the others at this group epoch's target
            return
        self.subscription_metadata = self._subscription_metadata()
        self.group_epoch += 1
        self._update_state()

    def _remove_member(self, member: ConsumerMember) -> None:
        self._cancel_timers(member)
        self._release(member, member.owns())
        del self.members[member.member_id]
        self.positions.forget_member(member.member_id)
        self.target.pop(member.member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member.member_id:
            del self.static_members[member.instance_id]

    def _schedule_session_timeout(self, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        timeout = member.classic.session_timeout_ms if member.classic is not None else self._config.session_timeout_ms
        member.session_timer = self._schedule(timeout, lambda: self._expire(member.member_id, None))

    def _schedule_rebalance_timeout(self, member: ConsumerMember) -> None:
        """The member must revoke within its rebalance timeout, at this epoch, or be fenced."""
        epoch = member.member_epoch
        member.rebalance_timer = self._schedule(max(member.rebalance_timeout_ms, 0),
                                                lambda: self._expire(member.member_id, epoch))

    def _expire(self, member_id: str, epoch: int | None) -> None:
        """A session timeout (``epoch`` None) or a rebalance timeout at ``epoch`` fired."""
        member = self.members.get(member_id)
        if member is None:
            return
        if epoch is not None:
            member.rebalance_timer = None
            if member.member_epoch != epoch or member.state is not MemberState.UNREVOKED_PARTITIONS:
                return
        else:
            member.session_timer = None
        self.fence(member_id)

    @classmethod
    def _cancel_timers(cls, member: ConsumerMember) -> None:
        for name in ('session_timer', 'rebalance_timer', 'join_timer', 'sync_timer'):
            cls._cancel_timer(member, name)

    @staticmethod
    def _cancel_timer(member: ConsumerMember, name: str) -> None:
        timer = getattr(member, name)
        if timer is not None:
            timer.cancel()
            setattr(member, name, None)

    # -- state ----------------------------------------------------------------------------------------------------

    def _go(self, state: ConsumerGroupState) -> None:
        if state is not self.state and state not in GROUP_TRANSITIONS[self.state]:
            raise InvalidTransition(f'group {self.group_id}: no transition from {self.state} to {state}')
        self.state = state

    def _update_state(self) -> None:
        """Kafka's derivation: Empty without members, Assigning while the target lags the group epoch,
        Reconciling while a member is not at its target, else Stable."""
        if not self.members:
            state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            state = ConsumerGroupState.ASSIGNING
        elif any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
                 for m in self.members.values() if m.member_epoch != STATIC_LEAVE_EPOCH):
            state = ConsumerGroupState.RECONCILING
        else:
            state = ConsumerGroupState.STABLE
        self._go(state)

    def describe_assignment(self, assignment: Assignment) -> list[tuple[uuid.UUID, str, list[int]]]:
        """``(topic id, topic name, sorted partitions)`` of an assignment, by topic name (ConsumerGroupDescribe)."""
        names = self._topic_names()
        rows = [(topic_id, names.get(topic_id, ''), sorted(ps)) for topic_id, ps in assignment.items()]
        return sorted(rows, key=lambda row: (row[1], str(row[0])))


def assignment_from_wire(topic_partitions: Any) -> Assignment | None:
    """A heartbeat's ``topic_partitions`` (None when not sent) as an :data:`Assignment`."""
    if topic_partitions is None:
        return None
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


def validate_heartbeat(request: HeartbeatRequest, group_id: str, config: ConsumerGroupConfig,
                       member_id_required: bool = True) -> None:
    """Kafka's checks of a heartbeat before it reaches the group; raises :class:`ConsumerGroupError`.
    ``member_id_required``: v1+, where the member generates its id (KIP-1082); v0 joins may leave it empty."""
    def invalid(message: str) -> ConsumerGroupError:
        return ConsumerGroupError(InvalidRequestError.errno, message)

    if not group_id:
        raise invalid("GroupId can't be empty.")
    if member_id_required and not request.member_id:
        raise invalid("MemberId can't be empty.")
    if request.instance_id == '':
        raise invalid("InstanceId can't be empty.")
    if request.rack_id == '':
        raise invalid("RackId can't be empty.")
    epoch = request.member_epoch
    if epoch > 0 or epoch == LEAVE_EPOCH:
        if not request.member_id:
            raise invalid("MemberId can't be empty.")
    elif epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise invalid('RebalanceTimeoutMs must be provided in first request.')
        if request.owned is None or request.owned:
            raise invalid('TopicPartitions must be empty when (re-)joining.')
        if not request.subscribed_topic_names and request.subscribed_topic_regex is None:
            raise invalid('SubscribedTopicNames or SubscribedTopicRegex must be set in first request.')
    elif epoch == STATIC_LEAVE_EPOCH:
        if not request.member_id:
            raise invalid("MemberId can't be empty.")
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    else:
        raise invalid('MemberEpoch is invalid.')
    if request.server_assignor is not None and request.server_assignor not in config.assignors:
        raise ConsumerGroupError(UnsupportedAssignorError.errno,
                                 f'ServerAssignor {request.server_assignor} is not supported. Supported assignors: '
                                 f'{", ".join(config.assignors)}.')
    if request.subscribed_topic_regex:
        try:
            re.compile(request.subscribed_topic_regex)
        except re.error as exc:
            raise ConsumerGroupError(INVALID_REGULAR_EXPRESSION,
                                     f'SubscribedTopicRegex `{request.subscribed_topic_regex}` is not a valid '
                                     f'regular expression: {exc}.') from None
