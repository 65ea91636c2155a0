"""InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit: adapters from the wire to
:class:`kafka_kip_reference.broker.transactions.TransactionCoordinator` (and, for TxnOffsetCommit, the group coordinator).

EndTxn v5 and TxnOffsetCommit v5+ are the client side of ``transaction.version`` 2 (KIP-890 part 2): the first
bumps the epoch, the second adds its group to the transaction; older versions keep the old path.

Requests of versions from before KIP-588 get INVALID_PRODUCER_EPOCH where newer ones get PRODUCER_FENCED, as
Kafka answers them.
"""
from __future__ import annotations

from typing import Any

from kafka.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    OperationNotAttemptedError,
    ProducerFencedError,
)
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.apis.groups import topic_name
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.groups import OffsetCommit
from kafka_kip_reference.broker.kafka_features import TRANSACTION_VERSION, TRANSACTIONS_V2
from kafka_kip_reference.broker.registry import handles

#: The first version of each API whose clients understand PRODUCER_FENCED (KIP-588).
_PRODUCER_FENCED_FROM = {ApiKey.InitProducerId: 4, ApiKey.AddPartitionsToTxn: 2, ApiKey.AddOffsetsToTxn: 2,
                         ApiKey.EndTxn: 2, ApiKey.TxnOffsetCommit: 3}


def _for_version(error: int, ctx: RequestContext) -> int:
    if error == ProducerFencedError.errno and ctx.api_version < _PRODUCER_FENCED_FROM[ctx.api_key]:
        return InvalidProducerEpochError.errno
    return error


@handles(ApiKey.InitProducerId, 0, 5)
async def handle_init_producer_id(request: Any, ctx: RequestContext) -> Any:
    """An idempotent producer gets a fresh producer id; a transactional one its id's next epoch."""
    response_class = RESPONSES[ApiKey.InitProducerId]
    if request.transactional_id is None:
        return response_class(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                              producer_id=ctx.cluster.allocate_producer_id(), producer_epoch=0)
    given_id, given_epoch = (request.producer_id, request.producer_epoch) if ctx.api_version >= 3 else (-1, -1)
    result = ctx.transactions.init_producer_id(request.transactional_id, request.transaction_timeout_ms, given_id,
                                               given_epoch, ctx.broker_id)
    return response_class(version=ctx.api_version, throttle_time_ms=0, error_code=_for_version(result.error, ctx),
                          producer_id=result.producer_id, producer_epoch=result.producer_epoch)


@handles(ApiKey.AddPartitionsToTxn, 0, 5)
async def handle_add_partitions_to_txn(request: Any, ctx: RequestContext) -> Any:
    """v0-v3: one transaction; v4+ (brokers' verification, also open to clients here): a batch of them."""
    response_class = RESPONSES[ApiKey.AddPartitionsToTxn]
    if ctx.api_version < 4:
        results = _add_partitions(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                  request.v3_and_below_producer_epoch, request.v3_and_below_topics, verify_only=False)
        return response_class(version=ctx.api_version, throttle_time_ms=0, results_by_topic_v3_and_below=results)
    return response_class(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                          results_by_transaction=[
        response_class.AddPartitionsToTxnResult(transactional_id=txn.transactional_id, topic_results=_add_partitions(
            ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, txn.verify_only))
        for txn in request.transactions])


def _add_partitions(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
                    topics: list[Any], verify_only: bool) -> list[Any]:
    wanted = [TopicPartition(t.name, p) for t in topics for p in t.partitions]
    unknown = {tp for tp in wanted if not 0 <= tp.partition < (ctx.cluster.partitions(tp.topic) or 0)}
    if unknown:  # Kafka's API layer: nothing is added when a partition does not exist
        errors = {tp: constants.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else OperationNotAttemptedError.errno
                  for tp in wanted}
    elif verify_only:
        errors = ctx.transactions.verify_partitions(transactional_id, producer_id, producer_epoch, wanted,
                                                    ctx.broker_id)
    else:
        error = ctx.transactions.add_partitions(transactional_id, producer_id, producer_epoch, wanted, ctx.broker_id)
        errors = dict.fromkeys(wanted, error)
    topic_class = RESPONSES[ApiKey.AddPartitionsToTxn].AddPartitionsToTxnTopicResult
    partition_class = topic_class.AddPartitionsToTxnPartitionResult
    return [topic_class(name=t.name, results_by_partition=[
        partition_class(partition_index=p, partition_error_code=_for_version(errors[TopicPartition(t.name, p)], ctx))
        for p in t.partitions]) for t in topics]


