"""OffsetDelete: a group's committed offsets removed, except for topics its members subscribe to
(GROUP_SUBSCRIBED_TO_TOPIC), as Kafka's group coordinator (:meth:`GroupCoordinator.delete_offsets`)."""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.committed_offsets import partition_error
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.registry import handles

OffsetDeleteResponse = RESPONSES[ApiKey.OffsetDelete]
_Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_Partition = _Topic.OffsetDeleteResponsePartition


@handles(ApiKey.OffsetDelete, 0, 0)
async def handle_offset_delete(request: Any, ctx: RequestContext) -> Any:
    wanted = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    unknown = {tp: partition_error(ctx.cluster, tp.topic, tp.partition) for tp in wanted}
    group_error, errors = ctx.groups.delete_offsets(request.group_id, ctx.broker_id,
                                                    [tp for tp in wanted if not unknown[tp]])
    if group_error != constants.NONE:
        return OffsetDeleteResponse(version=ctx.api_version, error_code=group_error, throttle_time_ms=0, topics=[])
    return OffsetDeleteResponse(version=ctx.api_version, error_code=constants.NONE, throttle_time_ms=0,
                                topics=[
        _Topic(name=t.name, partitions=[
            _Partition(partition_index=p.partition_index,
                       error_code=unknown[TopicPartition(t.name, p.partition_index)]
                       or errors[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions]) for t in request.topics])
