"""The group coordinator client: kafka-python's, with epochs and timestamps on commits (KIP-320, KIP-232).

- Commits carry the leader epoch of the last consumed record (kafka-python already sends it) and, where
  the coordinator advertises ``kip.232``, the record's timestamp (``commit_timestamp``) and the position's
  partition epoch (``partition_epoch``) as extension tagged fields. Elsewhere both are kept in memory for
  the offsets this consumer committed.
- Committed offsets come back as :class:`kafka_kip.OffsetAndMetadata` with those fields, and a partition
  positioned from its committed offset keeps the commit's epochs: it is validated (and, with a partition
  epoch, held until metadata caught up) before anything is fetched.
"""
from __future__ import annotations

from typing import Any

import kafka.coordinator.consumer as _stock
import kafka.errors as Errors
import kafka.protocol.consumer as _stock_messages
from kafka.structs import TopicPartition
from kafka.util import Timer

from kafka_kip.errors import InvalidLeaderEpochError, InvalidPartitionEpochError
from kafka_kip.protocol import messages
from kafka_kip.protocol.features import KIP_232, supports
from kafka_kip.structs import OffsetAndMetadata

_StockCommitRequest = _stock_messages.OffsetCommitRequest
_CommitRequest = messages.OffsetCommitRequest
_CommitTopic = _CommitRequest.OffsetCommitRequestTopic
_CommitPartition = _CommitTopic.OffsetCommitRequestPartition
# Extension fields are tagged fields: they only exist on the flexible versions.
_FIRST_FLEXIBLE_COMMIT_VERSION = _CommitRequest._flexible_versions[0]


class _CommitRequestExtender:
    """The connection manager as the coordinator sees it: ``send`` first passes an OffsetCommitRequest
    through ``extend``; every other attribute is the manager's own.

    kafka-python builds the OffsetCommitRequest inline (``ConsumerCoordinator._send_offset_commit_request``,
    together with the group generation checks) and hands it straight to ``self._manager.send``; this is
    the one point between the two where the extension fields can be added without repeating that method.
    """

    def __init__(self, manager: Any, extend: Any) -> None:
        self._target = manager
        self._extend = extend

    def send(self, request: Any, node_id: Any = None, **kwargs: Any) -> Any:
        if type(request) is _StockCommitRequest:
            request = self._extend(request, node_id)
        return self._target.send(request, node_id=node_id, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class ConsumerCoordinator(_stock.ConsumerCoordinator):
    """kafka-python's ``ConsumerCoordinator`` whose commits and committed offsets carry epochs/timestamps."""

    def __init__(self, client: Any, subscription: Any, **configs: Any) -> None:
        super().__init__(client, subscription, **configs)
        self._manager = _CommitRequestExtender(self._manager, self._with_extension_fields)
        self._committing: dict[TopicPartition, Any] = {}   # offsets of commits being sent, by partition
        self._committed: dict[TopicPartition, Any] = {}    # the last offset this consumer committed

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

    def _with_extension_fields(self, request: Any, node_id: Any) -> Any:
        """``request`` as the patched OffsetCommitRequest with commit_timestamp / partition_epoch, if the
        coordinator advertises kip.232; otherwise unchanged."""
        if not supports(self._client, node_id, KIP_232):
            return request
        topics = [
            _CommitTopic(name=topic.name, partitions=[
                _CommitPartition(partition_index=p.partition_index, committed_offset=p.committed_offset,
                                 committed_leader_epoch=p.committed_leader_epoch,
                                 committed_metadata=p.committed_metadata,
                                 **self._extension_fields(TopicPartition(topic.name, p.partition_index),
                                                          p.committed_offset))
                for p in topic.partitions])
            for topic in request.topics]
        return _CommitRequest(
            group_id=request.group_id, generation_id_or_member_epoch=request.generation_id_or_member_epoch,
            member_id=request.member_id, group_instance_id=request.group_instance_id,
            retention_time_ms=request.retention_time_ms, topics=topics,
            min_version=max(request._min_version or 0, _FIRST_FLEXIBLE_COMMIT_VERSION),
            max_version=request._max_version)

    def _extension_fields(self, tp: TopicPartition, offset: int) -> dict[str, int]:
        committing = self._committing.get(tp)
        if committing is None or committing.offset != offset:
            return {'commit_timestamp': -1, 'partition_epoch': -1}
        return {'commit_timestamp': getattr(committing, 'timestamp', -1),
                'partition_epoch': getattr(committing, 'partition_epoch', -1)}

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
        of a committed position.)
        """
        partitions = self._subscription.missing_fetch_positions()
        try:
            committed = await self.fetch_committed_offsets_async(partitions, timeout_ms=timeout_ms)
        except Errors.KafkaTimeoutError:
            return False
        for tp, offset in committed.items():
            if self._subscription.is_assigned(tp):
                self._subscription.seek_committed(tp, offset)
        return True


def _partitions_with(response: Any, error_code: int) -> set[TopicPartition]:
    return {TopicPartition(topic.name, p.partition_index) for topic in response.topics
            for p in topic.partitions if p.error_code == error_code}


def _known(value: int, fallback: int | None) -> int:
    return value if value >= 0 or fallback is None else fallback


def _extension_fields_by_partition(response: Any) -> dict[TopicPartition, tuple[int, int]]:
    """``{tp: (commit_timestamp, partition_epoch)}`` from an OffsetFetchResponse (-1 where absent)."""
    topics = response.groups[0].topics if response.API_VERSION >= 8 else response.topics
    return {TopicPartition(topic.name, p.partition_index):
            (getattr(p, 'commit_timestamp', -1), getattr(p, 'partition_epoch', -1))
            for topic in topics or () for p in topic.partitions}