@handles(ApiKey.AddOffsetsToTxn, 0, 4)
async def handle_add_offsets_to_txn(request: Any, ctx: RequestContext) -> Any:
    error = ctx.transactions.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch,
                                         request.group_id, ctx.broker_id)
    return RESPONSES[ApiKey.AddOffsetsToTxn](version=ctx.api_version, throttle_time_ms=0,
                                             error_code=_for_version(error, ctx))


@handles(ApiKey.EndTxn, 0, 5)  # v5: transaction.version 2 (KIP-890 part 2), the epoch bumped and answered
async def handle_end_txn(request: Any, ctx: RequestContext) -> Any:
    end = ctx.transactions.end_transaction_v2 if ctx.api_version >= 5 else ctx.transactions.end_transaction
    result = end(request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
                 ctx.broker_id)
    return RESPONSES[ApiKey.EndTxn](version=ctx.api_version, throttle_time_ms=0,
                                    error_code=_for_version(result.error, ctx), producer_id=result.producer_id,
                                    producer_epoch=result.producer_epoch)


@handles(ApiKey.TxnOffsetCommit, 0, 6)  # v5+ adds the group to the transaction (transaction.version 2); v6 topic ids
async def handle_txn_offset_commit(request: Any, ctx: RequestContext) -> Any:
    """Offsets a transaction commits for a group: held by the group coordinator until the transaction ends.

    At v5+ on a cluster finalizing ``transaction.version`` 2 the group joins the producer's transaction here (no
    AddOffsetsToTxn); a refusal is every partition's error. v6 names topics by id (UNKNOWN_TOPIC_ID for others).
    """
    version = ctx.api_version
    v3 = version >= 3
    names = [topic_name(ctx, topic, ids_from=6) for topic in request.topics]
    known = [(topic, name) for topic, name in zip(request.topics, names, strict=True) if name is not None]
    error = constants.NONE
    if (version >= 5 and ctx.cluster.kafka_features.level(TRANSACTION_VERSION) >= TRANSACTIONS_V2
            and ctx.cluster.coordinator_for(request.group_id) == ctx.broker_id):
        error = implicit_add_error(ctx.transactions.add_implicitly(
            request.transactional_id, request.producer_id, request.producer_epoch, group_id=request.group_id))
    if error:
        errors = iter([error] * sum(len(topic.partitions) for topic, _ in known))
    else:
        commits = [OffsetCommit(name, p.partition_index, p.committed_offset,
                                p.committed_leader_epoch if version >= 2 else -1, p.committed_metadata)
                   for topic, name in known for p in topic.partitions]
        errors = iter(ctx.groups.commit_transactional_offsets(
            request.group_id, request.producer_id, request.member_id if v3 else '',
            request.group_instance_id if v3 else None, request.generation_id if v3 else -1, commits, ctx.broker_id))
    topic_class = RESPONSES[ApiKey.TxnOffsetCommit].TxnOffsetCommitResponseTopic
    partition_class = topic_class.TxnOffsetCommitResponsePartition
    return RESPONSES[ApiKey.TxnOffsetCommit](version=version, throttle_time_ms=0, topics=[
        topic_class(name=topic.name, topic_id=topic.topic_id if version >= 6 else None, partitions=[
            partition_class(partition_index=p.partition_index,
                            error_code=(_for_version(next(errors), ctx) if name is not None
                                        else constants.UNKNOWN_TOPIC_ID))
            for p in topic.partitions]) for topic, name in zip(request.topics, names, strict=True)])


def implicit_add_error(error: int) -> int:
    """A refused implicit add as Kafka's produce and offset paths answer it: a fenced epoch is INVALID_PRODUCER_EPOCH,
    a transaction still ending is retriable."""
    if error == ProducerFencedError.errno:
        return InvalidProducerEpochError.errno
    if error == ConcurrentTransactionsError.errno:
        return constants.NOT_ENOUGH_REPLICAS
    return error
