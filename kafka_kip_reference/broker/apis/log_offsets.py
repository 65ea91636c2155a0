"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords."""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.features import KIP_232
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.apis.common import leader_partition
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.internal_topics import is_internal
from kafka_kip_reference.broker.log import PartitionLog, TimestampAndOffset
from kafka_kip_reference.broker.registry import handles

ListOffsetsResponse = RESPONSES[ApiKey.ListOffsets]
_ListTopic = ListOffsetsResponse.ListOffsetsTopicResponse
_ListPartition = _ListTopic.ListOffsetsPartitionResponse
OffsetForLeaderEpochResponse = RESPONSES[ApiKey.OffsetForLeaderEpoch]
_EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_EpochPartition = _EpochTopic.EpochEndOffset
DeleteRecordsResponse = RESPONSES[ApiKey.DeleteRecords]
_DeleteTopic = DeleteRecordsResponse.DeleteRecordsTopicResult
_DeletePartition = _DeleteTopic.DeleteRecordsPartitionResult

_NOT_FOUND = TimestampAndOffset(constants.NO_TIMESTAMP, constants.UNKNOWN_OFFSET, constants.UNKNOWN_EPOCH)


# v6+ partition_epoch (KIP-232); v7 max timestamp; v8 earliest-local; v9 latest-tiered; v10 timeout (ignored);
# v11 earliest-pending-upload
@handles(ApiKey.ListOffsets, 1, 11)
async def handle_list_offsets(request, ctx: RequestContext):
    view = ctx.cluster.view(ctx.broker_id)
    epochs = ctx.cluster.honours(KIP_232)
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            found, error = leader_partition(view, ctx.broker_id, topic.name, wanted.partition_index,
                                            wanted.current_leader_epoch)
            if error:
                partitions.append(_ListPartition(partition_index=wanted.partition_index, error_code=error,
                                                 timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            log = found.partition.logs[ctx.broker_id]
            # read_committed consumers see up to the last stable offset, others up to the high watermark
            fetchable = log.last_stable_offset if request.isolation_level == constants.READ_COMMITTED else log.high_watermark
            result = _lookup(log, wanted.timestamp, found.leader_epoch, fetchable)
            error = constants.NONE if result is not None else constants.INVALID_REQUEST
            result = result or _NOT_FOUND
            partitions.append(_ListPartition(
                partition_index=wanted.partition_index, error_code=error, timestamp=result.timestamp,
                offset=result.offset, leader_epoch=result.leader_epoch,
                partition_epoch=found.partition_epoch if epochs else -1))
        topics.append(_ListTopic(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(version=ctx.api_version, throttle_time_ms=0, topics=topics)


def _lookup(log: PartitionLog, timestamp: int, leader_epoch: int, fetchable: int) -> TimestampAndOffset | None:
    """Kafka's fetchOffsetForTimestamp for a consumer (reads bounded by ``fetchable``).

    None means an unsupported special timestamp; ``_NOT_FOUND`` means no such record.
    """
    if timestamp == constants.LATEST_TIMESTAMP:
        return TimestampAndOffset(constants.NO_TIMESTAMP, fetchable, leader_epoch)
    if timestamp in (constants.LATEST_TIERED_TIMESTAMP, constants.EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        return _NOT_FOUND  # nothing is tiered: Kafka answers -1 without remote storage (KIP-1005, KIP-1023)
    if timestamp in (constants.EARLIEST_TIMESTAMP, constants.EARLIEST_LOCAL_TIMESTAMP):
        return TimestampAndOffset(constants.NO_TIMESTAMP, log.log_start_offset,
                                  log.epoch_for_offset(log.log_start_offset))
    if timestamp == constants.MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    elif timestamp >= 0:
        found = log.offset_for_timestamp(timestamp)
    else:
        return None
    if found is None or found.offset >= fetchable:
        return _NOT_FOUND
    return found


@handles(ApiKey.OffsetForLeaderEpoch, 2, 4)
async def handle_offset_for_leader_epoch(request, ctx: RequestContext):
    view = ctx.cluster.view(ctx.broker_id)
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            found, error = leader_partition(view, ctx.broker_id, topic.topic, wanted.partition,
                                            wanted.current_leader_epoch)
            if error:
                partitions.append(_EpochPartition(error_code=error, partition=wanted.partition,
                                                  leader_epoch=constants.UNKNOWN_EPOCH,
                                                  end_offset=constants.UNKNOWN_OFFSET))
                continue
            epoch, end_offset = found.partition.logs[ctx.broker_id].end_offset_for_epoch(wanted.leader_epoch)
            partitions.append(_EpochPartition(error_code=constants.NONE, partition=wanted.partition,
                                              leader_epoch=epoch, end_offset=end_offset))
        topics.append(_EpochTopic(topic=topic.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(version=ctx.api_version, throttle_time_ms=0, topics=topics)


@handles(ApiKey.DeleteRecords, 0, 2)
async def handle_delete_records(request, ctx: RequestContext):
    state = ctx.cluster
    view = state.view(ctx.broker_id)
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            found, error = leader_partition(view, ctx.broker_id, topic.name, wanted.partition_index)
            low_watermark = -1
            if not error and is_internal(topic.name):
                error = constants.INVALID_TOPIC_EXCEPTION  # Kafka: "Cannot delete records of internal topic"
            if not error:
                log = found.partition.logs[ctx.broker_id]
                offset = log.high_watermark if wanted.offset == -1 else wanted.offset
                if 0 <= offset <= log.high_watermark:
                    low_watermark = state.delete_records(found, ctx.broker_id, offset)
                else:
                    error = constants.OFFSET_OUT_OF_RANGE
            partitions.append(_DeletePartition(partition_index=wanted.partition_index,
                                               low_watermark=low_watermark, error_code=error))
        topics.append(_DeleteTopic(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(version=ctx.api_version, throttle_time_ms=0, topics=topics)
