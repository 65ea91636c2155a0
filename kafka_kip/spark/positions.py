"""Positions in source partitions, and the JSON Spark checkpoints for them.

A streaming query's offsets are one JSON object per micro-batch boundary, kept in the query's checkpoint::

    {"orders": {"0": {"offset": 1200, "leaderEpoch": 3, "partitionEpoch": 17, "topicId": "5f0c..."}}}

``leaderEpoch`` (KIP-320) lets a restarted query check the offset is still in the log: the partition may
have been truncated by an unclean leader election while the query was down. ``partitionEpoch`` (KIP-232;
-1 on brokers without it) and ``topicId`` (KIP-516; absent when unknown) identify the incarnation of the
partition, so a deleted and recreated topic is not silently read from its new offset 0 on.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka.structs import TopicPartition

from kafka_kip.protocol.constants import UNKNOWN_EPOCH
from kafka_kip.structs import OffsetAndMetadata


@dataclass(frozen=True)
class Position:
    """An offset in a partition plus the epochs that make it checkable."""

    offset: int
    leader_epoch: int = UNKNOWN_EPOCH
    partition_epoch: int = UNKNOWN_EPOCH
    topic_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {'offset': self.offset, 'leaderEpoch': self.leader_epoch,
                               'partitionEpoch': self.partition_epoch}
        if self.topic_id is not None:
            out['topicId'] = self.topic_id
        return out

    @classmethod
    def from_json(cls, value: Any, where: str) -> Position:
        """Parse one partition's entry; ``where`` names it in the error."""
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(value)  # a plain Spark-style offset
        if not isinstance(value, Mapping) or not isinstance(value.get('offset'), int):
            raise ValueError(f'{where}: expected {{"offset": N, "leaderEpoch": E, ...}}, got {value!r}')
        return cls(value['offset'], int(value.get('leaderEpoch', UNKNOWN_EPOCH)),
                   int(value.get('partitionEpoch', UNKNOWN_EPOCH)), value.get('topicId'))

    def seek_target(self) -> OffsetAndMetadata:
        """What ``KafkaConsumer.seek`` takes to validate this position before fetching (KIP-320/232)."""
        return OffsetAndMetadata(self.offset, '', self.leader_epoch, partition_epoch=self.partition_epoch)


Positions = dict[TopicPartition, Position]


def to_spark(positions: Mapping[TopicPartition, Position]) -> dict[str, dict[str, dict[str, Any]]]:
    """The checkpoint JSON object (keys sorted: Spark compares offsets by their JSON text)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for tp in sorted(positions):
        out.setdefault(tp.topic, {})[str(tp.partition)] = positions[tp].to_json()
    return out


def from_spark(value: Mapping[str, Any]) -> Positions:
    """Parse :func:`to_spark`'s output (as read back from a checkpoint)."""
    positions: Positions = {}
    for topic, partitions in value.items():
        for partition, entry in partitions.items():
            positions[TopicPartition(topic, int(partition))] = Position.from_json(entry, f'{topic}-{partition}')
    return positions
