"""Produce (with KIP-391 produce-with-offsets; transactional batches are checked with the transaction coordinator)."""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.protocol.features import KIP_391
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip.protocol.record_batch import TRANSACTIONAL_MASK
from kafka_kip.testing.apis.common import leader_partition
from kafka_kip.testing.batches import InvalidBatch, rewrite, validate_produced
from kafka_kip.testing.codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    CORRUPT_MESSAGE,
    INVALID_PRODUCE_OFFSET,
    INVALID_RECORD,
    INVALID_REQUIRED_ACKS,
    MESSAGE_TOO_LARGE,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_ID,
)
from kafka_kip.testing.context import RequestContext
from kafka_kip.testing.model import MetadataImage
from kafka_kip.testing.registry import handles
from kafka_kip.testing.state import ClusterState

ProduceResponse = RESPONSES[0]
_TopicResponse = ProduceResponse.TopicProduceResponse
_PartitionResponse = _TopicResponse.PartitionProduceResponse
InitProducerIdResponse = RESPONSES[22]


def may_produce_with_offsets(state: ClusterState, principal: str | None) -> bool:
    """KIP-391 REPLICATOR_WRITE: everyone unless the cluster names the replicator principals."""
    return state.replicator_principals is None or principal in state.replicator_principals


# v9+ carries use_offset / log_end_offset (KIP-391); v13 topic ids. Kafka 4 advertises v0-v2 but refuses them
# (KAFKA-18659: librdkafka needs them listed).
@handles(ApiKey.Produce, 3, 13, advertised_min_version=0)
async def handle_produce(request, ctx: RequestContext):
    state = ctx.cluster
    view = state.view(ctx.broker_id)
    # A broker without KIP-391 ignores the tag, as Kafka ignores unknown tagged fields.
    use_offset = bool(request.use_offset) and state.honours(KIP_391)
    acks = request.acks
    leaders: set[int] = set()
    responses = []
    for topic_data in request.topic_data:
        if ctx.api_version >= 13:
            name = view.topic_names.get(topic_data.topic_id)
        else:
            name = topic_data.name
        partitions = []
        for data in topic_data.partition_data:
            if acks not in (-1, 0, 1):
                partitions.append(_PartitionResponse(index=data.index, error_code=INVALID_REQUIRED_ACKS))
            elif name is None:
                partitions.append(_PartitionResponse(index=data.index, error_code=UNKNOWN_TOPIC_ID))
            else:
                partitions.append(_produce_partition(state, ctx, view, name, data, acks, use_offset, leaders,
                                                     request.transactional_id))
        responses.append(_TopicResponse(name=topic_data.name, topic_id=topic_data.topic_id,
                                        partition_responses=partitions))
    if acks == 0:
        return None
    response = ProduceResponse(version=ctx.api_version, responses=responses, throttle_time_ms=0)
    if leaders and ctx.api_version >= 10:
        response.node_endpoints = [
            ProduceResponse.NodeEndpoint(node_id=a.node_id, host=a.host, port=a.port, rack=a.rack)
            for a in view.brokers if a.node_id in leaders]
    return response


def _produce_partition(state: ClusterState, ctx: RequestContext, view: MetadataImage, name: str, data,
                       acks: int, use_offset: bool, leaders: set[int], transactional_id: str | None):
    broker_id = ctx.broker_id
    found, error = leader_partition(view, broker_id, name, data.index)
    if error:
        response = _PartitionResponse(index=data.index, error_code=error)
        if error == NOT_LEADER_OR_FOLLOWER and found is not None and found.leader >= 0:
            response.current_leader = _PartitionResponse.LeaderIdAndEpoch(
                leader_id=found.leader, leader_epoch=found.leader_epoch)
            leaders.add(found.leader)
        return response
    records = data.records
    if not records:
        return _PartitionResponse(index=data.index, error_code=CORRUPT_MESSAGE)
    records = bytes(records)
    topic = view.topics[name].topic
    if len(records) > int(topic.config('max.message.bytes')):
        return _PartitionResponse(index=data.index, error_code=MESSAGE_TOO_LARGE)
    if use_offset and not may_produce_with_offsets(state, ctx.principal):
        return _PartitionResponse(index=data.index, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                  error_message='producing with offsets requires REPLICATOR_WRITE')
    log = found.partition.logs[broker_id]
    try:
        header = validate_produced(records, with_offsets=use_offset)
        if acks == -1 and state.effective_isr(found, broker_id) < int(topic.config('min.insync.replicas')):
            return _PartitionResponse(index=data.index, error_code=NOT_ENOUGH_REPLICAS)
        if header.attributes & TRANSACTIONAL_MASK:
            error = _transaction_error(ctx, transactional_id, header, TopicPartition(name, data.index))
            if error:
                return _PartitionResponse(index=data.index, error_code=error)
        duplicate_of = log.check_sequence(header)
    except InvalidBatch as exc:
        return _PartitionResponse(index=data.index, error_code=exc.error_code, error_message=str(exc))
    if duplicate_of is not None:
        return _PartitionResponse(index=data.index, error_code=NONE, base_offset=duplicate_of,
                                  log_append_time_ms=-1, log_start_offset=log.log_start_offset,
                                  log_end_offset=_reported_log_end(state, log))
    if use_offset:
        base_offset = header.base_offset
        if base_offset < log.log_end_offset:
            return _PartitionResponse(
                index=data.index, error_code=INVALID_PRODUCE_OFFSET, log_end_offset=log.log_end_offset,
                log_start_offset=log.log_start_offset,
                error_message=f'offset {base_offset} is below the log end offset {log.log_end_offset}')
    else:
        base_offset = log.log_end_offset
    append_time = state.now_ms() if topic.config('message.timestamp.type') == 'LogAppendTime' else None
    batch = rewrite(records, base_offset, found.leader_epoch, append_time)
    stored = header._replace(base_offset=base_offset, partition_leader_epoch=found.leader_epoch,
                             max_timestamp=header.max_timestamp if append_time is None else append_time)
    state.append(found, broker_id, batch, stored)
    return _PartitionResponse(index=data.index, error_code=NONE, base_offset=base_offset,
                              log_append_time_ms=-1 if append_time is None else append_time,
                              log_start_offset=log.log_start_offset,
                              log_end_offset=_reported_log_end(state, log))


def _transaction_error(ctx: RequestContext, transactional_id: str | None, header, tp: TopicPartition) -> int:
    """A transactional batch belongs to its producer's open transaction with ``tp`` in it (KIP-890 verification)."""
    if transactional_id is None:
        return INVALID_RECORD
    return ctx.transactions.verify_produce(transactional_id, header.producer_id, header.producer_epoch, tp)


def _reported_log_end(state: ClusterState, log) -> int:
    """KIP-391's ``log_end_offset`` of a produce answer; -1 (not sent) by a broker without the extension."""
    return log.log_end_offset if state.honours(KIP_391) else -1
