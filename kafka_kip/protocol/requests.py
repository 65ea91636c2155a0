"""Every request kafka_kip builds itself, one function per request, from the patched message classes.

Two kinds: the clients' and the mirror's requests (:func:`fetch`, :func:`produce`, :func:`list_offsets`, the
groups', topics' and KIP-253 requests, ...) take plain values for any number of partitions and leave the
version to the connection, within the bounds given here (Fetch and Produce stay at or below v12, the last
versions that address topics by name); the protocol tests' requests (``*_request``) address one partition at an
exact version (v13+ Fetch and Produce by topic id), for :class:`kafka_kip.protocol.wire.WireClient`.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import (
    FetchRequest,
    ListOffsetsRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest
from kafka.structs import TopicPartition

from kafka_kip.protocol.constants import READ_COMMITTED, READ_UNCOMMITTED, UNKNOWN_EPOCH
from kafka_kip.protocol.messages import (
    ConsumerGroupDescribeRequest,
    HeartbeatRequest,
    LeaderEpochsForPartitionRequest,
    OffsetCommitRequest,
    ProduceRequest,
)

DELETE_RECORDS_KEY = ApiKey.DeleteRecords

_FetchTopic = FetchRequest.FetchTopic
_FetchPartition = _FetchTopic.FetchPartition
_ProduceTopic = ProduceRequest.TopicProduceData
_ProducePartition = _ProduceTopic.PartitionProduceData
_ListTopic = ListOffsetsRequest.ListOffsetsTopic
_ListPartition = _ListTopic.ListOffsetsPartition
_EpochTopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
_EpochPartition = _EpochTopic.OffsetForLeaderPartition

#: DescribeConfigs resource type of a topic, and the config source of a setting made on the topic itself.
TOPIC_RESOURCE = 2
DYNAMIC_TOPIC_CONFIG = 1
#: First OffsetCommit version with the KIP-232/KIP-320 extension fields (the first flexible one).
FIRST_FLEXIBLE_COMMIT_VERSION = OffsetCommitRequest._flexible_versions[0]
#: First Heartbeat version with the KIP-253 positions (the first flexible one).
HEARTBEAT_POSITIONS_VERSION = HeartbeatRequest._flexible_versions[0]

#: First Produce version that carries the KIP-391 ``use_offset`` tag (the first flexible one).
USE_OFFSET_MIN_VERSION = 9
#: The last Fetch and Produce versions that address topics by name (v13 uses topic ids).
MAX_NAMED_VERSION = 12


# -- the clients' and the mirror's requests ----------------------------------------------------------------


def fetch(partitions: Mapping[str, list[tuple[int, int, int, int]]], *, max_wait_ms: int, max_bytes: int,
          partition_max_bytes: int, isolation_level: int = READ_COMMITTED, min_bytes: int = 1,
          min_version: int | None = 4) -> FetchRequest:
    """A sessionless fetch; ``partitions``: topic -> [(partition, current_leader_epoch, offset, last_epoch)]."""
    topics = [_FetchTopic(topic=topic, partitions=[
        _FetchPartition(partition=partition, current_leader_epoch=leader_epoch, fetch_offset=offset,
                        last_fetched_epoch=last_epoch, log_start_offset=-1, partition_max_bytes=partition_max_bytes)
        for partition, leader_epoch, offset, last_epoch in parts]) for topic, parts in partitions.items()]
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        isolation_level=isolation_level,
                        session_id=0, session_epoch=-1, topics=topics, forgotten_topics_data=[], rack_id='',
                        min_version=min_version, max_version=MAX_NAMED_VERSION)


def produce(batches: Mapping[str, list[tuple[int, bytes | bytearray]]], *, acks: int, timeout_ms: int,
            use_offset: bool, transactional_id: str | None = None,
            max_version: int = MAX_NAMED_VERSION,
            partition_counts: Mapping[str, int] | None = None) -> ProduceRequest:
    """A produce request with one batch per partition; ``use_offset`` writes at the batches' offsets;
    ``partition_counts`` (KIP-253) gives each topic the partition count its batches were partitioned with."""
    counts = partition_counts or {}
    topic_data = [_ProduceTopic(name=topic, partition_count=counts.get(topic, -1), partition_data=[
        _ProducePartition(index=partition, records=data) for partition, data in parts])
        for topic, parts in batches.items()]
    if use_offset or partition_counts is not None:
        return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
                              topic_data=topic_data, use_offset=use_offset, min_version=USE_OFFSET_MIN_VERSION,
                              max_version=max_version)
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=topic_data,
                          min_version=3, max_version=max_version)


def list_offsets(partitions: Iterable[tuple[TopicPartition, int]], timestamp: int,
                 isolation_level: int = READ_UNCOMMITTED, *, timeout_ms: int = 30000, min_version: int = 4,
                 max_version: int | None = 8) -> ListOffsetsRequest:
    """ListOffsets for ``[(tp, current_leader_epoch)]`` at ``timestamp`` (a time, or one of the ``*_TIMESTAMP``
    of :mod:`kafka_kip.protocol.constants`)."""
    by_topic: dict[str, list] = {}
    for tp, leader_epoch in partitions:
        by_topic.setdefault(tp.topic, []).append(
            _ListPartition(partition_index=tp.partition, current_leader_epoch=leader_epoch, timestamp=timestamp))
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, timeout_ms=timeout_ms,
                              topics=[_ListTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
                              min_version=min_version, max_version=max_version)


def offset_for_leader_epoch(partitions: Iterable[tuple[TopicPartition, int, int]]) -> OffsetForLeaderEpochRequest:
    """Where each epoch ends in the leader's log (KIP-101/KIP-320), for ``[(tp, current_leader_epoch, epoch)]``
    (fenced by the current leader epoch)."""
    by_topic: dict[str, list] = {}
    for tp, current_leader_epoch, epoch in partitions:
        by_topic.setdefault(tp.topic, []).append(
            _EpochPartition(partition=tp.partition, current_leader_epoch=current_leader_epoch, leader_epoch=epoch))
    return OffsetForLeaderEpochRequest(replica_id=-1, topics=[_EpochTopic(topic=topic, partitions=parts)
                                                              for topic, parts in by_topic.items()],
                                       min_version=2, max_version=4)


def init_producer_id() -> InitProducerIdRequest:
    """A new idempotent (non-transactional) producer id."""
    return InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1, producer_id=-1,
                                 producer_epoch=-1, min_version=0, max_version=4)


def metadata(topics: Iterable[str] | None) -> MetadataRequest:
    """Metadata of ``topics`` (None: every topic; v10+ carries their topic ids where the broker has them)."""
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=name) for name in topics]
    return MetadataRequest(topics=wanted,
                           allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False, min_version=1, max_version=12)


def delete_records(tp: TopicPartition, offset: int, timeout_ms: int) -> DeleteRecordsRequest:
    """Move the log start of ``tp`` up to ``offset`` (DeleteRecords)."""
    topic = DeleteRecordsRequest.DeleteRecordsTopic
    return DeleteRecordsRequest(topics=[topic(name=tp.topic, partitions=[topic.DeleteRecordsPartition(
        partition_index=tp.partition, offset=offset)])], timeout_ms=timeout_ms, min_version=0, max_version=2)


# -- groups (the mirror's group sync, the consumer's coordinator, KIP-253 learning) ------------------------


@dataclass(frozen=True)
class OffsetCommitPartition:
    """One partition of an OffsetCommit, independent of its version; ``partition_epoch`` and ``commit_timestamp``
    are the KIP-232/KIP-320 extension fields (-1: not sent)."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    partition_epoch: int = -1
    commit_timestamp: int = -1


