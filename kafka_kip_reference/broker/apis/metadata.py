"""Metadata (KIP-232 epochs, auto-creation), DescribeTopicPartitions and DescribeCluster."""
from __future__ import annotations

import asyncio

from kafka.admin import ResourceType
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.features import KIP_232
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.acl import all_operations
from kafka_kip_reference.broker.apis.topics import TOPICS_PER_TURN
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.internal_topics import ensure_internal_topic, is_internal
from kafka_kip_reference.broker.model import ClusterError, MetadataImage, validate_topic_name
from kafka_kip_reference.broker.registry import handles

MetadataResponse = RESPONSES[ApiKey.Metadata]
_Broker = MetadataResponse.MetadataResponseBroker
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition
DescribeClusterResponse = RESPONSES[ApiKey.DescribeCluster]


@handles(ApiKey.Metadata, 0, 13)  # v9+ partition_epoch / max_partition_epoch (KIP-232); v10+ topic ids
async def handle_metadata(request, ctx: RequestContext):
    state = ctx.cluster
    version = ctx.api_version
    view = state.view(ctx.broker_id)
    if request.topics is None or (version == 0 and not request.topics):
        wanted = [(name, None) for name in sorted(view.topics)]
    else:  # each topic once, as Kafka reads a Metadata request's topics into a set
        wanted = list(dict.fromkeys((t.name, t.topic_id if version >= 10 else None) for t in request.topics))
    allow_create = ((request.allow_auto_topic_creation if version >= 4 else True)
                    and state.config.bool('auto.create.topics.enable'))
    epochs = state.honours(KIP_232)
    topics, known = [], view
    for count, (name, topic_id) in enumerate(wanted, 1):
        if count % TOPICS_PER_TURN == 0:
            await asyncio.sleep(0)  # auto-creating many topics: others are served meanwhile
            known = state.view(ctx.broker_id)
        topics.append(_topic(state, known, name, topic_id, allow_create and ctx.broker_id not in state.delayed, epochs))
    if version >= 8 and request.include_topic_authorized_operations:  # everything, without an authorizer
        for topic in topics:
            topic.authorized_operations = all_operations(ResourceType.TOPIC)
    asks_cluster = 8 <= version <= 10 and request.include_cluster_authorized_operations
    return MetadataResponse(
        version=version, throttle_time_ms=0, brokers=_brokers(view), cluster_id=state.cluster_id,
        controller_id=view.controller_id, topics=topics, error_code=constants.NONE,
        max_partition_epoch=view.max_partition_epoch if epochs else -1,
        authorized_operations=all_operations(ResourceType.CLUSTER) if asks_cluster else None)


def _brokers(view: MetadataImage) -> list:
    return [_Broker(node_id=a.node_id, host=a.host, port=a.port, rack=a.rack) for a in view.brokers]


def _topic(state, view: MetadataImage, name: str | None, topic_id, allow_create: bool, epochs: bool):
    if name is None and topic_id is not None:
        name = view.topic_names.get(topic_id)
        if name is None:
            return _Topic(error_code=constants.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id,
                          is_internal=False, partitions=[])
    found = view.topics.get(name)
    if found is None:
        try:
            validate_topic_name(name)
            if not allow_create:
                raise ClusterError(constants.UNKNOWN_TOPIC_OR_PARTITION, f'unknown topic {name!r}')
            if is_internal(name):  # as Kafka's AutoTopicCreationManager: with its partitions and configs
                ensure_internal_topic(state, name)
            else:
                state.create_topic(name, state.config.int('num.partitions'),
                                   state.config.int('default.replication.factor'))
            # what Apache Kafka 4.4 answers for a topic its request has auto-created
            error = constants.UNKNOWN_TOPIC_OR_PARTITION
        except ClusterError as exc:
            error = exc.error_code
        return _Topic(error_code=error, name=name, is_internal=is_internal(name), partitions=[])
    live = {a.node_id for a in view.brokers}
    partitions = [
        _Partition(error_code=constants.LEADER_NOT_AVAILABLE if p.leader < 0 else constants.NONE,
                   partition_index=i,
                   leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas),
                   isr_nodes=list(p.isr), offline_replicas=[r for r in p.replicas if r not in live],
                   partition_epoch=p.partition_epoch if epochs else -1)
        for i, p in enumerate(found.partitions)]
    return _Topic(error_code=constants.NONE, name=name, topic_id=found.topic_id,
                  is_internal=is_internal(name), partitions=partitions)


