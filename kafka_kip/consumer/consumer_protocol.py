"""The group coordinator client of ``group_protocol='consumer'`` (KIP-848), as Java's ``ConsumerMembershipManager``
and ``ConsumerHeartbeatRequestManager`` do it.

kafka_kip's classic :class:`~kafka_kip.consumer.coordinator.ConsumerCoordinator` with its group membership
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup) replaced by ConsumerGroupHeartbeat; what it keeps is everything
about offsets: commits and committed offsets with their epochs (KIP-320, KIP-232) and KIP-1327's start of new
partitions. The member's states and reconciliation plans are :mod:`kafka_kip.consumer.membership`'s; this module
sends and carries them out:

- a background task heartbeats at the interval the coordinator dictates (at once to join, acknowledge or
  leave), with the subscription (topic names, or ``subscribe(pattern=)``'s regex for the broker to evaluate),
  ``group_remote_assignor``, ``client_rack``, ``max_poll_interval_ms`` as rebalance timeout and the owned partitions;
- ``poll()`` carries out reconciliations in the caller's thread, as Java calls the listeners inside ``poll()``:
  revoked partitions stop being fetched, consumed offsets are committed (auto-commit), ``on_partitions_revoked``
  runs, the new assignment takes effect (new partitions are fetched once their positions are known: committed
  offset, else the reset policies) and ``on_partitions_assigned`` runs; the next heartbeat acknowledges it;
- fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) or stale (``poll()`` late): ``on_partitions_lost``, then
  rejoin at epoch 0 with the same member id; fatal errors (UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, ...) are
  raised by ``poll()``;
- commits use OffsetCommit v9+ with the member id and member epoch, committed offsets are read with OffsetFetch
  v9+ with them (STALE_MEMBER_EPOCH retried with the new epoch);
- ``close()`` and ``unsubscribe()`` leave with epoch -1 (a static member, ``group_instance_id``: -2, keeping its
  partitions for the session timeout).

KIP-253's expansion order applies as in classic groups: with a coordinator advertising ``kip.253``, every heartbeat
that stays in the group carries this member's needs and reports as ConsumerGroupHeartbeat's tagged fields, and
its answer the group's positions and needs (docs/PROTOCOL.md, "KIP-253 in consumer groups").
"""
from __future__ import annotations

import logging
import time
from typing import Any

import kafka.errors as Errors
import kafka.protocol.consumer as _stock_messages
from kafka.coordinator.base import Generation
from kafka.structs import TopicPartition
from kafka.util import Timer

from kafka_kip.consumer.coordinator import ConsumerCoordinator
from kafka_kip.consumer.group_protocol import CONSUMER
from kafka_kip.consumer.membership import (
    ErrorAction,
    HeartbeatFields,
    Membership,
    MemberState,
    Reconciliation,
    carry_out,
)
from kafka_kip.protocol.messages import ConsumerGroupHeartbeatRequest
from kafka_kip.protocol.requests import exchanged_positions, position_fields

log = logging.getLogger(__name__)

#: OffsetCommit and OffsetFetch versions that carry a member epoch (KIP-848): a consumer-protocol member must use them.
MEMBER_EPOCH_VERSION = 9
#: ConsumerGroupHeartbeat version that carries SubscribedTopicRegex.
REGEX_HEARTBEAT_VERSION = 1
_StockFetchRequest = _stock_messages.OffsetFetchRequest
_HeartbeatTopic = ConsumerGroupHeartbeatRequest.TopicPartitions


class StaleMemberEpochError(Errors.StaleMemberEpochError, Errors.RetriableError):
    """A commit or an offset fetch carried an epoch the heartbeat has since replaced: retried with the new one."""