def find_coordinator(group: str) -> FindCoordinatorRequest:
    """The coordinator of ``group``."""
    return FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group])


def list_groups() -> ListGroupsRequest:
    """Every group the broker coordinates."""
    return ListGroupsRequest(states_filter=[], types_filter=[])


def describe_groups(groups: list[str]) -> DescribeGroupsRequest:
    """State and members of ``groups``."""
    return DescribeGroupsRequest(groups=groups, include_authorized_operations=False)


def consumer_group_describe(groups: list[str]) -> ConsumerGroupDescribeRequest:
    """State, epochs and members of KIP-848 consumer ``groups`` (DescribeGroups answers only for classic ones)."""
    return ConsumerGroupDescribeRequest(group_ids=groups, include_authorized_operations=False)


def offset_fetch_all(group: str) -> OffsetFetchRequest:
    """Every committed offset of ``group`` (OffsetFetch v8, all topics)."""
    return OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)],
                              require_stable=False, min_version=8, max_version=8)


def offset_commit(group: str, entries: Iterable[OffsetCommitPartition], *, generation: int = -1, member_id: str = '',
                  group_instance_id: str | None = None, retention_time_ms: int = -1, min_version: int = 2,
                  max_version: int | None = 9) -> OffsetCommitRequest:
    """Commit ``entries`` for ``group`` (generation -1 and no member: a commit from outside the group)."""
    commit_topic = OffsetCommitRequest.OffsetCommitRequestTopic
    by_topic: dict[str, list] = {}
    for entry in entries:
        by_topic.setdefault(entry.topic, []).append(commit_topic.OffsetCommitRequestPartition(
            partition_index=entry.partition, committed_offset=entry.offset,
            committed_leader_epoch=entry.leader_epoch, committed_metadata=entry.metadata,
            partition_epoch=entry.partition_epoch, commit_timestamp=entry.commit_timestamp))
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                               group_instance_id=group_instance_id, retention_time_ms=retention_time_ms,
                               topics=[commit_topic(name=name, partitions=parts) for name, parts in by_topic.items()],
                               min_version=min_version, max_version=max_version)


