"""Fetch: sessionless, long-polling on per-log waiters, with KIP-320 epoch checks and KIP-232 epochs.

As in Apache Kafka (``KafkaApis.handleFetchRequest``, ``ReplicaManager.readFromLog``), a request's topics are
looked up once, when it arrives: a v13+ topic id this broker does not know is answered UNKNOWN_TOPIC_ID and a
partition it does not know UNKNOWN_TOPIC_OR_PARTITION, and neither ends the wait for the other partitions.
Every read then finds the partition by the name found on arrival; if it has another topic id by then (the
topic was recreated while the request waited) the answer is INCONSISTENT_TOPIC_ID. A fetch by topic id
therefore never returns records of another incarnation of the topic; a fetch by name (v12 and before) reads
whatever the name stands for.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.features import KIP_232
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.apis.common import leader_partition
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.log import PartitionLog
from kafka_kip_reference.broker.model import MetadataImage
from kafka_kip_reference.broker.quota_throttling import fetch_quota
from kafka_kip_reference.broker.registry import handles

FetchResponse = RESPONSES[ApiKey.Fetch]
_Topic = FetchResponse.FetchableTopicResponse
_Partition = _Topic.PartitionData


@dataclass(frozen=True)
class _Arrived:
    """A requested topic as the broker found it when the request arrived."""

    name: str | None                 # None: a topic id the broker does not know
    topic_id: uuid.UUID | None       # the id the request named (v13+), else None
    known: frozenset[int]            # the requested partitions that existed then


# v12+ diverging epochs and partition_epoch (KIP-232); v13+ topic ids; v18's high watermark is for replicas
@handles(ApiKey.Fetch, 4, 18)
@fetch_quota
async def handle_fetch(request, ctx: RequestContext):
    version = ctx.api_version
    if request.session_id:
        # Sessions are never created (every response carries session id 0), so none can be named.
        return FetchResponse(version=version, throttle_time_ms=0,
                             error_code=constants.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    state = ctx.cluster
    loop = state.loop
    deadline = loop.time() + max(request.max_wait_ms, 0) / 1000
    topics = _unique_partitions(request.topics, by_id=version >= 13)
    max_bytes = min(request.max_bytes, state.config.int('fetch.max.bytes'))  # Kafka's broker-side bound
    arrived = _on_arrival(state.view(ctx.broker_id), topics, version)
    while True:
        view = state.view(ctx.broker_id)
        responses, size, logs, complete, leaders = _read(view, request, topics, arrived, max_bytes, ctx)
        if complete or size >= request.min_bytes or loop.time() >= deadline:
            break
        waiter = loop.create_future()
        timer = loop.call_later(deadline - loop.time(), _resolve, waiter)
        for log in logs:
            log.add_waiter(waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            for log in logs:
                log.remove_waiter(waiter)
    response = FetchResponse(version=version, throttle_time_ms=0, error_code=constants.NONE, session_id=0,
                             responses=responses)
    if leaders and version >= 16:
        response.node_endpoints = [
            FetchResponse.NodeEndpoint(node_id=a.node_id, host=a.host, port=a.port, rack=a.rack)
            for a in view.brokers if a.node_id in leaders]
    return response


def _resolve(waiter) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _unique_partitions(topics: list, by_id: bool) -> list[tuple[Any, list]]:
    """``[(topic, [partition, ...]), ...]`` of a request naming each partition once, as Kafka reads a Fetch (its
    partitions are a map: a repeated partition keeps its first place and its last fetch position); consecutive
    partitions of one topic share its entry."""
    latest: dict[tuple[Any, int], tuple[Any, Any]] = {}
    for topic in topics:
        for partition in topic.partitions:
            latest[topic.topic_id if by_id else topic.topic, partition.partition] = (topic, partition)
    if len(latest) == sum(len(topic.partitions) for topic in topics):
        return [(topic, topic.partitions) for topic in topics]
    grouped: list[tuple[Any, list]] = []
    for (name, _), (topic, partition) in latest.items():
        if grouped and (grouped[-1][0].topic_id if by_id else grouped[-1][0].topic) == name:
            grouped[-1][1].append(partition)
        else:
            grouped.append((topic, [partition]))
    return grouped


def _on_arrival(view: MetadataImage, topics: list[tuple[Any, list]], version: int) -> list[_Arrived]:
    arrived = []
    for topic, wanted_partitions in topics:
        topic_id = topic.topic_id if version >= 13 else None
        name = view.topic_names.get(topic_id) if version >= 13 else topic.topic
        known = frozenset(p.partition for p in wanted_partitions
                          if name is not None and view.partition(name, p.partition) is not None)
        arrived.append(_Arrived(name, topic_id, known))
    return arrived


def _error_partition(index: int, error: int):
    return _Partition(partition_index=index, error_code=error, high_watermark=-1, last_stable_offset=-1,
                      log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1, records=b'')


def _read(view: MetadataImage, request, topics: list[tuple[Any, list]], arrived: list[_Arrived], max_bytes: int,
          ctx: RequestContext):
    """One pass over the requested partitions: (responses, bytes, logs to wait on, complete, leaders).

    ``complete``: answer now (a partition could not be read, or none was known on arrival)."""
    version = ctx.api_version
    broker_id = ctx.broker_id
    epochs = ctx.cluster.honours(KIP_232)
    read_committed = request.isolation_level == constants.READ_COMMITTED
    size = 0
    complete = not any(topic.known for topic in arrived)
    logs: list[PartitionLog] = []
    leaders: set[int] = set()
    responses = []
    for (topic, wanted_partitions), found_topic in zip(topics, arrived, strict=True):
        name = found_topic.name
        partitions = []
        for wanted in wanted_partitions:
            if wanted.partition not in found_topic.known:
                partitions.append(_error_partition(
                    wanted.partition,
                    constants.UNKNOWN_TOPIC_ID if name is None else constants.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            found, error = leader_partition(view, broker_id, name, wanted.partition,
                                            wanted.current_leader_epoch)
            if (found is not None and found_topic.topic_id is not None and broker_id in found.replicas
                    and found.partition.topic_id != found_topic.topic_id):
                error = constants.INCONSISTENT_TOPIC_ID  # checked before leadership and epochs, as Kafka does
            if error:
                complete = True
                partition = _error_partition(wanted.partition, error)
                if error == constants.NOT_LEADER_OR_FOLLOWER and found is not None and found.leader >= 0:
                    partition.current_leader = _Partition.LeaderIdAndEpoch(
                        leader_id=found.leader, leader_epoch=found.leader_epoch)
                    leaders.add(found.leader)
                partitions.append(partition)
                continue
            log = found.partition.logs[broker_id]
            logs.append(log)
            high_watermark = log.high_watermark
            last_stable = log.last_stable_offset
            # read_committed consumers read up to the last stable offset; read_uncommitted ones the high watermark
            upper = last_stable if read_committed else high_watermark
            partition = _Partition(partition_index=wanted.partition, error_code=constants.NONE,
                                   high_watermark=high_watermark, last_stable_offset=last_stable,
                                   log_start_offset=log.log_start_offset, aborted_transactions=None,
                                   preferred_read_replica=-1, records=b'',
                                   partition_epoch=found.partition_epoch if epochs else -1)
            partitions.append(partition)
            offset = wanted.fetch_offset
            if version >= 12 and wanted.last_fetched_epoch >= 0:
                epoch, end_offset = log.end_offset_for_epoch(wanted.last_fetched_epoch)
                if end_offset == constants.UNKNOWN_OFFSET or epoch == constants.UNKNOWN_EPOCH:
                    partition.error_code = constants.OFFSET_OUT_OF_RANGE
                    complete = True
                    continue
                if epoch < wanted.last_fetched_epoch or end_offset < offset:
                    # KIP-320: the client's log diverged from ours; tell it where ours ends.
                    partition.diverging_epoch = _Partition.EpochEndOffset(epoch=epoch, end_offset=end_offset)
                    complete = True
                    continue
            if offset < log.log_start_offset or offset > log.log_end_offset:
                partition.error_code = constants.OFFSET_OUT_OF_RANGE
                complete = True
                continue
            limit = min(wanted.partition_max_bytes, max_bytes - size)
            if limit > 0 or size == 0:
                records = log.read(offset, max(limit, 0), upper, min_one=size == 0)
                partition.records = records
                size += len(records)
            if read_committed:
                partition.aborted_transactions = [
                    _Partition.AbortedTransaction(producer_id=aborted.producer_id, first_offset=aborted.first_offset)
                    for aborted in log.aborted_between(offset, upper)]
        responses.append(_Topic(topic=topic.topic, topic_id=topic.topic_id, partitions=partitions))
    return responses, size, logs, complete, leaders
