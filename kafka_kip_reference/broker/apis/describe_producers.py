"""DescribeProducers (KIP-664): the idempotent and transactional producers of partitions, from the answering broker's
own replica of each (Kafka's ``UnifiedLog.activeProducers``): epoch, last sequence and timestamp, the coordinator
epoch of the latest marker, the first offset of an open transaction. A broker without a replica of the partition
answers NOT_LEADER_OR_FOLLOWER, an unknown partition UNKNOWN_TOPIC_OR_PARTITION."""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.registry import handles

DescribeProducersResponse = RESPONSES[ApiKey.DescribeProducers]
_Topic = DescribeProducersResponse.TopicResponse
_Partition = _Topic.PartitionResponse
_Producer = _Partition.ProducerState


@handles(ApiKey.DescribeProducers, 0, 0)
async def handle_describe_producers(request: Any, ctx: RequestContext) -> Any:
    view = ctx.cluster.view(ctx.broker_id)
    return DescribeProducersResponse(version=ctx.api_version, throttle_time_ms=0, topics=[
        _Topic(name=topic.name, partitions=[_partition(ctx, view.partition(topic.name, index), index)
                                            for index in topic.partition_indexes])
        for topic in request.topics])


def _partition(ctx: RequestContext, found: Any, index: int) -> Any:
    if found is None:
        return _Partition(partition_index=index, error_code=constants.UNKNOWN_TOPIC_OR_PARTITION,
                          active_producers=[])
    log = found.partition.logs.get(ctx.broker_id) if ctx.broker_id in found.replicas else None
    if log is None:
        return _Partition(partition_index=index, error_code=constants.NOT_LEADER_OR_FOLLOWER,
                          active_producers=[])
    return _Partition(partition_index=index, error_code=constants.NONE, error_message=None, active_producers=[
        _Producer(producer_id=p.producer_id, producer_epoch=p.producer_epoch, last_sequence=p.last_sequence,
                  last_timestamp=p.last_timestamp, coordinator_epoch=p.coordinator_epoch,
                  current_txn_start_offset=p.current_txn_start_offset) for p in log.producers()])