@handles(ApiKey.DescribeCluster, 0, 2)
async def handle_describe_cluster(request, ctx: RequestContext):
    state = ctx.cluster
    view = state.view(ctx.broker_id)
    brokers = [DescribeClusterResponse.DescribeClusterBroker(broker_id=a.node_id, host=a.host, port=a.port,
                                                             rack=a.rack, is_fenced=False)
               for a in view.brokers]
    return DescribeClusterResponse(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                                   error_message=None, endpoint_type=1, cluster_id=state.cluster_id,
                                   controller_id=view.controller_id, brokers=brokers,
                                   authorized_operations=all_operations(ResourceType.CLUSTER)
                                   if request.include_cluster_authorized_operations else None)


#: Kafka's ``max.request.partition.size.limit``: the most partitions one DescribeTopicPartitions answer holds.
MAX_RESPONSE_PARTITIONS = 2000
#: Authorized operations of a topic on a cluster without an authorizer (READ .. ALTER_CONFIGS), as the int bitfield
#: DescribeTopicPartitions carries.
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << operation for operation in all_operations(ResourceType.TOPIC))


@handles(ApiKey.DescribeTopicPartitions, 0, 0)
async def handle_describe_topic_partitions(request, ctx: RequestContext):
    """The partitions of the topics asked for (every topic if none), by topic name, at most
    ``response_partition_limit`` of them per answer; ``next_cursor`` says where the next answer starts."""
    response_class = RESPONSES[ApiKey.DescribeTopicPartitions]
    topic_class = response_class.DescribeTopicPartitionsResponseTopic
    view = ctx.cluster.view(ctx.broker_id)
    names = sorted({t.name for t in request.topics}) if request.topics else sorted(view.topics)
    cursor = request.cursor
    if cursor is not None:
        if cursor.partition_index < 0 or (request.topics and cursor.topic_name not in names):
            return response_class(version=ctx.api_version, throttle_time_ms=0, next_cursor=None, topics=[
                topic_class(error_code=constants.INVALID_REQUEST, name=name, is_internal=False, partitions=[],
                            topic_authorized_operations=TOPIC_AUTHORIZED_OPERATIONS) for name in names])
        names = [name for name in names if name >= cursor.topic_name]
    remaining = min(request.response_partition_limit, MAX_RESPONSE_PARTITIONS)
    topics, next_cursor = [], None
    for name in names:
        found = view.topics.get(name)
        if found is None:
            topics.append(topic_class(error_code=constants.UNKNOWN_TOPIC_OR_PARTITION, name=name,
                                      is_internal=False,
                                      partitions=[], topic_authorized_operations=TOPIC_AUTHORIZED_OPERATIONS))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if remaining <= 0:
            next_cursor = response_class.Cursor(topic_name=name, partition_index=start)
            break
        chosen = found.partitions[start:start + remaining]
        remaining -= len(chosen)
        topics.append(topic_class(error_code=constants.NONE, name=name, topic_id=found.topic_id,
                                  is_internal=is_internal(name),
                                  partitions=_described_partitions(view, chosen, start, topic_class),
                                  topic_authorized_operations=TOPIC_AUTHORIZED_OPERATIONS))
        if start + len(chosen) < len(found.partitions):
            next_cursor = response_class.Cursor(topic_name=name, partition_index=start + len(chosen))
            break
    return response_class(version=ctx.api_version, throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


def _described_partitions(view: MetadataImage, partitions, first_index: int, topic_class) -> list:
    live = {a.node_id for a in view.brokers}
    partition_class = topic_class.DescribeTopicPartitionsResponsePartition
    return [partition_class(error_code=constants.LEADER_NOT_AVAILABLE if p.leader < 0 else constants.NONE,
                            partition_index=first_index + i,
                            leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas),
                            isr_nodes=list(p.isr), eligible_leader_replicas=[], last_known_elr=[],
                            offline_replicas=[r for r in p.replicas if r not in live])
            for i, p in enumerate(partitions)]
