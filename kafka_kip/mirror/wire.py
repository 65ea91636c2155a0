"""The requests the copier sends, built from the patched message classes, and how it reads errors.

One function per request; each takes plain values and returns a request object whose version the
connection negotiates within the bounds given here. Fetch and Produce stay at or below v12, the last
versions that address topics by name.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.protocol.constants import (
    INVALID_PRODUCE_OFFSET,
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    UNKNOWN_PRODUCER_ID,
)
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
_MAX_NAMED_VERSION = 12

#: Produce errors after which the partition's producer session is renewed and the copy resumes
#: from the target's end: the write may or may not have landed, or the sequence chain broke.
SESSION_ERRORS = frozenset({
    OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID, INVALID_PRODUCE_OFFSET,
})


def only_partition(topics: list[Any]) -> Any:
    """The one partition of a one-partition response's topic list, or None when the broker left it out."""
    return topics[0].partitions[0] if topics and topics[0].partitions else None


def only_produced(response: Any) -> Any:
    """The one partition answer of a one-partition ProduceResponse, or None when the broker left it out."""
    topics = response.responses
    return topics[0].partition_responses[0] if topics and topics[0].partition_responses else None


def is_retriable(error_code: int) -> bool:
    """True for errors a retry (after a metadata refresh) can cure."""
    return issubclass(Errors.for_code(error_code), Errors.RetriableError)


def error_name(error_code: int) -> str:
    return Errors.for_code(error_code).__name__


#: A fetch that reads one partition at once: Tansu answers ``max_wait_ms=0`` with no partitions at all.
SINGLE_READ_MAX_WAIT_MS = 50


def fetch(partitions: Mapping[str, list[tuple[int, int, int, int]]], *, max_wait_ms: int, max_bytes: int,
          partition_max_bytes: int, isolation_level: int = READ_COMMITTED, min_bytes: int = 1) -> FetchRequest:
    """A sessionless fetch; ``partitions``: topic -> [(partition, current_leader_epoch, offset, last_epoch)]."""
    topics = [_FetchTopic(topic=topic, partitions=[
        _FetchPartition(partition=partition, current_leader_epoch=leader_epoch, fetch_offset=offset,
                        last_fetched_epoch=last_epoch, log_start_offset=-1, partition_max_bytes=partition_max_bytes)
        for partition, leader_epoch, offset, last_epoch in parts]) for topic, parts in partitions.items()]
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        isolation_level=isolation_level,
                        session_id=0, session_epoch=-1, topics=topics, forgotten_topics_data=[], rack_id='',
                        min_version=4, max_version=_MAX_NAMED_VERSION)


def produce(batches: Mapping[str, list[tuple[int, bytes | bytearray]]], *, acks: int, timeout_ms: int,
            use_offset: bool) -> ProduceRequest:
    """A produce request with one batch per partition; ``use_offset`` writes at the batches' offsets."""
    topic_data = [_ProduceTopic(name=topic, partition_data=[
        _ProducePartition(index=partition, records=data) for partition, data in parts])
        for topic, parts in batches.items()]
    if use_offset:
        return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=topic_data,
                              use_offset=True, min_version=USE_OFFSET_MIN_VERSION, max_version=_MAX_NAMED_VERSION)
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=topic_data,
                          min_version=3, max_version=_MAX_NAMED_VERSION)


def list_offsets(partitions: Iterable[tuple[TopicPartition, int]], timestamp: int,
                 isolation_level: int = READ_UNCOMMITTED) -> ListOffsetsRequest:
    """ListOffsets for ``[(tp, current_leader_epoch)]`` at ``timestamp`` (a ListOffsets timestamp of :mod:`kafka_kip.protocol.constants` or a time)."""
    by_topic: dict[str, list] = {}
    for tp, leader_epoch in partitions:
        by_topic.setdefault(tp.topic, []).append(
            _ListPartition(partition_index=tp.partition, current_leader_epoch=leader_epoch, timestamp=timestamp))
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, timeout_ms=30000,
                              topics=[_ListTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
                              min_version=4, max_version=8)


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
