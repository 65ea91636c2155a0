"""Every request kafka_kip builds itself, one function per request, from the patched message classes.

Two kinds: the clients' and the mirror's requests (:func:`fetch`, :func:`produce`, :func:`list_offsets`, ...)
take plain values for any number of partitions and leave the version to the connection, within the bounds
given here (Fetch and Produce stay at or below v12, the last versions that address topics by name); the
protocol tests' requests (``*_request``) address one partition at an exact version (v13+ Fetch and Produce by
topic id), for :class:`kafka_kip_reference.fixtures.wire_client.WireClient`.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kafka.structs import TopicPartition

from kafka_kip.protocol.constants import READ_COMMITTED, READ_UNCOMMITTED, UNKNOWN_EPOCH
from kafka_kip.protocol.messages import REQUESTS

FetchRequest = REQUESTS[1]
ProduceRequest = REQUESTS[0]
ListOffsetsRequest = REQUESTS[2]
OffsetForLeaderEpochRequest = REQUESTS[23]
InitProducerIdRequest = REQUESTS[22]
MetadataRequest = REQUESTS[3]
DeleteRecordsRequest = REQUESTS[21]
DELETE_RECORDS_KEY = 21

_FetchTopic = FetchRequest.FetchTopic
_FetchPartition = _FetchTopic.FetchPartition
_ProduceTopic = ProduceRequest.TopicProduceData
_ProducePartition = _ProduceTopic.PartitionProduceData
_ListTopic = ListOffsetsRequest.ListOffsetsTopic
_ListPartition = _ListTopic.ListOffsetsPartition
_EpochTopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
_EpochPartition = _EpochTopic.OffsetForLeaderPartition

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


def metadata(topics: Iterable[str]) -> MetadataRequest:
    """Metadata of ``topics`` (v10+ carries their topic ids where the broker has them)."""
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name) for name in topics],
                           allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False, min_version=1, max_version=12)


def delete_records(tp: TopicPartition, offset: int, timeout_ms: int) -> DeleteRecordsRequest:
    """Move the log start of ``tp`` up to ``offset`` (DeleteRecords)."""
    topic = DeleteRecordsRequest.DeleteRecordsTopic
    return DeleteRecordsRequest(topics=[topic(name=tp.topic, partitions=[topic.DeleteRecordsPartition(
        partition_index=tp.partition, offset=offset)])], timeout_ms=timeout_ms, min_version=0, max_version=2)


# -- the protocol tests' requests: one partition, an exact version ------------------------------------


def metadata_request(topics: list[str] | None = None, version: int = 12) -> Any:
    """A MetadataRequest for ``topics`` (None: every topic), never creating topics."""
    request_class = REQUESTS[3]
    wanted = None if topics is None else [request_class.MetadataRequestTopic(name=t) for t in topics]
    return request_class(version=version, topics=wanted, allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)


def produce_request(topic: str, partition: int, records: bytes, acks: int = -1, use_offset: bool = False,
                    version: int = 9, timeout_ms: int = 5000, topic_id: uuid.UUID | None = None,
                    transactional_id: str | None = None) -> Any:
    """A ProduceRequest; v13+ addresses the topic by ``topic_id``."""
    request_class = REQUESTS[0]
    data = request_class.TopicProduceData
    return request_class(
        version=version, transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, use_offset=use_offset,
        topic_data=[data(name=topic, topic_id=topic_id,
                         partition_data=[data.PartitionProduceData(index=partition, records=records)])])


def fetch_request(topic: str, partition: int, offset: int, current_leader_epoch: int = UNKNOWN_EPOCH,
                  last_fetched_epoch: int = UNKNOWN_EPOCH, max_wait_ms: int = 0, min_bytes: int = 1,
                  max_bytes: int = 1 << 20, version: int = 12, topic_id: uuid.UUID | None = None) -> Any:
    """A sessionless FetchRequest of one partition; v13+ addresses the topic by ``topic_id``."""
    request_class = REQUESTS[1]
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
    request_class = REQUESTS[2]
    list_topic = request_class.ListOffsetsTopic
    return request_class(
        version=version, replica_id=-1, isolation_level=0,
        topics=[list_topic(name=topic, partitions=[list_topic.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=current_leader_epoch, timestamp=timestamp)])])


def offset_for_leader_epoch_request(topic: str, partition: int, leader_epoch: int,
                                    current_leader_epoch: int = UNKNOWN_EPOCH, version: int = 4) -> Any:
    """An OffsetForLeaderEpochRequest of one partition, as a consumer sends it."""
    request_class = REQUESTS[23]
    epoch_topic = request_class.OffsetForLeaderTopic
    return request_class(
        version=version, replica_id=-1,
        topics=[epoch_topic(topic=topic, partitions=[epoch_topic.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])