def heartbeat_with_positions(group: str, generation: int, member_id: str, group_instance_id: str | None,
                             need_positions: Iterable[TopicPartition],
                             positions: Mapping[TopicPartition, int]) -> HeartbeatRequest:
    """A KIP-253 heartbeat: the partitions whose prior positions this member needs and the positions it reports
    (each left out when empty)."""
    return HeartbeatRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=group_instance_id,
        **position_fields(HeartbeatRequest, need_positions, positions), min_version=HEARTBEAT_POSITIONS_VERSION)


def position_fields(message: type, need_positions: Iterable[TopicPartition],
                    positions: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """KIP-253's request fields ``need_positions`` and ``positions`` of ``message`` (HeartbeatRequest v4+ or
    ConsumerGroupHeartbeatRequest), each None when empty."""
    needed: dict[str, list[int]] = {}
    for tp in sorted(need_positions):
        needed.setdefault(tp.topic, []).append(tp.partition)
    position_topic = message.PositionTopic
    reported: dict[str, list] = {}
    for tp, offset in sorted(positions.items()):
        reported.setdefault(tp.topic, []).append(position_topic.PartitionPosition(partition_index=tp.partition,
                                                                                  offset=offset))
    return {'need_positions': [message.NeedPositionTopic(topic=topic, partitions=partitions)
                               for topic, partitions in needed.items()] or None,
            'positions': [position_topic(topic=topic, partitions=partitions)
                          for topic, partitions in reported.items()] or None}


def exchanged_positions(response: Any) -> tuple[dict[TopicPartition, int], list[TopicPartition]]:
    """KIP-253's response fields of a HeartbeatResponse v4+ or a ConsumerGroupHeartbeatResponse: the group's
    positions on the partitions the member asked for, and the partitions some member of the group needs."""
    positions = {TopicPartition(t.topic, p.partition_index): p.offset
                 for t in response.positions or () for p in t.partitions}
    return positions, [TopicPartition(t.topic, p) for t in response.need_positions or () for p in t.partitions]


def leader_epochs_for_partition(group: str, topic: str, partitions: list[int]) -> LeaderEpochsForPartitionRequest:
    """KIP-253: the prior partitions of ``partitions`` of ``topic`` and their leader epochs at the expansion."""
    return LeaderEpochsForPartitionRequest(group_id=group, topics=[
        LeaderEpochsForPartitionRequest.LeaderEpochsForPartitionTopic(name=topic, partitions=partitions)])


# -- topics (the mirror's target topics) ---------------------------------------------------------------------


def create_topics(topics: Mapping[str, tuple[int, int, Mapping[str, str]]], timeout_ms: int = 30000
                  ) -> CreateTopicsRequest:
    """Create ``topics`` (name -> (partitions, replication factor, topic configs))."""
    creatable = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest(topics=[creatable(
        name=name, num_partitions=partitions, replication_factor=replication, assignments=[],
        configs=[creatable.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
        for name, (partitions, replication, configs) in topics.items()],
        timeout_ms=timeout_ms, validate_only=False, min_version=2, max_version=7)


def create_partitions(counts: Mapping[str, int], timeout_ms: int = 30000) -> CreatePartitionsRequest:
    """Grow each topic of ``counts`` to its partition count."""
    return CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name=name, count=count, assignments=None) for name, count in counts.items()], timeout_ms=timeout_ms,
        validate_only=False, min_version=0, max_version=3)


