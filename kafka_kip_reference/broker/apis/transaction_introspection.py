"""DescribeTransactions and ListTransactions: the transaction coordinator's state as Kafka 4.4 reports it (KIP-664).

Each broker answers for the transactional ids it coordinates (``ClusterState.coordinator_for``), as a Kafka broker
answers for the ``__transaction_state`` partitions it leads; admin clients ask every broker and merge. A transaction
reports its partitions while it is open or being decided, and its start time unless it is Empty (Kafka clears both
when a transaction completes or the producer's epoch is bumped). ListTransactions filters by state names (unknown
ones are echoed back and match nothing), producer ids, v1's minimum duration and v2's transactional id pattern (a
full match; an invalid pattern is INVALID_REGULAR_EXPRESSION).
"""
from __future__ import annotations

import re
from typing import Any

from kafka.errors import TransactionalIdNotFoundError
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.consumer_groups import INVALID_REGULAR_EXPRESSION
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.registry import handles
from kafka_kip_reference.broker.transactions import Transaction, TxnState

DescribeTransactionsResponse = RESPONSES[ApiKey.DescribeTransactions]
_Described = DescribeTransactionsResponse.TransactionState
ListTransactionsResponse = RESPONSES[ApiKey.ListTransactions]
_Listed = ListTransactionsResponse.TransactionState
_DECIDING = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@handles(ApiKey.DescribeTransactions, 0, 0)
async def handle_describe_transactions(request: Any, ctx: RequestContext) -> Any:
    return DescribeTransactionsResponse(version=ctx.api_version, throttle_time_ms=0, transaction_states=[
        _described(ctx, transactional_id) for transactional_id in request.transactional_ids])


def _described(ctx: RequestContext, transactional_id: str) -> Any:
    txn = ctx.transactions.transactions.get(transactional_id)
    if transactional_id == '':
        error = constants.INVALID_REQUEST
    elif ctx.cluster.coordinator_for(transactional_id) != ctx.broker_id:
        error = constants.NOT_COORDINATOR
    elif txn is None:
        error = TransactionalIdNotFoundError.errno
    else:
        partitions = sorted(txn.partitions) if txn.state in _DECIDING else []
        topics = {tp.topic: [] for tp in partitions}
        for tp in partitions:
            topics[tp.topic].append(tp.partition)
        return _Described(error_code=constants.NONE, transactional_id=transactional_id,
                          transaction_state=txn.state.value,
                          transaction_timeout_ms=txn.timeout_ms, transaction_start_time_ms=_started_ms(txn),
                          producer_id=txn.producer_id, producer_epoch=txn.producer_epoch, topics=[
                              _Described.TopicData(topic=topic, partitions=indexes)
                              for topic, indexes in topics.items()])
    return _Described(error_code=error, transactional_id=transactional_id, transaction_state='',
                      transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0, producer_epoch=0,
                      topics=[])


def _started_ms(txn: Transaction) -> int:
    return -1 if txn.state is TxnState.EMPTY else txn.started_ms


@handles(ApiKey.ListTransactions, 0, 2)
async def handle_list_transactions(request: Any, ctx: RequestContext) -> Any:
    names = {state.value: state for state in TxnState}
    wanted_states = {names[name] for name in request.state_filters if name in names}
    unknown = [name for name in request.state_filters if name not in names]
    producer_ids = set(request.producer_id_filters)
    duration_ms = request.duration_filter if ctx.api_version >= 1 else -1
    pattern_text = request.transactional_id_pattern if ctx.api_version >= 2 else None
    pattern = None
    if pattern_text:
        try:
            pattern = re.compile(pattern_text)
        except re.error:
            return ListTransactionsResponse(version=ctx.api_version, throttle_time_ms=0,
                                            error_code=INVALID_REGULAR_EXPRESSION, unknown_state_filters=[],
                                            transaction_states=[])
    now_ms = ctx.cluster.now_ms()

    def included(txn: Transaction) -> bool:
        return (ctx.cluster.coordinator_for(txn.transactional_id) == ctx.broker_id
                and (not producer_ids or txn.producer_id in producer_ids)
                and (not request.state_filters or txn.state in wanted_states)
                and (duration_ms < 0 or now_ms - _started_ms(txn) > duration_ms)
                and (pattern is None or pattern.fullmatch(txn.transactional_id) is not None))
    return ListTransactionsResponse(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                                    unknown_state_filters=unknown, transaction_states=[
        _Listed(transactional_id=txn.transactional_id, producer_id=txn.producer_id,
                transaction_state=txn.state.value)
        for txn in ctx.transactions.transactions.values() if included(txn)])
