"""The group coordinator client: kafka-python's, with epochs and timestamps on commits (KIP-320, KIP-232).

- Commits carry the leader epoch of the last consumed record (kafka-python already sends it) and, where
  the coordinator advertises ``kip.232``, the record's timestamp (``commit_timestamp``) and the position's
  partition epoch (``partition_epoch``) as extension tagged fields. Elsewhere both are kept in memory for
  the offsets this consumer committed.
- Committed offsets come back as :class:`kafka_kip.OffsetAndMetadata` with those fields, and a partition
  positioned from its committed offset keeps the commit's epochs: it is validated (and, with a partition
  epoch, held until metadata caught up) before anything is fetched.
- KIP-253, where the coordinator advertises ``kip.253`` (:mod:`kafka_kip.consumer.expansion`): the expansions
  of the assigned topics are learned before positions are set, and heartbeats carry the positions the group
  needs and ask for the ones this consumer waits for.
- KIP-1327, on every broker: a partition the group gained after it knew its topic and that has no committed
  offset starts where ``auto_offset_reset_new_partitions`` says (:mod:`kafka_kip.consumer.new_partitions`).
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any

import kafka.coordinator.base as _stock_base
import kafka.coordinator.consumer as _stock
import kafka.errors as Errors
import kafka.protocol.consumer as _stock_messages
from kafka.structs import TopicPartition
from kafka.util import Timer

from kafka_kip._patch.rebind import require_names
from kafka_kip.consumer.expansion import ExpansionOrder
from kafka_kip.consumer.expansion_learning import learn_topic
from kafka_kip.consumer.new_partitions import counted, new_partitions
from kafka_kip.consumer.reset import new_partition_policy
from kafka_kip.errors import InvalidLeaderEpochError, InvalidPartitionEpochError
from kafka_kip.protocol import requests
from kafka_kip.protocol.features import KIP_232, KIP_253, broker_features, supports
from kafka_kip.protocol.requests import OffsetCommitPartition
from kafka_kip.structs import OffsetAndMetadata

log = logging.getLogger(__name__)

_StockCommitRequest = _stock_messages.OffsetCommitRequest
_StockHeartbeatRequest = _stock_messages.HeartbeatRequest
# ConsumerCoordinator.need_rejoin / join_group_async: a join in flight (or completed unawaited) is completed.
require_names(_stock_base.BaseCoordinator.join_group_async, {'_join_task', 'is_done', 'call_soon', 'wait_for'},
              'to keep a join in flight across poll() calls in _join_task (and start another once it is done)')


class _RequestExtender:
    """The connection manager as the coordinator sees it: ``send`` first passes an OffsetCommitRequest or a
    HeartbeatRequest through its extender; every other attribute is the manager's own.

    kafka-python builds these requests inline (``ConsumerCoordinator._send_offset_commit_request``, together
    with the group generation checks; ``BaseCoordinator._send_heartbeat_request``) and hands them straight to
    ``self._manager.send``; this is the one point between the two where the extension fields can be added
    without repeating those methods.
    """

    def __init__(self, manager: Any, extenders: dict[type, Any]) -> None:
        self._target = manager
        self._extenders = extenders

    def extend(self, request_type: type, extender: Any) -> None:
        """Pass each request of ``request_type`` through ``extender(request, node_id)`` before sending it."""
        self._extenders[request_type] = extender

    def send(self, request: Any, node_id: Any = None, **kwargs: Any) -> Any:
        extend = self._extenders.get(type(request))
        if extend is not None:
            request = extend(request, node_id)
        return self._target.send(request, node_id=node_id, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class ConsumerCoordinator(_stock.ConsumerCoordinator):
    """kafka-python's ``ConsumerCoordinator`` whose commits and committed offsets carry epochs/timestamps, and
    which learns expansions and exchanges positions for KIP-253 (``expansion_ordering``, default True)."""

    DEFAULT_CONFIG = dict(_stock.ConsumerCoordinator.DEFAULT_CONFIG, expansion_ordering=True)

    def __init__(self, client: Any, subscription: Any, **configs: Any) -> None:
        super().__init__(client, subscription, **configs)
        self._manager = _RequestExtender(self._manager, {_StockCommitRequest: self._with_extension_fields,
                                                         _StockHeartbeatRequest: self._with_positions})
        self._committing: dict[TopicPartition, Any] = {}   # offsets of commits being sent, by partition
        self._committed: dict[TopicPartition, Any] = {}    # the last offset this consumer committed
        #: KIP-253 state shared with the fetcher (:mod:`kafka_kip.consumer.expansion`)
        self.expansion_order = ExpansionOrder()
        self._learning: Any = None        # the learning task in flight
        self._committed_check: Any = None  # the committed-offsets check of needed partitions in flight
        self._unordered_counts: dict[str, int] = {}  # partition counts seen while the coordinator lacks kip.253
        #: KIP-1327: topic -> partitions this member held in its assignments (highest + 1)
        self._held_counts: dict[str, int] = {}

    async def _send_offset_commit_request(self, offsets: dict) -> Any:
        self._committing.update(offsets)
        await self._coordinator_connection_ready()
        result = await super()._send_offset_commit_request(offsets)
        self._committed.update(offsets)
        return result

    async def ensure_active_group_async(self, timeout_ms: float | None = None) -> bool:
        """kafka-python's join, once the metadata knows the partitions of every topic this member subscribed to.

        kafka-python (like Java) refreshes metadata before joining only for a pattern subscription: a member
        of an explicit subscription that joins first makes the leader assign nothing of a topic it has no
        partitions of, and only a second rebalance, after the metadata arrived, assigns them.
        """
        timer = Timer(timeout_ms)
        if self._subscription.partitions_auto_assigned() and any(
                self._cluster.partitions_for_topic(topic) is None for topic in self._subscription.subscription or ()):
            try:
                await self._manager.wait_for(self._cluster.request_update(), timer.timeout_ms)
            except Errors.KafkaError:  # timed out, or the refresh failed: the next poll tries again
                return False
        return await super().ensure_active_group_async(timeout_ms=timer.timeout_ms)

    def need_rejoin(self) -> bool:
        """kafka-python's answer, or True while a join is under way (Java's ``rejoinNeededOrPending``).

        A leader that rejoins because the metadata changed (a partition expansion) no longer needs to by
        kafka-python's test once it performed the assignment: a poll() that timed out after that point left
        the join unfinished for good (no assignment, no heartbeats, the member expelled at session timeout).
        """
        if self._join_task is not None and self._subscription.partitions_auto_assigned():
            return True
        return super().need_rejoin()

    async def join_group_async(self, timeout_ms: float | None = None) -> bool:
        """kafka-python's join, which also completes a join that succeeded after the last poll() timed out.

        kafka-python keeps the join in flight when poll() times out (``_join_task``) and awaits it on the next
        poll, but if it finished meanwhile, it drops its result and sends another JoinGroup: from the leader of
        a stable group, a second rebalance; from a member whose polls are shorter than a join (a loaded
        machine), join after join. Like Java's consumer, this member takes the finished join's assignment:
        kafka-python awaits a task that hands over that result.
        """
        finished = self._join_task
        if finished is not None and finished.succeeded():
            self._join_task = self._manager.call_soon(_result_of, finished)
        return await super().join_group_async(timeout_ms=timeout_ms)

    async def _coordinator_connection_ready(self) -> None:
        """Wait until the coordinator's connection is up: whether the commit may carry the extension fields
        depends on the features its ApiVersionsResponse advertised (a first request on a new connection would
        otherwise be built before they are known, and go out without them)."""
        node_id = self.coordinator()
        if node_id is None:
            return
        try:
            await self._manager.get_connection(node_id)
        except Errors.KafkaError:
            pass  # kafka-python's own send, next, fails the same way and reports it

    def _handle_offset_commit_response(self, offsets: dict, send_time: float, response: Any) -> None:
        # The two extension codes a KIP-232 commit can get are raised here, naming the partitions
        # (kafka-python raises the first partition error it meets, and knows neither code).
        invalid = _partitions_with(response, InvalidPartitionEpochError.errno)
        if invalid:
            raise InvalidPartitionEpochError({tp: getattr(offsets[tp], 'partition_epoch', -1) for tp in invalid})
        stale = _partitions_with(response, InvalidLeaderEpochError.errno)
        if stale:
            raise InvalidLeaderEpochError(
                'Commit refused: the leader epoch of the offset is older than the one committed before for '
                + ', '.join(f'{tp.topic}-{tp.partition} (leader epoch {offsets[tp].leader_epoch})'
                            for tp in sorted(stale)))
        super()._handle_offset_commit_response(offsets, send_time, response)

    #: The first OffsetCommit version this coordinator's commits may use (None: kafka-python's choice).
    min_commit_version: int | None = None

    def _with_extension_fields(self, request: Any, node_id: Any) -> Any:
        """``request`` as the patched OffsetCommitRequest with commit_timestamp / partition_epoch, if the
        coordinator advertises kip.232, at ``min_commit_version`` or later; otherwise unchanged."""
        extended = supports(self._client, node_id, KIP_232)
        if not extended and self.min_commit_version is None:
            return request
        entries = [OffsetCommitPartition(topic.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                         p.committed_metadata) for topic in request.topics for p in topic.partitions]
        min_version = max(request._min_version or 0, self.min_commit_version or 0)
        if extended:
            entries = [self._with_extensions(entry) for entry in entries]
            min_version = max(min_version, requests.FIRST_FLEXIBLE_COMMIT_VERSION)
        return requests.offset_commit(
            request.group_id, entries, generation=request.generation_id_or_member_epoch,
            member_id=request.member_id, group_instance_id=request.group_instance_id,
            retention_time_ms=request.retention_time_ms, min_version=min_version,
            max_version=max(request._max_version or min_version, min_version))

    def _with_extensions(self, entry: OffsetCommitPartition) -> OffsetCommitPartition:
        """``entry`` with the timestamp and partition epoch of this consumer's commit of the same offset."""
        committing = self._committing.get(TopicPartition(entry.topic, entry.partition))
        if committing is None or committing.offset != entry.offset:
            return entry
        return dataclasses.replace(entry, commit_timestamp=getattr(committing, 'timestamp', -1),
                                   partition_epoch=getattr(committing, 'partition_epoch', -1))

    def _handle_offset_fetch_response(self, response: Any) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets as :class:`kafka_kip.OffsetAndMetadata` with timestamp and partition epoch.

        Each field comes from the response (the extension fields for timestamp and partition epoch), else,
        when this consumer committed the same offset itself, from that commit (a broker without kip.232,
        or one that does not keep leader epochs), else it is -1.
        """
        offsets = super()._handle_offset_fetch_response(response)
        fields = _extension_fields_by_partition(response)
        result = {}
        for tp, committed in offsets.items():
            leader_epoch = -1 if committed.leader_epoch is None else committed.leader_epoch
            timestamp, partition_epoch = fields.get(tp, (-1, -1))
            own = self._committed.get(tp)
            if own is not None and own.offset == committed.offset:
                leader_epoch = _known(leader_epoch, own.leader_epoch)
                timestamp = _known(timestamp, getattr(own, 'timestamp', -1))
                partition_epoch = _known(partition_epoch, getattr(own, 'partition_epoch', -1))
            result[tp] = OffsetAndMetadata(committed.offset, committed.metadata, leader_epoch,
                                           timestamp=timestamp, partition_epoch=partition_epoch)
        return result

    async def refresh_committed_offsets_if_needed_async(self, timeout_ms: int | None = None) -> bool:
        """Position partitions that have none at their committed offsets, keeping the commits' epochs.

        (kafka-python seeks to the bare offset, which drops the leader epoch and so any KIP-320 validation
        of a committed position.) KIP-253: the topics' expansions are learned first. KIP-1327: in a group
        (``subscribe()``), the committed offsets are read for every partition of the topics, and a partition
        without one that the group gained after it knew its topic is marked for ``auto_offset_reset_new_partitions``
        (:mod:`kafka_kip.consumer.new_partitions`).
        """
        partitions = self._subscription.missing_fetch_positions()
        order = self.expansion_order
        if partitions and order.active and not await self._learn_async({tp.topic for tp in partitions}):
            return False
        in_group = self._subscription.partitions_auto_assigned()
        asked = self._all_partitions_of(partitions) if partitions and in_group else partitions
        try:
            committed = await self.fetch_committed_offsets_async(asked, timeout_ms=timeout_ms)
        except Errors.KafkaTimeoutError:
            return False
        read_for_kip1327_only = asked - partitions
        for tp, offset in committed.items():
            if tp not in read_for_kip1327_only and self._subscription.is_assigned(tp):
                self._subscription.seek_committed(tp, offset)
        if in_group:
            self._mark_created_after_group(partitions - set(committed), committed)
            self._held_counts = counted(self._held_counts, self._subscription.assigned_partitions())
        return True

    def _all_partitions_of(self, partitions: set[TopicPartition]) -> set[TopicPartition]:
        """``partitions`` and every other partition of their topics the metadata knows."""
        cluster = self._client.cluster
        return partitions | {TopicPartition(topic, p) for topic in {tp.topic for tp in partitions}
                             for p in cluster.partitions_for_topic(topic) or ()}

    def _mark_created_after_group(self, uncommitted: set[TopicPartition], committed: dict) -> None:
        """KIP-1327: mark the partitions of ``uncommitted`` the group gained after it knew their topics."""
        known = counted(self._held_counts, committed)
        created = {tp for tp in new_partitions(uncommitted, known) if self._subscription.is_assigned(tp)}
        policy = new_partition_policy(self._subscription.reset_policy, self._subscription.new_partitions_policy)
        for tp in sorted(created):
            log.info('%s was created after the group knew topic %s with %d partitions and has no committed offset: '
                     'auto_offset_reset_new_partitions starts it (%r; auto_offset_reset=%r for the others)',
                     tp, tp.topic, known[tp.topic], policy, self._subscription.reset_policy)
        self._subscription.mark_created_after_group(created)

    # -- KIP-253 ---------------------------------------------------------------------------------------

    def poll(self, timeout_ms: int | None = None) -> bool:
        """kafka-python's coordinator poll; then KIP-253's upkeep: whether ordering applies (the coordinator
        advertises kip.253), and learning the expansions the fetcher found unknown epochs for."""
        polled = super().poll(timeout_ms=timeout_ms)
        self._keep_expansion_order()
        return polled

    def _keep_expansion_order(self) -> None:
        """KIP-253's upkeep at each poll (both group protocols): whether ordering applies, learning the expansions
        the fetcher found unknown epochs for, reading committed offsets of the partitions this consumer waits for."""
        order = self.expansion_order
        node_id = self.coordinator()
        if not (self.config['expansion_ordering'] and self._subscription.partitions_auto_assigned()):
            order.active = False
        elif node_id is not None and broker_features(self._client, node_id) is not None:
            order.active = supports(self._client, node_id, KIP_253)
        # else the coordinator is being found or connected again: what it advertises is unknown, and ordering stays
        # as it was (turning it off would release every hold)
        if order.active:
            stale = self._topics_to_learn()
            if stale and (self._learning is None or self._learning.is_done):
                self._learning = self._manager.call_soon(self._learn_async, stale)
            if self._needs_committed_check():
                self._committed_check = self._manager.call_soon(self._check_committed_async)
        elif self.config['expansion_ordering'] and node_id is not None and self._subscription.partitions_auto_assigned():
            self._warn_unordered_expansions(node_id)

    def _warn_unordered_expansions(self, node_id: Any) -> None:
        """A coordinator without kip.253: a warning each time a subscribed topic is seen with more partitions."""
        cluster = self._client.cluster
        for topic in sorted(self._subscription.subscription or ()):
            count = len(cluster.partitions_for_topic(topic) or ())
            seen = self._unordered_counts.get(topic)
            if seen is not None and count > seen:
                log.warning('Topic %s grew from %d to %d partitions, and group coordinator %s does not advertise '
                            'kip.253: records of one key may be returned out of order across the expansion (KIP-253 '
                            'ordering needs brokers that support it)', topic, seen, count, node_id)
            if count:
                self._unordered_counts[topic] = count

    def _topics_to_learn(self) -> set[str]:
        """Assigned topics not learned, learned at another partition count, or with records of unknown epochs."""
        order = self.expansion_order
        cluster = self._client.cluster
        topics = set()
        for topic in {tp.topic for tp in self._subscription.assigned_partitions()}:
            learned = order.learned.get(topic)
            count = len(cluster.partitions_for_topic(topic) or ())
            if learned is None or learned.count != count or topic in order.unknown_epochs:
                topics.add(topic)
        return topics

    async def _learn_async(self, topics: set[str]) -> bool:
        """Learn ``topics``' expansions (after the metadata caught up with unknown epochs); False if one failed."""
        order = self.expansion_order
        cluster = self._client.cluster
        for topic in sorted(topics):
            behind = order.unknown_epochs.get(topic, -1) > max(
                (_leader_epoch(cluster, TopicPartition(topic, p)) for p in cluster.partitions_for_topic(topic) or ()),
                default=-1)
            try:
                if behind:
                    await self._manager.wait_for(cluster.request_update(), self.config['request_timeout_ms'])
                learned = await learn_topic(self._manager, self.group_id, self.coordinator(), topic,
                                            order.learned.get(topic))
            except Errors.KafkaError as exc:
                log.debug('Learning the partition expansions of %s failed (retried): %s', topic, exc)
                if isinstance(exc, (Errors.NotCoordinatorError, Errors.CoordinatorNotAvailableError)):
                    self.coordinator_dead(exc)
                return False
            if learned.expansions != (order.learned[topic].expansions if topic in order.learned else ()):
                log.info('Partition expansions of %s: %s', topic, ', '.join(
                    f'from {e.old_count} partitions (thresholds {list(e.thresholds)})' for e in learned.expansions))
            order.learn(topic, learned)
        return True

    def _needs_committed_check(self) -> bool:
        order = self.expansion_order
        return (self._committed_check is None or self._committed_check.is_done) and bool(order.needs(
            self._subscription.assigned_partitions(), self._subscription.positions()))

    async def _check_committed_async(self) -> None:
        """The committed offsets of the partitions this consumer waits for: the group's positions there when
        their owners do not report (members without KIP-253), checked once a heartbeat interval."""
        order = self.expansion_order
        needed = order.needs(self._subscription.assigned_partitions(), self._subscription.positions())
        if needed:
            try:
                committed = await self.fetch_committed_offsets_async(needed, self.config['request_timeout_ms'])
            except Errors.KafkaError as exc:
                log.debug('Committed offsets of %s not read: %s', sorted(needed), exc)
            else:
                order.committed({tp: offset.offset for tp, offset in committed.items()})
        await self._net.sleep(self.heartbeat_interval_ms() / 1000)

    def heartbeat_interval_ms(self) -> int:
        """How often this member heartbeats (the client's setting in classic groups)."""
        return self.config['heartbeat_interval_ms']

    def exchanges_positions(self, node_id: Any) -> bool:
        """Whether heartbeats to ``node_id`` carry KIP-253's positions: ordering applies and it advertises kip.253."""
        return self.expansion_order.active and supports(self._client, node_id, KIP_253)

    def position_needs(self) -> set[TopicPartition]:
        """The prior partitions whose group position this consumer waits for (a heartbeat's ``need_positions``)."""
        return self.expansion_order.needs(self._subscription.assigned_partitions(), self._subscription.positions())

    def _with_positions(self, request: Any, node_id: Any) -> Any:
        """``request`` as the patched HeartbeatRequest v4 with this consumer's needs and reports, if it exchanges
        positions with the coordinator; otherwise unchanged."""
        if not self.exchanges_positions(node_id):
            return request
        return requests.heartbeat_with_positions(request.group_id, request.generation_id, request.member_id,
                                                 request.group_instance_id, self.position_needs(),
                                                 self.expansion_order.reports())

    def _handle_heartbeat_response(self, response: Any, send_time: float) -> Any:
        if response.error_code == 0 and hasattr(response, 'need_positions'):
            self.expansion_order.heard(*requests.exchanged_positions(response))
        return super()._handle_heartbeat_response(response, send_time)

    async def _on_join_prepare_async(self, generation: Any, member_id: Any, timeout_ms: int | None = None) -> Any:
        self.expansion_order.new_generation()
        return await super()._on_join_prepare_async(generation, member_id, timeout_ms=timeout_ms)


async def _result_of(future: Any) -> Any:
    return await future


def _leader_epoch(cluster: Any, tp: TopicPartition) -> int:
    epoch = cluster.leader_epoch_for_partition(tp)
    return -1 if epoch is None else epoch


def _partitions_with(response: Any, error_code: int) -> set[TopicPartition]:
    """The partitions of an OffsetCommitResponse with ``error_code``. Read as kafka-python's handler reads it, by
    position (topic, partitions; partition, error code): its responses and the tuples its tests build alike."""
    return {TopicPartition(topic, partition) for topic, partitions in response.topics
            for partition, code in partitions if code == error_code}


def _known(value: int, fallback: int | None) -> int:
    return value if value >= 0 or fallback is None else fallback


def _extension_fields_by_partition(response: Any) -> dict[TopicPartition, tuple[int, int]]:
    """``{tp: (commit_timestamp, partition_epoch)}`` from an OffsetFetchResponse (-1 where absent)."""
    topics = response.groups[0].topics if response.API_VERSION >= 8 else response.topics
    return {TopicPartition(topic.name, p.partition_index):
            (getattr(p, 'commit_timestamp', -1), getattr(p, 'partition_epoch', -1))
            for topic in topics or () for p in topic.partitions}