def describe_topic_configs(topics: Iterable[str], keys: list[str] | None = None) -> DescribeConfigsRequest:
    """The configs named in ``keys`` (None: every config) of each of ``topics``."""
    return DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=keys) for topic in topics],
        include_synonyms=False, include_documentation=False, min_version=1, max_version=4)


# -- the protocol tests' requests: one partition, an exact version ------------------------------------


def metadata_request(topics: list[str] | None = None, version: int = 12) -> Any:
    """A MetadataRequest for ``topics`` (None: every topic), never creating topics."""
    request_class = MetadataRequest
    wanted = None if topics is None else [request_class.MetadataRequestTopic(name=t) for t in topics]
    return request_class(version=version, topics=wanted, allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)


def produce_request(topic: str, partition: int, records: bytes, acks: int = -1, use_offset: bool = False,
                    version: int = 9, timeout_ms: int = 5000, topic_id: uuid.UUID | None = None,
                    transactional_id: str | None = None) -> Any:
    """A ProduceRequest; v13+ addresses the topic by ``topic_id``."""
    request_class = ProduceRequest
    data = request_class.TopicProduceData
    return request_class(
        version=version, transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, use_offset=use_offset,
        topic_data=[data(name=topic, topic_id=topic_id,
                         partition_data=[data.PartitionProduceData(index=partition, records=records)])])


def fetch_request(topic: str, partition: int, offset: int, current_leader_epoch: int = UNKNOWN_EPOCH,
                  last_fetched_epoch: int = UNKNOWN_EPOCH, max_wait_ms: int = 0, min_bytes: int = 1,
                  max_bytes: int = 1 << 20, version: int = 12, topic_id: uuid.UUID | None = None) -> Any:
    """A sessionless FetchRequest of one partition; v13+ addresses the topic by ``topic_id``."""
    request_class = FetchRequest
    fetch_topic = request_class.FetchTopic
    return request_class(
        version=version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id='',
        topics=[fetch_topic(topic=topic, topic_id=topic_id, partitions=[fetch_topic.FetchPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1, partition_max_bytes=max_bytes)])])


def list_offsets_request(topic: str, partition: int, timestamp: int, current_leader_epoch: int = UNKNOWN_EPOCH,
                         version: int = 7) -> Any:
    """A ListOffsetsRequest of one partition (``timestamp`` -1 latest, -2 earliest, -3 max)."""
    request_class = ListOffsetsRequest
    list_topic = request_class.ListOffsetsTopic
    return request_class(
        version=version, replica_id=-1, isolation_level=0,
        topics=[list_topic(name=topic, partitions=[list_topic.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=current_leader_epoch, timestamp=timestamp)])])


def offset_for_leader_epoch_request(topic: str, partition: int, leader_epoch: int,
                                    current_leader_epoch: int = UNKNOWN_EPOCH, version: int = 4) -> Any:
    """An OffsetForLeaderEpochRequest of one partition, as a consumer sends it."""
    request_class = OffsetForLeaderEpochRequest
    epoch_topic = request_class.OffsetForLeaderTopic
    return request_class(
        version=version, replica_id=-1,
        topics=[epoch_topic(topic=topic, partitions=[epoch_topic.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])
