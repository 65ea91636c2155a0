"""Produce (with KIP-391 produce-with-offsets and KIP-253 partition counts; transactional batches are checked with
the transaction coordinator)."""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.bounds import MAX_RECORD_OFFSET
from kafka_kip.protocol import constants
from kafka_kip.protocol.features import KIP_253, KIP_391
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip.protocol.record_batch import TRANSACTIONAL_MASK
from kafka_kip_reference.broker.apis.common import leader_partition
from kafka_kip_reference.broker.apis.transactions import implicit_add_error
from kafka_kip_reference.broker.batches import InvalidBatch, rewrite
from kafka_kip_reference.broker.context import CloseConnection, RequestContext
from kafka_kip_reference.broker.internal_topics import is_internal
from kafka_kip_reference.broker.kafka_features import TRANSACTION_VERSION, TRANSACTIONS_V2
from kafka_kip_reference.broker.model import PartitionView, Topic
from kafka_kip_reference.broker.quota_throttling import produce_quota
from kafka_kip_reference.broker.record_validation import RecordErrors, rules_for, validate_batch_async
from kafka_kip_reference.broker.registry import handles
from kafka_kip_reference.broker.state import ClusterState

ProduceResponse = RESPONSES[ApiKey.Produce]
_TopicResponse = ProduceResponse.TopicProduceResponse
_PartitionResponse = _TopicResponse.PartitionProduceResponse
InitProducerIdResponse = RESPONSES[ApiKey.InitProducerId]


def may_produce_with_offsets(state: ClusterState, principal: str | None) -> bool:
    """KIP-391 REPLICATOR_WRITE without an authorizer: everyone, unless the cluster names the replicator principals
    (with an authorizer its ACLs decided before the handler ran, kafka_kip_reference.broker.authorization)."""
    return (state.authorizer is not None or state.replicator_principals is None
            or principal in state.replicator_principals)


# v9+ carries use_offset / log_end_offset (KIP-391); v12+ adds a transactional batch's partition to its
# transaction at transaction.version 2 (KIP-890 part 2); v13 topic ids. Kafka 4 advertises v0-v2 but refuses them
# (KAFKA-18659: librdkafka needs them listed).
@handles(ApiKey.Produce, 3, 13, advertised_min_version=0)
@produce_quota
async def handle_produce(request, ctx: RequestContext):
    state = ctx.cluster
    view = state.view(ctx.broker_id)
    # A broker without KIP-391 ignores the tag, as Kafka ignores unknown tagged fields.
    use_offset = bool(request.use_offset) and state.honours(KIP_391)
    acks = request.acks
    leaders: set[int] = set()
    responses = []
    for topic_data, partition_data in _distinct_partitions(request, ctx.api_version):
        if ctx.api_version >= 13:
            name = view.topic_names.get(topic_data.topic_id)
        else:
            name = topic_data.name
        partitions = []
        for data in partition_data:
            if acks not in (-1, 0, 1):
                partitions.append(refused(data.index, constants.INVALID_REQUIRED_ACKS))
            elif name is None:
                partitions.append(refused(data.index, constants.UNKNOWN_TOPIC_ID))
            else:
                partitions.append(await _produce_partition(state, ctx, name, data, acks, use_offset, leaders,
                                                           request.transactional_id, topic_data.partition_count))
        responses.append(_TopicResponse(name=topic_data.name, topic_id=topic_data.topic_id,
                                        partition_responses=partitions))
    if acks == 0:  # no answer is expected: a refusal closes the connection so that the producer notices (Kafka)
        refusals = sorted({p.error_code for t in responses for p in t.partition_responses if p.error_code})
        if refusals:
            raise CloseConnection(f'an acks=0 produce was refused with error codes {refusals}')
        return None
    response = ProduceResponse(version=ctx.api_version, responses=responses, throttle_time_ms=0)
    if leaders and ctx.api_version >= 10:
        response.node_endpoints = [
            ProduceResponse.NodeEndpoint(node_id=a.node_id, host=a.host, port=a.port, rack=a.rack)
            for a in view.brokers if a.node_id in leaders]
    return response


