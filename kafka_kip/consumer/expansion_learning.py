"""KIP-253: learning a topic's expansions from the group coordinator and the prior partitions' leaders.

LeaderEpochsForPartition (to the group coordinator) names, for every partition of the topic, its prior
partitions and their leader epochs at the expansion that created it; OffsetForLeaderEpoch (to each prior
partition's leader) turns each epoch into its end offset, the threshold. Runs on the client's I/O loop.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import kafka.errors as Errors
from kafka.structs import TopicPartition

from kafka_kip.consumer.expansion import Expansion, TopicExpansions, expansions_from_prior_epochs
from kafka_kip.errors import for_code
from kafka_kip.protocol import requests
from kafka_kip.protocol.constants import UNKNOWN_EPOCH


class LearningFailed(Errors.KafkaError):
    """A topic's expansions could not be learned this time (retried at a later poll)."""

    retriable = True


async def learn_topic(manager: Any, group_id: str, coordinator_id: Any, topic: str,
                      known: TopicExpansions | None) -> TopicExpansions:
    """``topic``'s expansions with their thresholds; thresholds already in ``known`` are not asked again."""
    cluster = manager.cluster
    partitions = sorted(cluster.partitions_for_topic(topic) or ())
    if not partitions:
        raise LearningFailed(f'no metadata for topic {topic!r}')
    known_epochs = {p: _leader_epoch(cluster, TopicPartition(topic, p)) for p in partitions}
    response = await manager.send(requests.leader_epochs_for_partition(group_id, topic, partitions),
                                  node_id=coordinator_id)
    if response.error_code:
        raise for_code(response.error_code)(f'LeaderEpochsForPartition for {topic!r}')
    prior = {}
    for answer in response.topics[0].partitions if response.topics else ():
        if answer.error_code:
            raise for_code(answer.error_code)(f'LeaderEpochsForPartition for {topic}-{answer.partition_index}')
        prior[answer.partition_index] = {q.partition_index: q.leader_epoch for q in answer.prior_partitions}
    previous = {(e.old_count, e.prior_epochs): e for e in (known.expansions if known else ())}
    expansions = []
    for old_count, epochs in expansions_from_prior_epochs(prior).items():
        expansion = previous.get((old_count, epochs))
        if expansion is None:
            thresholds = await _end_offsets(manager, topic, epochs)
            expansion = Expansion(old_count, epochs, tuple(thresholds[p] for p in range(old_count)))
        expansions.append(expansion)
    return TopicExpansions(len(partitions), tuple(expansions), known_epochs)


async def _end_offsets(manager: Any, topic: str, epochs: tuple[int, ...]) -> dict[int, int]:
    """The end offset of each prior partition's epoch, asked of its leader (OffsetForLeaderEpoch)."""
    by_leader: dict[Any, list[int]] = defaultdict(list)
    for partition in range(len(epochs)):
        leader = manager.cluster.leader_for_partition(TopicPartition(topic, partition))
        if leader is None or leader == -1:
            manager.cluster.request_update()
            raise LearningFailed(f'no leader known for {topic}-{partition}')
        by_leader[leader].append(partition)
    ends = {}
    for leader, partitions in by_leader.items():
        request = requests.offset_for_leader_epoch(
            (TopicPartition(topic, p), UNKNOWN_EPOCH, epochs[p]) for p in partitions)
        response = await manager.send(request, node_id=leader)
        for answer in response.topics[0].partitions:
            if answer.error_code:
                manager.cluster.request_update()
                raise for_code(answer.error_code)(f'OffsetForLeaderEpoch of {topic}-{answer.partition} at epoch '
                                                  f'{epochs[answer.partition]}')
            ends[answer.partition] = answer.end_offset
    return ends


def _leader_epoch(cluster: Any, tp: TopicPartition) -> int:
    epoch = cluster.leader_epoch_for_partition(tp)
    return -1 if epoch is None else epoch


__all__ = ['LearningFailed', 'learn_topic']
