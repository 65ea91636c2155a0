"""KIP-253 on the wire: LeaderEpochsForPartition and the position exchange carried by Heartbeat v4 and by
ConsumerGroupHeartbeat (tagged fields of both, docs/PROTOCOL.md).

Both are answered by the group coordinator (:class:`kafka_kip_reference.broker.groups.GroupCoordinator`); the prior
partitions of a partition and their leader epochs at the expansion are the controller's
(:attr:`kafka_kip_reference.broker.model.Partition.prior_epochs`).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka.structs import TopicPartition

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import LEADER_EPOCHS_FOR_PARTITION_API_KEY, RESPONSES
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.registry import handles

LeaderEpochsForPartitionResponse = RESPONSES[LEADER_EPOCHS_FOR_PARTITION_API_KEY]
_TopicResult = LeaderEpochsForPartitionResponse.LeaderEpochsForPartitionTopicResult
_PartitionResult = _TopicResult.LeaderEpochsForPartitionResult
_Prior = _PartitionResult.PriorPartitionEpoch


@handles(LEADER_EPOCHS_FOR_PARTITION_API_KEY, 0, 0)
async def handle_leader_epochs_for_partition(request: Any, ctx: RequestContext) -> Any:
    """Each partition's prior partitions with their leader epochs at its expansion (none: not created by one)."""
    error = ctx.groups.coordinator_error(request.group_id, ctx.broker_id)
    topics = []
    if error == constants.NONE:
        view = ctx.cluster.view(ctx.broker_id)
        for wanted in request.topics:
            results = []
            for index in wanted.partitions:
                found = view.partition(wanted.name, index)
                if found is None:
                    results.append(_PartitionResult(partition_index=index,
                                                    error_code=constants.UNKNOWN_TOPIC_OR_PARTITION,
                                                    prior_partitions=[]))
                    continue
                prior = sorted(found.partition.prior_epochs.items())
                results.append(_PartitionResult(partition_index=index, error_code=constants.NONE,
                                                prior_partitions=[
                    _Prior(partition_index=p, leader_epoch=epoch) for p, epoch in prior]))
            topics.append(_TopicResult(name=wanted.name, partitions=results))
    return LeaderEpochsForPartitionResponse(version=ctx.api_version, throttle_time_ms=0, error_code=error,
                                            topics=topics)


def exchange_positions(request: Any, response: Any, ctx: RequestContext, member_id: str) -> None:
    """KIP-253 for member ``member_id`` in good standing, in a Heartbeat v4 or a ConsumerGroupHeartbeat (the same
    tagged fields on both): store its reports, answer its needs and the group's."""
    needs = [TopicPartition(t.topic, p) for t in request.need_positions or () for p in t.partitions]
    reports = {TopicPartition(t.topic, p.partition_index): p.offset
               for t in request.positions or () for p in t.partitions}
    positions, needed = ctx.groups.exchange_positions(request.group_id, member_id, needs, reports)
    position_topic, need_topic = type(response).PositionTopic, type(response).NeedPositionTopic
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for tp, offset in sorted(positions.items()):
        by_topic[tp.topic].append(position_topic.PartitionPosition(partition_index=tp.partition, offset=offset))
    response.positions = [position_topic(topic=topic, partitions=partitions)
                          for topic, partitions in by_topic.items()] or None
    needed_by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in sorted(needed):
        needed_by_topic[tp.topic].append(tp.partition)
    response.need_positions = [need_topic(topic=topic, partitions=partitions)
                               for topic, partitions in needed_by_topic.items()] or None