def _distinct_partitions(request, version: int) -> list[tuple]:
    """``(topic_data, [partition data])`` per topic with each partition once: as Kafka (a map by partition), a
    partition named twice is appended once, with the records given last."""
    topics: dict[object, tuple] = {}
    chosen: dict[tuple, object] = {}
    for topic_data in request.topic_data:
        key = topic_data.topic_id if version >= 13 else topic_data.name
        topics.setdefault(key, topic_data)
        for data in topic_data.partition_data:
            chosen[key, data.index] = data
    by_topic: dict[object, list] = {key: [] for key in topics}
    for (key, _), data in chosen.items():
        by_topic[key].append(data)
    return [(topics[key], partitions) for key, partitions in by_topic.items()]


def _partition_count_refusal(state: ClusterState, broker_id: int, name: str, partition_count: int) -> str:
    """KIP-253: why a batch is refused for the partition count it was partitioned with ('' if it is not).

    A broker without the extension ignores the tag, as Kafka ignores unknown tagged fields; -1 is "not sent".
    """
    topic = state.view(broker_id).topics.get(name)
    if partition_count < 0 or topic is None or not state.honours(KIP_253):
        return ''
    current = len(topic.partitions)
    if partition_count == current:
        return ''
    return f'topic {name!r} has {current} partitions; the records were partitioned for {partition_count}'


async def _produce_partition(state: ClusterState, ctx: RequestContext, name: str, data, acks: int, use_offset: bool,
                             leaders: set[int], transactional_id: str | None, partition_count: int):
    broker_id = ctx.broker_id
    if is_internal(name) and state.view(broker_id).partition(name, data.index) is not None:
        return refused(data.index,
                       constants.INVALID_TOPIC_EXCEPTION)  # Kafka: "Cannot append to internal topic"
    found, refusal = _leader_or_refusal(state, broker_id, name, data.index, leaders)
    if refusal:
        return refusal
    if use_offset and not may_produce_with_offsets(state, ctx.principal):
        return refused(data.index, constants.CLUSTER_AUTHORIZATION_FAILED,
                       'producing with offsets requires REPLICATOR_WRITE')
    topic = state.view(broker_id).topics[name].topic
    rules = rules_for(topic, state.config, data.index, state.now_ms(), use_offset, broker_id)
    try:
        validated = await validate_batch_async(bytes(data.records or b''), rules, state.large_batch_lock)
    except RecordErrors as exc:
        return refused(data.index, exc.error_code, str(exc), record_errors=[
            _PartitionResponse.BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=message)
            for index, message in exc.record_errors])
    except InvalidBatch as exc:
        return refused(data.index, exc.error_code, str(exc))
    # a large compressed batch let other requests run while it was validated: the leader may have moved
    found, refusal = _leader_or_refusal(state, broker_id, name, data.index, leaders)
    if refusal:
        return refusal
    # (checked last, with no await before the append: the topic may have grown while the batch was validated)
    stale_count = _partition_count_refusal(state, broker_id, name, partition_count)
    if stale_count:
        return refused(data.index, constants.INVALID_PARTITION_COUNT, stale_count)
    records, header = validated.records, validated.header
    log = found.partition.logs[broker_id]
    try:
        if acks == -1 and state.effective_isr(found, broker_id) < _effective_min_isr(found, topic, broker_id):
            return refused(data.index, constants.NOT_ENOUGH_REPLICAS)
        if header.attributes & TRANSACTIONAL_MASK:
            error = _transaction_error(ctx, transactional_id, header, TopicPartition(name, data.index),
                                       implicit=ctx.api_version >= 12 and state.kafka_features.level(
                                           TRANSACTION_VERSION) >= TRANSACTIONS_V2)
            if error:
                return refused(data.index, error)
        duplicate_of = log.check_sequence(header)
    except InvalidBatch as exc:
        return refused(data.index, exc.error_code, str(exc))
    if duplicate_of is not None:
        return _PartitionResponse(index=data.index, error_code=constants.NONE, base_offset=duplicate_of,
                                  log_append_time_ms=-1, log_start_offset=log.log_start_offset,
                                  log_end_offset=_reported_log_end(state, log))
    if use_offset:
        base_offset = header.base_offset
        if base_offset < log.log_end_offset:
            return refused(data.index, constants.INVALID_PRODUCE_OFFSET,
                           f'offset {base_offset} is below the log end offset {log.log_end_offset}',
                           log_end_offset=log.log_end_offset, log_start_offset=log.log_start_offset)
    else:
        base_offset = log.log_end_offset
    if base_offset + header.last_offset_delta > MAX_RECORD_OFFSET:  # the log end offset after it would overflow
        return refused(data.index, constants.INVALID_RECORD,
                       f'Batch has an invalid offset range: [{base_offset}, {base_offset + header.last_offset_delta}]'
                       f'; a record offset must be in 0..{MAX_RECORD_OFFSET}')
    append_time = state.now_ms() if topic.config('message.timestamp.type', ctx.broker_id) == 'LogAppendTime' else None
    batch = rewrite(records, base_offset, found.leader_epoch, append_time)
    stored = header._replace(base_offset=base_offset, partition_leader_epoch=found.leader_epoch,
                             max_timestamp=header.max_timestamp if append_time is None else append_time)
    state.append(found, broker_id, batch, stored)
    return _PartitionResponse(index=data.index, error_code=constants.NONE, base_offset=base_offset,
                              log_append_time_ms=-1 if append_time is None else append_time,
                              log_start_offset=log.log_start_offset,
                              log_end_offset=_reported_log_end(state, log))


