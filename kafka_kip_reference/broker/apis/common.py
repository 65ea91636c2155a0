"""Checks every partition-level handler shares."""
from __future__ import annotations

from kafka_kip.protocol import constants
from kafka_kip_reference.broker.model import MetadataImage, PartitionView


def leader_partition(view: MetadataImage, broker_id: int, topic: str | None, index: int,
                     current_leader_epoch: int = constants.UNKNOWN_EPOCH) -> tuple[PartitionView | None, int]:
    """The partition if ``broker_id`` leads it in ``view``, else the error Kafka answers.

    As in Kafka's ``Partition.getLocalLog``, a replica checks the client's current leader epoch
    before its own leadership, so a follower answers FENCED/UNKNOWN_LEADER_EPOCH for a wrong epoch.
    """
    found = view.partition(topic, index) if topic is not None else None
    if found is None:
        return None, constants.UNKNOWN_TOPIC_OR_PARTITION
    if broker_id not in found.replicas:
        return found, constants.NOT_LEADER_OR_FOLLOWER
    if current_leader_epoch != constants.UNKNOWN_EPOCH:
        if current_leader_epoch < found.leader_epoch:
            return found, constants.FENCED_LEADER_EPOCH
        if current_leader_epoch > found.leader_epoch:
            return found, constants.UNKNOWN_LEADER_EPOCH
    if found.leader != broker_id:
        return found, constants.NOT_LEADER_OR_FOLLOWER
    return found, constants.NONE