class ConsumerProtocolCoordinator(ConsumerCoordinator):
    """The coordinator client of a ``group_protocol='consumer'`` member (see the module docstring)."""

    DEFAULT_CONFIG = dict(ConsumerCoordinator.DEFAULT_CONFIG, group_protocol=CONSUMER, group_remote_assignor=None,
                          client_rack='')
    min_commit_version = MEMBER_EPOCH_VERSION

    def __init__(self, client: Any, subscription: Any, **configs: Any) -> None:
        super().__init__(client, subscription, **configs)
        self.membership = Membership(self.group_instance_id)
        self._manager.extend(_StockFetchRequest, self._fetch_with_member)
        self._next_heartbeat = 0.0  # time.monotonic() of the next regular heartbeat

    # -- the caller's side: poll(), reconciliation, listeners ---------------------------------------------

    def poll(self, timeout_ms: int | None = None) -> bool:
        """Find the coordinator, join (or rejoin), carry out a due reconciliation and auto-commit; raises the
        membership's fatal error. False if the coordinator was not found in time."""
        if self.group_id is None:
            return True
        timer = Timer(timeout_ms)
        self._invoke_completed_offset_commit_callbacks()
        self._raise_if_fatal()
        if not self.ensure_coordinator_ready(timeout_ms=timer.timeout_ms):
            return False
        if self._subscription.partitions_auto_assigned():
            self.heartbeat.poll()
            self._net.run(self._advance_membership_async)
            self._raise_if_fatal()
        self._keep_expansion_order()
        self._maybe_auto_commit_offsets_async()
        return True

    def _raise_if_fatal(self) -> None:
        if self.membership.state is MemberState.FATAL:
            raise self.membership.fatal_error  # type: ignore[misc]

    async def _advance_membership_async(self) -> None:
        membership = self.membership
        if membership.state in (MemberState.FENCED, MemberState.STALE):
            try:
                await self._give_up_lost_async(membership.lost())
            finally:  # a listener that raised has been called: rejoin all the same, poll() raises its error
                membership.rejoin()
                self._heartbeat_wakeup.notify()
        elif membership.state is MemberState.UNSUBSCRIBED and self._subscription.subscription is not None:
            log.info('Joining consumer group %s as member %s (group_protocol=consumer)', self.group_id,
                     membership.member_id)
            membership.join()
        self._maybe_start_heartbeat_loop()
        self._heartbeat_wakeup.notify()
        plan = membership.reconciliation(self._cluster.topic_name_for_id)
        if plan is not None:
            await self._reconcile_async(plan)
        elif membership.unresolved_topics():
            self._cluster.request_update()  # a topic id of the target assignment has no name yet

    async def _reconcile_async(self, plan: Reconciliation) -> None:
        """Carry out ``plan`` (:func:`~kafka_kip.consumer.membership.carry_out`), then acknowledge it."""
        log.info('Reconciling the assignment of member %s of group %s at epoch %d: revoking %s, adding %s',
                 self.membership.member_id, self.group_id, plan.member_epoch, sorted(plan.revoked), sorted(plan.added))
        listener_error = await carry_out(plan, self, auto_commit=self.config['enable_auto_commit'])
        if self.membership.reconciled(plan):
            self.next_auto_commit_deadline = time.monotonic() + self.auto_commit_interval
        self._heartbeat_wakeup.notify()
        if listener_error is not None:
            raise Errors.KafkaError('User rebalance callback throws an error') from listener_error

    # The steps of carry_out (ReconciliationSteps).

    def stop_fetching(self, partitions: frozenset[TopicPartition]) -> None:
        self._subscription.mark_pending_revocation(partitions)

    async def commit_consumed(self) -> None:
        try:
            await self._commit_offsets_sync_async(self._subscription.all_consumed_offsets(),
                                                  timeout_ms=self.config['request_timeout_ms'])
        except Errors.KafkaError as exc:
            log.warning('Offset commit before revoking partitions of group %s failed: %s. This is likely to cause '
                        'duplicate message delivery.', self.group_id, exc)

    def assign(self, partitions: frozenset[TopicPartition]) -> None:
        subscribed = self._subscription.subscription or set()
        if self._subscription.subscribed_pattern and not {tp.topic for tp in partitions} <= subscribed:
            # the broker evaluated the regex; the metadata may not have shown these topics yet
            self._subscription.change_subscription(sorted(subscribed | {tp.topic for tp in partitions}))
        self._subscription.assign_from_subscribed(sorted(partitions))

    async def _give_up_lost_async(self, lost: frozenset[TopicPartition]) -> None:
        """A fenced or stale member's partitions: ``on_partitions_lost``, then owned no more (no commit: another
        member may own them already)."""
        self._generation = Generation.NO_GENERATION
        self.expansion_order.new_generation()  # the coordinator dropped this member's needs and reports
        if lost:
            log.warning('Member %s of group %s lost its partitions %s; rejoining', self.membership.member_id,
                        self.group_id, sorted(lost))
            self._subscription.mark_pending_revocation(lost)
        listener_error = await self.call_listener('on_partitions_lost', lost) if lost else None
        self._subscription.assign_from_subscribed([])
        if listener_error is not None:
            raise Errors.KafkaError('User rebalance callback throws an error') from listener_error

    async def call_listener(self, method: str, partitions: frozenset[TopicPartition]) -> Exception | None:
        """Call the rebalance listener's ``method``; what it raised (logged), to be raised once the step is done."""
        if not self._subscription.rebalance_listener:
            return None
        try:
            await self._invoke_rebalance_listener_async(method, set(partitions))
        except Exception as exc:  # the user's code: raised after the reconciliation step completed, as in Java
            log.exception('User provided rebalance listener %s for group %s failed %s',
                          self._subscription.rebalance_listener, self.group_id, method)
            return exc
        return None

    def time_to_next_heartbeat(self) -> float:
        """Seconds until poll() has membership work: soon while a reconciliation or rejoin may be due."""
        if self.membership.state is MemberState.STABLE:
            return max(0.0, self._next_heartbeat - time.monotonic())
        return self.config['retry_backoff_ms'] / 1000

    def need_rejoin(self) -> bool:
        return False  # membership changes come through heartbeats, never through a JoinGroup

    def heartbeat_interval_ms(self) -> int:
        """The interval the coordinator dictates (the client's default until its first answer)."""
        return self.membership.heartbeat_interval_ms or self.config['heartbeat_interval_ms']

    def rebalance_in_progress(self) -> bool:
        return self.membership.state in (MemberState.JOINING, MemberState.FENCED, MemberState.STALE)

    def generation_if_stable(self) -> Generation | None:
        """The member epoch and id commits carry (as kafka-python's generation), or None outside the group."""
        membership = self.membership
        if not membership.in_group or membership.member_epoch <= 0:
            return None
        return Generation(membership.member_epoch, membership.member_id, CONSUMER)

    # -- the heartbeat task --------------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while not self._heartbeat_closed:
            membership = self.membership
            if not membership.in_group:
                await self._heartbeat_wakeup()
            elif self.coordinator_unknown():
                try:
                    await self.lookup_coordinator()
                except Errors.KafkaError:
                    await self._heartbeat_wakeup(self.config['retry_backoff_ms'] / 1000)
            elif self.heartbeat.poll_timeout_expired():
                log.warning('poll() was not called within max_poll_interval_ms (%d ms): member %s leaves group %s '
                            'and rejoins at the next poll()', self.config['max_poll_interval_ms'],
                            membership.member_id, self.group_id)
                membership.went_stale()
                await self._send_leave_async(membership.leave_epoch, self.config['request_timeout_ms'])
            else:
                delay = 0.0 if membership.wants_heartbeat_now else self._next_heartbeat - time.monotonic()
                if delay > 0:
                    await self._heartbeat_wakeup(delay)
                else:
                    await self._heartbeat_once_async()

    def _heartbeat_request(self, fields: HeartbeatFields, exchanges_positions: bool) -> Any:
        pattern = self._subscription.subscribed_pattern
        positions = (position_fields(ConsumerGroupHeartbeatRequest, self.position_needs(),
                                     self.expansion_order.reports()) if exchanges_positions else {})
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=fields.member_id, member_epoch=fields.member_epoch,
            instance_id=fields.instance_id, rack_id=self.config['client_rack'] or None,
            rebalance_timeout_ms=self.config['max_poll_interval_ms'],
            subscribed_topic_names=None if pattern else sorted(self._subscription.subscription or ()),
            subscribed_topic_regex=pattern.pattern if pattern else None,
            server_assignor=self.config['group_remote_assignor'],
            topic_partitions=[_HeartbeatTopic(topic_id=topic_id, partitions=sorted(partitions))
                              for topic_id, partitions in sorted(fields.owned.items(), key=lambda item: str(item[0]))],
            **positions, min_version=REGEX_HEARTBEAT_VERSION if pattern else 0)

    async def _heartbeat_once_async(self) -> None:
        membership = self.membership
        fields = membership.heartbeat()
        node_id = self.coordinator_id
        backoff = time.monotonic() + self.config['retry_backoff_ms'] / 1000
        self._next_heartbeat = backoff
        exchanges_positions = self.exchanges_positions(node_id)
        try:
            response = await self._manager.send(self._heartbeat_request(fields, exchanges_positions), node_id=node_id)
        except Errors.KafkaError as exc:
            log.debug('ConsumerGroupHeartbeat of group %s to %s failed: %s', self.group_id, node_id, exc)
            if isinstance(exc, Errors.UnsupportedVersionError):
                membership.on_error(exc.errno, exc)
            else:
                self.coordinator_dead(exc)
            return
        if response.error_code == 0:
            assignment = None
            if response.assignment is not None:
                assignment = {tp.topic_id: frozenset(tp.partitions) for tp in response.assignment.topic_partitions}
            membership.on_response(fields, response.member_id, response.member_epoch,
                                   response.heartbeat_interval_ms, assignment)
            if membership.in_group:
                self._generation = Generation(membership.member_epoch, membership.member_id, CONSUMER)
                if exchanges_positions:
                    self.expansion_order.heard(*exchanged_positions(response))
            self._next_heartbeat = time.monotonic() + response.heartbeat_interval_ms / 1000
            return
        error = Errors.for_code(response.error_code)(response.error_message or '')
        action = membership.on_error(response.error_code, error)
        if action is ErrorAction.FIND_COORDINATOR:
            self.coordinator_dead(error)
        elif action is ErrorAction.FENCE:
            self._generation = Generation.NO_GENERATION
            log.warning('Member %s of group %s was fenced at epoch %d (%s): it gives up its partitions and rejoins',
                        membership.member_id, self.group_id, fields.member_epoch, error)
            self._next_heartbeat = 0.0
        elif action is ErrorAction.FATAL:
            log.error('ConsumerGroupHeartbeat of member %s (instance id %s) of group %s failed: %s',
                      membership.member_id, membership.instance_id, self.group_id, error)

    # -- leaving -------------------------------------------------------------------------------------------

    async def maybe_leave_group_async(self, reason: str | None = None, timeout_ms: int | None = None) -> None:
        """Leave the group (close, unsubscribe): a heartbeat with epoch -1, or -2 for a static member."""
        membership = self.membership
        if membership.prepare_leaving():
            membership.leave()
            log.info('Member %s leaves consumer group %s (epoch %d)', membership.member_id, self.group_id,
                     membership.member_epoch)
            await self._send_leave_async(membership.member_epoch, timeout_ms)
            membership.left()
        self._generation = Generation.NO_GENERATION

    async def _send_leave_async(self, epoch: int, timeout_ms: int | None) -> None:
        """One leave heartbeat, minimal effort (as Java): errors and timeouts are logged, not retried."""
        if self.coordinator_unknown():
            return
        membership = self.membership
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=membership.member_id, member_epoch=epoch,
            instance_id=membership.instance_id, rack_id=None, rebalance_timeout_ms=-1, subscribed_topic_names=None,
            subscribed_topic_regex=None, server_assignor=None, topic_partitions=None)
        try:
            response = await self._manager.wait_for(self._manager.send(request, node_id=self.coordinator_id),
                                                    timeout_ms)
        except Errors.KafkaError as exc:
            log.warning('Leave heartbeat of member %s of group %s failed: %s', membership.member_id, self.group_id, exc)
            return
        if response.error_code:
            log.warning('Leave heartbeat of member %s of group %s failed: %s', membership.member_id, self.group_id,
                        Errors.for_code(response.error_code).__name__)

    # -- offsets with the member epoch -----------------------------------------------------------------------

    def _fetch_with_member(self, request: Any, node_id: Any) -> Any:
        """An OffsetFetch at v9+ with the member id and epoch (validated by the coordinator), when the member has
        an epoch; otherwise unchanged."""
        generation = self.generation_if_stable()
        if generation is None or request.groups is None:
            return request
        group_class = _StockFetchRequest.OffsetFetchRequestGroup
        groups = [group_class(group_id=group.group_id, member_id=generation.member_id,
                              member_epoch=generation.generation_id, topics=group.topics) for group in request.groups]
        return _StockFetchRequest(groups=groups, require_stable=request.require_stable,
                                  min_version=MEMBER_EPOCH_VERSION, max_version=MEMBER_EPOCH_VERSION)

    def _handle_offset_fetch_response(self, response: Any) -> Any:
        if response.API_VERSION >= MEMBER_EPOCH_VERSION and response.groups[0].error_code == StaleMemberEpochError.errno:
            raise StaleMemberEpochError(f'OffsetFetch of group {self.group_id}')
        return super()._handle_offset_fetch_response(response)

    def _handle_offset_commit_response(self, offsets: dict, send_time: float, response: Any) -> None:
        stale = [TopicPartition(topic, partition) for topic, partitions in response.topics
                 for partition, code in partitions if code == StaleMemberEpochError.errno]
        if stale:
            raise StaleMemberEpochError(f'OffsetCommit of group {self.group_id}: {sorted(stale)}')
        super()._handle_offset_commit_response(offsets, send_time, response)