def refused(index: int, error_code: int, message: str | None = None, **fields):
    """A partition's refusal as Kafka answers it: base offset -1, nothing appended."""
    return _PartitionResponse(index=index, error_code=error_code, error_message=message, base_offset=-1, **fields)


def _effective_min_isr(found: PartitionView, topic: Topic, broker_id: int) -> int:
    """The in-sync replicas an acks=all append needs: the topic's ``min.insync.replicas``, at most the partition's
    replicas (Kafka's ``Partition.effectiveMinIsr``: a one-replica topic with ``min.insync.replicas=2`` is
    written)."""
    return min(int(topic.config('min.insync.replicas', broker_id)), len(found.partition.replicas))


def _leader_or_refusal(state: ClusterState, broker_id: int, name: str, index: int, leaders: set[int]):
    """``(partition, None)`` when ``broker_id`` leads the partition, else ``(None, the refusal to answer)``."""
    found, error = leader_partition(state.view(broker_id), broker_id, name, index)
    if not error:
        return found, None
    response = refused(index, error)
    if error == constants.NOT_LEADER_OR_FOLLOWER and found is not None and found.leader >= 0:
        response.current_leader = _PartitionResponse.LeaderIdAndEpoch(leader_id=found.leader,
                                                                      leader_epoch=found.leader_epoch)
        leaders.add(found.leader)
    return None, response


def _transaction_error(ctx: RequestContext, transactional_id: str | None, header, tp: TopicPartition,
                       implicit: bool) -> int:
    """A transactional batch belongs to its producer's open transaction with ``tp`` in it (KIP-890 verification);
    ``implicit`` (Produce v12+ at ``transaction.version`` 2, KIP-890 part 2): the batch adds ``tp`` to it."""
    if transactional_id is None:
        return constants.INVALID_RECORD
    if implicit:
        return implicit_add_error(ctx.transactions.add_implicitly(
            transactional_id, header.producer_id, header.producer_epoch, partitions=(tp,)))
    error = ctx.transactions.verify_produce(transactional_id, header.producer_id, header.producer_epoch, tp)
    if error == constants.INVALID_TXN_STATE and ctx.api_version >= 11:
        return constants.TRANSACTION_ABORTABLE  # v11+ clients abort the transaction and go on (KIP-890 part 1)
    return error


def _reported_log_end(state: ClusterState, log) -> int:
    """KIP-391's ``log_end_offset`` of a produce answer; -1 (not sent) by a broker without the extension."""
    return log.log_end_offset if state.honours(KIP_391) else -1
