"""DescribeQuorum: the metadata quorum, as a KRaft cluster whose controller is the lowest live broker.

The reference cluster's controller is the broker Metadata names as the controller; it is the quorum's only voter
and leader (its epoch counts the controller changes), the other live brokers are observers, and the high
watermark counts the metadata changes so far (the offset the KRaft metadata log would be at).
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.registry import handles

METADATA_TOPIC = '__cluster_metadata'


@handles(ApiKey.DescribeQuorum, 0, 2)
async def handle_describe_quorum(request: Any, ctx: RequestContext) -> Any:
    response_class = RESPONSES[ApiKey.DescribeQuorum]
    topic_class = response_class.TopicData
    partition_class = topic_class.PartitionData
    topics = []
    for topic in request.topics:
        rows = []
        for wanted in topic.partitions:
            if topic.topic_name == METADATA_TOPIC and wanted.partition_index == 0:
                rows.append(_quorum(ctx, partition_class))
            else:
                rows.append(partition_class(
                    partition_index=wanted.partition_index, error_code=constants.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message='This server does not host this topic-partition.', leader_id=-1, leader_epoch=-1,
                    high_watermark=-1, current_voters=[], observers=[]))
        topics.append(topic_class(topic_name=topic.topic_name, partitions=rows))
    nodes = []
    if ctx.api_version >= 2 and ctx.cluster.controller_id >= 0:
        address = ctx.cluster.broker(ctx.cluster.controller_id)
        nodes.append(response_class.Node(node_id=address.node_id, listeners=[
            response_class.Node.Listener(name='PLAINTEXT', host=address.host, port=address.port)]))
    return response_class(version=ctx.api_version, error_code=constants.NONE, error_message=None,
                          topics=topics, nodes=nodes)


def _quorum(ctx: RequestContext, partition_class: type) -> Any:
    state = ctx.cluster
    offset, now = state.metadata_offset, state.now_ms()

    def replica(broker_id: int) -> Any:
        return partition_class.ReplicaState(
            replica_id=broker_id, replica_directory_id=state.directory_ids[broker_id], log_end_offset=offset,
            last_fetch_timestamp=now, last_caught_up_timestamp=now)

    controller = state.controller_id
    return partition_class(
        partition_index=0, error_code=constants.NONE, error_message=None, leader_id=controller,
        leader_epoch=state.controller_epoch, high_watermark=offset,
        current_voters=[replica(controller)] if controller >= 0 else [],
        observers=[replica(b) for b in state.live_broker_ids() if b != controller])
