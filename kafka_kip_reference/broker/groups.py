"""The group coordinator of the reference cluster: Kafka's classic consumer group protocol.

:class:`Group` is the state machine of one group (Empty -> PreparingRebalance -> CompletingRebalance
-> Stable, and Dead once deleted), following Apache Kafka's classic group coordinator: member ids
handed out with MEMBER_ID_REQUIRED (JoinGroup v4+), static membership (``group.instance.id``),
protocol selection by vote, leader election, the initial rebalance delay, rebalances that wait for
every known member up to the rebalance timeout, session timeouts, pending-sync expiry, and the
generation checks of SyncGroup, Heartbeat and OffsetCommit. Timers run on the cluster's event loop.

:class:`GroupCoordinator` answers the group APIs on every broker of the cluster. Group state is one
cluster-wide in-memory table, so when the coordinating broker stops and ``coordinator_for`` moves the
group to another broker, the new coordinator carries on with the same members and offsets (as a Kafka
coordinator does after loading the group from ``__consumer_offsets``); requests that reach any other
broker get NOT_COORDINATOR. Committed offsets and their KIP-232 checks live in
:mod:`kafka_kip_reference.broker.committed_offsets`; :mod:`kafka_kip_reference.broker.apis.groups` adapts the group APIs to
this module.
"""
from __future__ import annotations

import asyncio
import dataclasses
import enum
import struct
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafka.structs import TopicPartition

from kafka_kip.protocol import constants
from kafka_kip.protocol.requests import OffsetCommitPartition as OffsetCommit  # the broker's name for it
from kafka_kip.state_machine import Transitions
from kafka_kip_reference.broker.committed_offsets import (
    DEFAULT_OFFSET_METADATA_MAX_BYTES,
    GroupOffsets,
    partition_error,
)
from kafka_kip_reference.broker.consumer_group_coordinator import ConsumerGroupCoordinator
from kafka_kip_reference.broker.consumer_groups import (
    ClassicJoin,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupError,
)
from kafka_kip_reference.broker.group_migration import CONSUMER_PROTOCOL_TYPE, downgraded_members
from kafka_kip_reference.broker.positions import PositionExchange

if TYPE_CHECKING:
    from kafka_kip_reference.broker.state import ClusterState



class GroupState(enum.Enum):
    """Kafka's classic group states (the value is Kafka's name for it)."""

    EMPTY = 'Empty'
    PREPARING_REBALANCE = 'PreparingRebalance'
    COMPLETING_REBALANCE = 'CompletingRebalance'
    STABLE = 'Stable'
    DEAD = 'Dead'


#: state -> the states it may move to (Kafka's ``ClassicGroupState`` valid previous states, read forwards).
TRANSITIONS: Transitions[GroupState] = Transitions({
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE, GroupState.DEAD},
    GroupState.PREPARING_REBALANCE: {GroupState.COMPLETING_REBALANCE, GroupState.EMPTY, GroupState.DEAD},
    GroupState.COMPLETING_REBALANCE: {GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.DEAD},
    GroupState.STABLE: {GroupState.PREPARING_REBALANCE, GroupState.DEAD},
    GroupState.DEAD: {GroupState.DEAD},
})


@dataclass(frozen=True)
class JoinParams:
    """What a JoinGroup request asks for, independent of its version."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool


@dataclass(frozen=True)
class JoinResult:
    """The answer to a JoinGroup; ``members`` ((member_id, group_instance_id, metadata)) for the leader."""

    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ''
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncResult:
    """The answer to a SyncGroup."""

    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b''


@dataclass(eq=False)
class Member:
    """A member of a group: its latest join, its assignment, and what it is waiting for."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b''
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None
    session_timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for ``protocol``."""
        return dict(self.protocols)[protocol]

    def supports(self, protocol: str) -> bool:
        """True if the member listed ``protocol`` in its last join."""
        return any(name == protocol for name, _ in self.protocols)


_INT16, _INT32 = struct.Struct('>h'), struct.Struct('>i')


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (any version: they come first); [] if it cannot be read."""
    try:
        count = _INT32.unpack_from(metadata, _INT16.size)[0]
        pos, topics = _INT16.size + _INT32.size, []
        for _ in range(count):
            length = _INT16.unpack_from(metadata, pos)[0]
            topics.append(metadata[pos + _INT16.size:pos + _INT16.size + length].decode())
            pos += _INT16.size + length
        return topics
    except (struct.error, UnicodeDecodeError):
        return []


def _resolve(waiter: asyncio.Future[Any] | None, result: Any) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(result)


class Group:
    """One classic consumer group. Every method runs on the cluster's event loop thread."""

    group_type = 'classic'  # ListGroups v5; KIP-848 groups are 'consumer' (kafka_kip_reference.broker.consumer_groups)

    def __init__(self, group_id: str, cluster: ClusterState, initial_rebalance_delay_ms: int,
                 offset_metadata_max_bytes: int = DEFAULT_OFFSET_METADATA_MAX_BYTES) -> None:
        self.group_id = group_id
        self._state = GroupState.EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.pending_members: dict[str, asyncio.TimerHandle] = {}
        self.static_members: dict[str, str] = {}
        self.pending_sync: set[str] = set()
        self.offsets = GroupOffsets(cluster, offset_metadata_max_bytes)
        #: KIP-253: the positions members need and report in heartbeats.
        self.positions = PositionExchange()
        #: Broker that coordinated the group last; a change means the group moved (see ``moved_to``).
        self.coordinator_id: int | None = None
        self._cluster = cluster
        self._initial_delay_ms = initial_rebalance_delay_ms
        self._initial_rebalance = False
        self._new_member_added = False
        self._join_timer: asyncio.TimerHandle | None = None
        self._sync_timer: asyncio.TimerHandle | None = None

    @property
    def state(self) -> GroupState:
        """Where the group is in its lifecycle; it changes only through :data:`TRANSITIONS`."""
        return self._state

    def _go(self, state: GroupState) -> None:
        self._state = TRANSITIONS.check(f'group {self.group_id!r}', self._state, state)

    # -- queries --------------------------------------------------------------------------------

    def subscribed_topics(self) -> set[str]:
        """The topics the members of a ``consumer`` group subscribe to (their ConsumerProtocolSubscription)."""
        if self.state is GroupState.EMPTY or self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return set()
        topics: set[str] = set()
        for member in self.members.values():
            metadata = member.metadata(self.protocol_name) if self.protocol_name else member.protocols[0][1]
            topics.update(subscription_topics(metadata))
        return topics

    def is_empty(self) -> bool:
        """True if the group has no members, no pending members and no committed offsets."""
        return not self.members and not self.pending_members and not self.offsets

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members (Kafka waits that long for a rebalance)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def select_protocol(self) -> str:
        """Kafka's protocol vote: each member votes for its first protocol that all members support."""
        members = list(self.members.values())
        candidates = [name for name, _ in members[0].protocols if all(m.supports(name) for m in members)]
        votes = Counter(next(name for name, _ in m.protocols if name in candidates) for m in members)
        return max(candidates, key=lambda name: votes[name])  # ties: the first member's preference

    # -- JoinGroup ------------------------------------------------------------------------------

    def join(self, params: JoinParams) -> asyncio.Future[JoinResult]:
        """Handle a JoinGroup; the future resolves when the join phase of the rebalance completes."""
        waiter: asyncio.Future[JoinResult] = self._cluster.loop.create_future()
        error = self._join_error(params)
        if error:
            waiter.set_result(JoinResult(error, params.member_id))
        elif params.member_id == '':
            self._join_unknown_member(params, waiter)
        elif params.member_id in self.pending_members:
            self._add_member(params.member_id, params, waiter)
        else:
            self._join_known_member(params, waiter)
        return waiter

    def _join_error(self, params: JoinParams) -> int:
        if self.state is GroupState.DEAD:
            return CoordinatorNotAvailableError.errno
        if self.state is GroupState.EMPTY:
            supported = bool(params.protocol_type) and bool(params.protocols)
        else:
            supported = params.protocol_type == self.protocol_type and any(
                all(m.supports(name) for m in self.members.values()) for name, _ in params.protocols)
        return constants.NONE if supported else InconsistentGroupProtocolError.errno

    def _join_unknown_member(self, params: JoinParams, waiter: asyncio.Future[JoinResult]) -> None:
        member_id = f'{params.group_instance_id or params.client_id}-{uuid.uuid4()}'
        if params.group_instance_id is not None:
            old_member_id = self.static_members.get(params.group_instance_id)
            if old_member_id is None:
                self._add_member(member_id, params, waiter)
            else:
                self._replace_static_member(params.group_instance_id, old_member_id, member_id, params,
                                            waiter)
        elif params.require_known_member_id:
            self.pending_members[member_id] = self._later(params.session_timeout_ms,
                                                          self._expire_pending_member, member_id)
            waiter.set_result(JoinResult(MemberIdRequiredError.errno, member_id))
        else:
            self._add_member(member_id, params, waiter)

    def _join_known_member(self, params: JoinParams, waiter: asyncio.Future[JoinResult]) -> None:
        error = self._member_error(params.member_id, params.group_instance_id)
        if error:
            waiter.set_result(JoinResult(error, params.member_id))
            return
        member = self.members[params.member_id]
        same = member.protocols == params.protocols
        if self.state is GroupState.PREPARING_REBALANCE:
            self._update_member(member, params, waiter)
            self._maybe_complete_join()
        elif self.state is GroupState.COMPLETING_REBALANCE and same:
            waiter.set_result(self._join_result(member.member_id))
        elif self.state is GroupState.STABLE and same and member.member_id != self.leader_id:
            waiter.set_result(self._join_result(member.member_id))
        else:  # a changed subscription, or the leader rejoining a stable group: rebalance
            self._update_member(member, params, waiter)
            self._prepare_rebalance()

    def _add_member(self, member_id: str, params: JoinParams, waiter: asyncio.Future[JoinResult]) -> None:
        timer = self.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        if self.state is GroupState.PREPARING_REBALANCE and self._initial_rebalance:
            self._new_member_added = True
        if not self.members:
            self.protocol_type = params.protocol_type
        member = Member(member_id, params.group_instance_id, params.client_id, params.session_timeout_ms,
                        params.rebalance_timeout_ms, params.protocols, join_waiter=waiter)
        self.members[member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        self._schedule_session_expiry(member)
        if self.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join()
        else:
            self._prepare_rebalance()

    def _update_member(self, member: Member, params: JoinParams, waiter: asyncio.Future[JoinResult]) -> None:
        member.protocols = params.protocols
        member.session_timeout_ms = params.session_timeout_ms
        member.rebalance_timeout_ms = params.rebalance_timeout_ms
        # A join from the same member replaces one whose client gave up (Kafka drops the old callback).
        _resolve(member.join_waiter, JoinResult(RebalanceInProgressError.errno, member.member_id))
        member.join_waiter = waiter

    def _replace_static_member(self, instance_id: str, old_member_id: str, member_id: str,
                               params: JoinParams, waiter: asyncio.Future[JoinResult]) -> None:
        """KIP-345: a known ``group.instance.id`` joins without a member id; it takes the old place."""
        old = self.members.pop(old_member_id)
        if old.session_timer is not None:
            old.session_timer.cancel()
        _resolve(old.join_waiter, JoinResult(FencedInstanceIdError.errno, old_member_id))
        _resolve(old.sync_waiter, SyncResult(FencedInstanceIdError.errno))
        member = Member(member_id, instance_id, params.client_id, params.session_timeout_ms,
                        params.rebalance_timeout_ms, params.protocols, assignment=old.assignment)
        self.members[member_id] = member
        self.static_members[instance_id] = member_id
        if self.leader_id == old_member_id:
            self.leader_id = member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(member_id)
        self._schedule_session_expiry(member)
        if self.state is GroupState.STABLE and self.select_protocol() == self.protocol_name:
            # Same protocol next generation: no rebalance; the member keeps the old assignment.
            waiter.set_result(dataclasses.replace(self._join_result(member_id),
                                                  skip_assignment=member_id == self.leader_id))
            return
        member.join_waiter = waiter
        if self.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join()
        else:
            self._prepare_rebalance()

    def _join_result(self, member_id: str) -> JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member_id == self.leader_id and self.protocol_name is not None:
            members = tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                            for m in self.members.values())
        return JoinResult(constants.NONE, member_id, self.generation_id, self.protocol_type,
                          self.protocol_name, self.leader_id or '', members)

    # -- rebalance ------------------------------------------------------------------------------

    def _prepare_rebalance(self) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:
            for member in self.members.values():
                member.assignment = b''
            self._propagate_assignment(RebalanceInProgressError.errno)
        self._cancel_timer('_sync_timer')
        self.pending_sync.clear()
        self._cancel_timer('_join_timer')
        initial = self.state is GroupState.EMPTY
        self._go(GroupState.PREPARING_REBALANCE)
        if initial:
            # A new group: give the other members time to join before the first generation.
            self._initial_rebalance = True
            self._new_member_added = False
            delay = self._initial_delay_ms
            remaining = max(self.rebalance_timeout_ms() - delay, 0)
            self._join_timer = self._later(delay, self._initial_delay_expired, delay, remaining)
        else:
            self._join_timer = self._later(self.rebalance_timeout_ms(), self._complete_join)
            self._maybe_complete_join()

    def _initial_delay_expired(self, delay: int, remaining: int) -> None:
        if self._new_member_added and remaining > 0:
            self._new_member_added = False
            next_delay = min(self._initial_delay_ms, remaining)
            self._join_timer = self._later(next_delay, self._initial_delay_expired, next_delay,
                                           max(remaining - delay, 0))
        else:
            self._complete_join()

    def _maybe_complete_join(self) -> None:
        if (self.state is GroupState.PREPARING_REBALANCE and not self._initial_rebalance
                and not self.pending_members
                and all(m.join_waiter is not None for m in self.members.values())):
            self._complete_join()

    def _complete_join(self) -> None:
        self._cancel_timer('_join_timer')
        if self.state is not GroupState.PREPARING_REBALANCE:
            return
        self._initial_rebalance = False
        for member in list(self.members.values()):
            # Dynamic members that did not rejoin leave; static ones stay until their session expires.
            if member.join_waiter is None and member.group_instance_id is None:
                self._remove_member(member)
        if self.members and not self._elect_joined_leader():
            # Only static members that did not rejoin are left: wait another round for them.
            self._join_timer = self._later(self.rebalance_timeout_ms(), self._complete_join)
            return
        self.generation_id += 1
        self.positions.new_generation()
        if not self.members:
            self.protocol_name = None
            self._go(GroupState.EMPTY)
            return
        self.protocol_name = self.select_protocol()
        self._go(GroupState.COMPLETING_REBALANCE)
        for member in self.members.values():
            waiter, member.join_waiter = member.join_waiter, None
            _resolve(waiter, self._join_result(member.member_id))
            self._schedule_session_expiry(member)
            self.pending_sync.add(member.member_id)
        self._sync_timer = self._later(self.rebalance_timeout_ms(), self._expire_pending_sync,
                                       self.generation_id)

    def _elect_joined_leader(self) -> bool:
        leader = self.members.get(self.leader_id or '')
        if leader is not None and leader.join_waiter is not None:
            return True
        joined = next((m for m in self.members.values() if m.join_waiter is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def _expire_pending_sync(self, generation_id: int) -> None:
        self._sync_timer = None
        if generation_id != self.generation_id or not self.pending_sync:
            return
        if self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            for member_id in list(self.pending_sync):
                self._remove_member(self.members[member_id])
            self._prepare_rebalance()

    def _propagate_assignment(self, error: int) -> None:
        for member in self.members.values():
            waiter, member.sync_waiter = member.sync_waiter, None
            if waiter is not None:
                _resolve(waiter, SyncResult(error, self.protocol_type, self.protocol_name, member.assignment))
                self._schedule_session_expiry(member)

    # -- SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------------

    def sync(self, member_id: str, group_instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes]) -> asyncio.Future[SyncResult]:
        """Handle a SyncGroup; the future resolves when the leader's assignment arrives."""
        waiter: asyncio.Future[SyncResult] = self._cluster.loop.create_future()
        error = self._generation_error(member_id, group_instance_id, generation_id)
        if not error and ((protocol_type is not None and protocol_type != self.protocol_type)
                          or (protocol_name is not None and protocol_name != self.protocol_name)):
            error = InconsistentGroupProtocolError.errno
        if not error and self.state is GroupState.PREPARING_REBALANCE:
            error = RebalanceInProgressError.errno
        if error:
            waiter.set_result(SyncResult(error))
            return waiter
        member = self.members[member_id]
        self.pending_sync.discard(member_id)
        if self.state is GroupState.STABLE:
            self._schedule_session_expiry(member)
            waiter.set_result(SyncResult(constants.NONE, self.protocol_type, self.protocol_name,
                                         member.assignment))
            return waiter
        _resolve(member.sync_waiter, SyncResult(RebalanceInProgressError.errno))
        member.sync_waiter = waiter
        if member_id == self.leader_id:
            for each in self.members.values():
                each.assignment = assignments.get(each.member_id, b'')
            self._propagate_assignment(constants.NONE)
            self._go(GroupState.STABLE)
        return waiter

    def heartbeat(self, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        """Handle a Heartbeat; return its error code."""
        error = self._generation_error(member_id, group_instance_id, generation_id)
        if error:
            return error
        self._schedule_session_expiry(self.members[member_id])
        if self.state is GroupState.PREPARING_REBALANCE:
            return RebalanceInProgressError.errno
        return constants.NONE

    def leave(self, identities: list[tuple[str, str | None]]) -> list[int]:
        """Handle a LeaveGroup of (member_id, group_instance_id) pairs; return one error code each."""
        errors = []
        changed = False
        for member_id, group_instance_id in identities:
            if group_instance_id is None:
                if member_id in self.pending_members:
                    self.pending_members.pop(member_id).cancel()
                    changed = True
                    errors.append(constants.NONE)
                    continue
                known = member_id if member_id in self.members else None
            else:
                known = self.static_members.get(group_instance_id)
                if known is not None and member_id not in ('', known):
                    errors.append(FencedInstanceIdError.errno)
                    continue
            if known is None:
                errors.append(UnknownMemberIdError.errno)
                continue
            self._remove_member(self.members[known])
            changed = True
            errors.append(constants.NONE)
        if changed:
            self._members_removed()
        return errors

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None,
                               generation_id: int) -> int:
        """Kafka's checks of who may commit: a member of the current generation, or anyone (generation
        -1 and no member id, a "simple" commit) while the group has no members."""
        if self.state is GroupState.DEAD:
            return CoordinatorNotAvailableError.errno
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return constants.NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self._member_error(member_id, group_instance_id)
            if error:
                return error
            if generation_id != self.generation_id:
                return IllegalGenerationError.errno
            self._schedule_session_expiry(self.members[member_id])
        elif self.state is not GroupState.EMPTY:
            return UnknownMemberIdError.errno
        if self.state is GroupState.COMPLETING_REBALANCE:
            return RebalanceInProgressError.errno
        return constants.NONE

    def _member_error(self, member_id: str, group_instance_id: str | None) -> int:
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is None:
                return UnknownMemberIdError.errno
            if known != member_id:
                return FencedInstanceIdError.errno
        if member_id not in self.members:
            return UnknownMemberIdError.errno
        return constants.NONE

    def _generation_error(self, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        if self.state is GroupState.DEAD:
            return CoordinatorNotAvailableError.errno
        error = self._member_error(member_id, group_instance_id)
        if not error and generation_id != self.generation_id:
            error = IllegalGenerationError.errno
        return error

    # -- membership timers ----------------------------------------------------------------------

    def _schedule_session_expiry(self, member: Member) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = self._later(member.session_timeout_ms, self._expire_session, member)

    def _expire_session(self, member: Member) -> None:
        if self.members.get(member.member_id) is not member:
            return
        if member.join_waiter is not None or member.sync_waiter is not None:
            # A member parked in JoinGroup/SyncGroup cannot heartbeat; the rebalance timers bound it.
            self._schedule_session_expiry(member)
            return
        self._remove_member(member)
        self._members_removed()

    def _expire_pending_member(self, member_id: str) -> None:
        if self.pending_members.pop(member_id, None) is not None:
            self._maybe_complete_join()

    def _remove_member(self, member: Member) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        _resolve(member.join_waiter, JoinResult(UnknownMemberIdError.errno, ''))
        _resolve(member.sync_waiter, SyncResult(UnknownMemberIdError.errno))
        del self.members[member.member_id]
        self.positions.forget_member(member.member_id)
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        self.pending_sync.discard(member.member_id)
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)

    def _members_removed(self) -> None:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance()
        else:
            self._maybe_complete_join()

    def load(self, generation_id: int, protocol_type: str, members: list[Member]) -> None:
        """Take ``members`` with their assignments at ``generation_id``, Stable, as a coordinator that has just
        loaded the group (or converted it from a consumer group): the first member leads."""
        self.generation_id, self.protocol_type = generation_id, protocol_type
        for member in members:
            self.members[member.member_id] = member
            if member.group_instance_id is not None:
                self.static_members[member.group_instance_id] = member.member_id
            self._schedule_session_expiry(member)
        self.leader_id = members[0].member_id if members else None
        self.protocol_name = self.select_protocol() if members else None
        self._state = GroupState.STABLE if members else GroupState.EMPTY

    def rebalance(self) -> None:
        """Start a rebalance: members learn it from their next Heartbeat (REBALANCE_IN_PROGRESS) and rejoin."""
        self._prepare_rebalance()

    def moved_to(self, broker_id: int) -> None:
        """The group's coordinator is now ``broker_id``: like a Kafka coordinator that has just loaded
        the group, give every member a fresh session timeout to find the new coordinator."""
        self.coordinator_id = broker_id
        for member in self.members.values():
            self._schedule_session_expiry(member)

    def _later(self, delay_ms: int, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        return self._cluster.loop.call_later(delay_ms / 1000, callback, *args)

    def _cancel_timer(self, name: str) -> None:
        timer = getattr(self, name)
        if timer is not None:
            timer.cancel()
            setattr(self, name, None)

    def close(self, dead: bool = False, parked_error: int = CoordinatorNotAvailableError.errno) -> None:
        """Cancel every timer and answer every parked request with ``parked_error``; with ``dead`` the group
        becomes Dead (deleted)."""
        self._cancel_timer('_join_timer')
        self._cancel_timer('_sync_timer')
        for timer in self.pending_members.values():
            timer.cancel()
        for member in self.members.values():
            if member.session_timer is not None:
                member.session_timer.cancel()
            _resolve(member.join_waiter, JoinResult(parked_error, member.member_id))
            _resolve(member.sync_waiter, SyncResult(parked_error))
        if dead:
            self._go(GroupState.DEAD)
            self.offsets.clear()


class GroupCoordinator:
    """The group coordinator of the reference cluster, shared by all its brokers: the table of groups.

    Each operation takes the id of the broker the request reached and answers NOT_COORDINATOR unless that
    broker coordinates the group (``ClusterState.coordinator_for``); the wire requests and responses are
    :mod:`kafka_kip_reference.broker.apis.groups`'s business. ``initial_rebalance_delay_ms`` is Kafka's
    ``group.initial.rebalance.delay.ms``, ``min_session_timeout_ms`` / ``max_session_timeout_ms`` are
    ``group.min/max.session.timeout.ms`` and ``offset_metadata_max_bytes`` is ``offset.metadata.max.bytes``
    (the cluster passes its broker configs). ``close()`` cancels the timers when the cluster shuts down;
    ``forget_topic()`` is called when a topic is deleted.
    """

    def __init__(self, cluster_state: ClusterState, *, initial_rebalance_delay_ms: int = 100,
                 min_session_timeout_ms: int = 6000, max_session_timeout_ms: int = 1_800_000,
                 offset_metadata_max_bytes: int = DEFAULT_OFFSET_METADATA_MAX_BYTES,
                 consumer_config: ConsumerGroupConfig | None = None) -> None:
        self._cluster = cluster_state
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.groups: dict[str, Group | ConsumerGroup] = {}  # group_type 'classic' or 'consumer' (KIP-848)
        #: ConsumerGroupHeartbeat / ConsumerGroupDescribe over the same table (``consumer_config``: group.consumer.*)
        self.consumer = ConsumerGroupCoordinator(self, cluster_state, consumer_config or ConsumerGroupConfig())

    def close(self) -> None:
        """Cancel every timer and answer every parked JoinGroup/SyncGroup."""
        for group in self.groups.values():
            group.close()

    def forget_topic(self, topic: str) -> None:
        """``topic`` was deleted: remove its committed offsets from every group, as Kafka does."""
        for group in self.groups.values():
            group.offsets.forget_topic(topic)

    # -- helpers --------------------------------------------------------------------------------

    def not_coordinator(self, group_id: str, broker_id: int) -> bool:
        """True unless ``broker_id`` coordinates ``group_id`` (a group that moved learns its new broker)."""
        if self._cluster.coordinator_for(group_id) != broker_id:
            return True
        group = self.groups.get(group_id)
        if group is not None and group.coordinator_id != broker_id:
            group.moved_to(broker_id)
        return False

    def _new_group(self, group_id: str, broker_id: int) -> Group:
        group = Group(group_id, self._cluster, self.initial_rebalance_delay_ms, self.offset_metadata_max_bytes)
        group.coordinator_id = broker_id
        self.groups[group_id] = group
        return group

    def downgrade(self, group: ConsumerGroup) -> None:
        """Kafka's online downgrade: ``group`` has only classic members left; a classic group takes them with
        their target assignments at the group epoch, keeps the offsets, and rebalances at once."""
        classic = Group(group.group_id, self._cluster, self.initial_rebalance_delay_ms, self.offset_metadata_max_bytes)
        classic.offsets, classic.coordinator_id = group.offsets, group.coordinator_id
        members = [Member(m.member_id, m.instance_id, m.client_id, m.session_timeout_ms, m.rebalance_timeout_ms,
                          m.protocols, assignment=m.assignment) for m in downgraded_members(group)]
        group.close()
        classic.load(group.group_epoch, CONSUMER_PROTOCOL_TYPE, members)
        self.groups[group.group_id] = classic
        classic.rebalance()

    def _forget_if_unused(self, group: Group) -> None:
        """Drop a group that a failed request created and that holds nothing (as Kafka does)."""
        if group.generation_id == 0 and group.is_empty() and self.groups.get(group.group_id) is group:
            group.close(dead=True)
            del self.groups[group.group_id]

    # -- membership -----------------------------------------------------------------------------

    async def join(self, group_id: str, params: JoinParams, broker_id: int) -> JoinResult:
        """JoinGroup; parks until the join phase of the rebalance completes."""
        member_id = params.member_id
        if not group_id:
            return JoinResult(InvalidGroupIdError.errno, member_id)
        if self.not_coordinator(group_id, broker_id):
            return JoinResult(NotCoordinatorError.errno, member_id)
        if not self.min_session_timeout_ms <= params.session_timeout_ms <= self.max_session_timeout_ms:
            return JoinResult(InvalidSessionTimeoutError.errno, member_id)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            if group.members:  # a classic member of a consumer group (Kafka 4.4's mixed groups)
                return self._join_consumer_group(group, params)
            offsets = group.offsets  # an empty consumer group becomes a classic group with its offsets
            group.close()
            group = self._new_group(group_id, broker_id)
            group.offsets = offsets
        if group is None:
            if member_id:
                return JoinResult(UnknownMemberIdError.errno, member_id)
            group = self._new_group(group_id, broker_id)
        result = await group.join(params)
        if result.error:
            self._forget_if_unused(group)
        return result

    @staticmethod
    def _join_consumer_group(group: ConsumerGroup, params: JoinParams) -> JoinResult:
        try:
            joined = group.classic_join(ClassicJoin(
                params.member_id, params.group_instance_id, params.protocol_type, params.protocols,
                params.session_timeout_ms, params.rebalance_timeout_ms, params.require_known_member_id,
                params.client_id))
        except ConsumerGroupError as exc:
            return JoinResult(exc.errno, params.member_id)
        if joined.error:
            return JoinResult(joined.error, joined.member_id)
        return JoinResult(constants.NONE, joined.member_id, joined.generation_id, CONSUMER_PROTOCOL_TYPE,
                          joined.protocol_name)

    async def sync(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                   protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
                   broker_id: int) -> SyncResult:
        """SyncGroup; a follower parks until the leader's assignment arrives."""
        if not group_id:
            return SyncResult(InvalidGroupIdError.errno)
        if self.not_coordinator(group_id, broker_id):
            return SyncResult(NotCoordinatorError.errno)
        group = self.groups.get(group_id)
        if group is None or (isinstance(group, ConsumerGroup) and not group.members):
            return SyncResult(UnknownMemberIdError.errno)
        if isinstance(group, ConsumerGroup):
            try:
                assignment = group.classic_sync(member_id, group_instance_id, generation_id, protocol_type,
                                                protocol_name)
            except ConsumerGroupError as exc:
                return SyncResult(exc.errno)
            return SyncResult(constants.NONE, protocol_type, protocol_name, assignment)
        return await group.sync(member_id, group_instance_id, generation_id, protocol_type, protocol_name,
                                assignments)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                  broker_id: int) -> int:
        """Heartbeat; its error code."""
        if not group_id:
            return InvalidGroupIdError.errno
        if self.not_coordinator(group_id, broker_id):
            return NotCoordinatorError.errno
        group = self.groups.get(group_id)
        if group is None:
            return UnknownMemberIdError.errno
        if isinstance(group, ConsumerGroup):
            try:
                return group.classic_heartbeat(member_id, group_instance_id, generation_id)
            except ConsumerGroupError as exc:
                return exc.errno
        return group.heartbeat(member_id, group_instance_id, generation_id)

    def exchange_positions(self, group_id: str, member_id: str, needs: list[TopicPartition],
                           reports: dict[TopicPartition, int]) -> tuple[dict[TopicPartition, int], frozenset[TopicPartition]]:
        """KIP-253, after a successful heartbeat of ``member_id``: see :meth:`PositionExchange.exchange` (a
        consumer group counts only reports of partitions the member owns: :meth:`ConsumerGroup.exchange_positions`)."""
        group = self.groups[group_id]
        if isinstance(group, ConsumerGroup):
            return group.exchange_positions(member_id, needs, reports)
        return group.positions.exchange(member_id, needs, reports)

    def coordinator_error(self, group_id: str, broker_id: int) -> int:
        """The error of a request only ``group_id``'s coordinator answers (LeaderEpochsForPartition), or NONE."""
        if not group_id:
            return InvalidGroupIdError.errno
        return NotCoordinatorError.errno if self.not_coordinator(group_id, broker_id) else constants.NONE

    def leave(self, group_id: str, identities: list[tuple[str, str | None]], broker_id: int) -> tuple[int, list[int]]:
        """LeaveGroup of ``(member_id, group_instance_id)`` pairs: (group error, one error per pair)."""
        if not group_id:
            return InvalidGroupIdError.errno, []
        if self.not_coordinator(group_id, broker_id):
            return NotCoordinatorError.errno, []
        group = self.groups.get(group_id)
        if group is None:
            return constants.NONE, [UnknownMemberIdError.errno] * len(identities)
        if isinstance(group, ConsumerGroup):
            return constants.NONE, group.classic_leave(identities)
        return constants.NONE, group.leave(identities)

    # -- offsets --------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       commits: list[OffsetCommit], broker_id: int, *, unknown_group_not_found: bool,
                       kip_232: bool) -> list[int]:
        """OffsetCommit: one error code per commit, checked as in :mod:`kafka_kip_reference.broker.committed_offsets`.

        ``unknown_group_not_found``: a generation for an unknown group is GROUP_ID_NOT_FOUND (OffsetCommit
        v9+, KIP-848) rather than ILLEGAL_GENERATION. Without ``kip_232`` the commits' partition epochs and
        timestamps are ignored, as a stock broker ignores unknown tagged fields.
        """
        group, group_error = self._commit_group(
            group_id, member_id, group_instance_id, generation_id, broker_id,
            GroupIdNotFoundError.errno if unknown_group_not_found else IllegalGenerationError.errno,
            api_version_9=unknown_group_not_found)

        def store(offsets: GroupOffsets, commit: OffsetCommit) -> int:
            extension = (commit.partition_epoch, commit.commit_timestamp) if kip_232 else ()
            return offsets.commit(commit.topic, commit.partition, commit.offset, commit.leader_epoch, commit.metadata,
                                  *extension)

        return self._commit_each(group_id, broker_id, group, group_error, commits, store)

    def commit_transactional_offsets(self, group_id: str, producer_id: int, member_id: str,
                                     group_instance_id: str | None, generation_id: int, commits: list[OffsetCommit],
                                     broker_id: int) -> list[int]:
        """TxnOffsetCommit: one error code per commit; the offsets wait for the producer's transaction."""
        if not group_id:
            group, group_error = None, InvalidGroupIdError.errno
        else:
            group, group_error = self._commit_group(group_id, member_id, group_instance_id, generation_id, broker_id,
                                                    IllegalGenerationError.errno, transactional=True)

        def store(offsets: GroupOffsets, commit: OffsetCommit) -> int:
            return offsets.commit_transactional(producer_id, commit.topic, commit.partition, commit.offset,
                                                commit.leader_epoch, commit.metadata, commit.commit_timestamp)

        return self._commit_each(group_id, broker_id, group, group_error, commits, store)

    def _commit_group(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                      broker_id: int, unknown_group_error: int, *, api_version_9: bool = False,
                      transactional: bool = False) -> tuple[Group | ConsumerGroup | None, int]:
        """The group a commit goes to (None: none yet) and the error every partition of the commit gets;
        ``unknown_group_error`` when a generation is given for a group that does not exist. A consumer group
        checks member epochs (``api_version_9``: OffsetCommit v9+, which KIP-848 members must use)."""
        if self.not_coordinator(group_id, broker_id):
            return None, NotCoordinatorError.errno
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return group, group.validate_offset_commit(member_id, group_instance_id, generation_id,
                                                       api_version_9, transactional)
        if group is not None:
            return group, group.validate_offset_commit(member_id, group_instance_id, generation_id)
        return None, unknown_group_error if generation_id >= 0 else constants.NONE

    def _commit_each(self, group_id: str, broker_id: int, group: Group | ConsumerGroup | None, group_error: int,
                     commits: list[OffsetCommit], store: Callable[[GroupOffsets, OffsetCommit], int]) -> list[int]:
        """One error code per commit: its partition's, else ``group_error``, else what ``store`` answers."""
        errors = []
        for commit in commits:
            # Kafka's API layer rejects unknown partitions before the coordinator sees the commit.
            error = partition_error(self._cluster, commit.topic, commit.partition) or group_error
            if not error:
                if group is None:
                    group = self._new_group(group_id, broker_id)  # a simple (group-less) consumer's commit
                error = store(group.offsets, commit)
            errors.append(error)
        return errors

    def complete_transaction(self, group_id: str, producer_id: int, commit: bool) -> None:
        """The transaction of ``producer_id`` ended: its offsets for ``group_id`` are committed or dropped."""
        group = self.groups.get(group_id)
        if group is not None:
            group.offsets.complete_transaction(producer_id, commit)

    def committed(self, group_id: str, broker_id: int, member_id: str | None = None,
                  member_epoch: int = -1) -> tuple[int, GroupOffsets | None]:
        """OffsetFetch of one group: (group error, its offsets or None for an unknown group). A consumer group
        checks ``member_id`` / ``member_epoch`` (OffsetFetch v9+; None / -1 from an admin)."""
        if self.not_coordinator(group_id, broker_id):
            return NotCoordinatorError.errno, None
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            error = group.validate_offset_fetch(member_id, member_epoch)
            if error:
                return error, None
        return constants.NONE, group.offsets if group is not None else None

    # -- DescribeGroups / ListGroups / DeleteGroups ---------------------------------------------

    def describe(self, group_id: str, broker_id: int) -> tuple[int, Group | None]:
        """DescribeGroups of one group: (error, the group or None)."""
        if self.not_coordinator(group_id, broker_id):
            return NotCoordinatorError.errno, None
        return constants.NONE, self.groups.get(group_id)

    def coordinated_by(self, broker_id: int) -> list[Group]:
        """The groups ``broker_id`` coordinates, by group id (ListGroups)."""
        return [group for group_id, group in sorted(self.groups.items())
                if self._cluster.coordinator_for(group_id) == broker_id]

    def delete_offsets(self, group_id: str, broker_id: int, partitions: list[TopicPartition]
                       ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete of one group: (group error, partition -> error). As Kafka's classic groups: a group with
        members of another protocol type than ``consumer`` answers NON_EMPTY_GROUP; a topic its members subscribe
        to keeps its offsets (GROUP_SUBSCRIBED_TO_TOPIC); the other partitions' offsets are deleted."""
        group = self.groups.get(group_id)
        if self.not_coordinator(group_id, broker_id):
            return NotCoordinatorError.errno, {}
        if group is None:
            return GroupIdNotFoundError.errno, {}
        if group.state is not GroupState.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return NonEmptyGroupError.errno, {}
        subscribed = group.subscribed_topics()
        errors = {}
        for tp in partitions:
            if tp.topic in subscribed:
                errors[tp] = GroupSubscribedToTopicError.errno
            else:
                group.offsets.delete(tp.topic, tp.partition)
                errors[tp] = constants.NONE
        self._forget_if_unused(group)
        return constants.NONE, errors

    def delete(self, group_id: str, broker_id: int) -> int:
        """DeleteGroups of one group: only a group without members can be deleted (with its offsets)."""
        group = self.groups.get(group_id)
        if self.not_coordinator(group_id, broker_id):
            return NotCoordinatorError.errno
        if group is None:
            return GroupIdNotFoundError.errno
        if group.state.value != GroupState.EMPTY.value:  # classic and consumer groups both name it 'Empty'
            return NonEmptyGroupError.errno
        group.close(dead=True)
        del self.groups[group_id]
        return constants.NONE
