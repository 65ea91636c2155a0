"""KIP-1327 in classic groups: which partitions of a topic the group gained after it knew the topic.

KIP-1327 lets a consumer-protocol (KIP-848) group tell a partition created after the group from one that predates
it (the broker names the new ones in ConsumerGroupHeartbeat v2). A classic group has no such broker; the group
itself records which partitions of a topic it knew. A partition without a committed offset is **new** when its
number is at or above the *known count* of its topic, the higher of:

- the group's commits: the highest partition of the topic with a committed offset, plus one. They are the
  group's own record (every member's, kept by the coordinator) and survive any member's restart; kafka-python
  commits the position of every assigned partition (auto-commit, and before each rebalance), so a topic the
  group consumed is known at the partition count it had;
- this member's previous assignments: the highest partition of the topic it held before, plus one. It covers a
  member that has not committed yet (auto-commit off, or the first auto-commit interval).

A topic the group knows neither way is new to the group: its partitions are as old as the group's interest in
it and keep ``auto_offset_reset``'s meaning, as does a partition below the known count that the group never
committed. Partitions are only ever added (Kafka cannot remove them), so the partitions at or above the known
count were created after the group saw the topic.

Why not the classic assignor's userdata: it belongs to the assignor the group's members share, Java's and
kafka-python's alike (the sticky assignors keep their own state there); a kafka_kip field in it would break
groups that mix clients. The one case the commits and memory miss: a restarted member of a group that never
committed a partition above the highest committed one treats it as new (reads it from its start: re-reads,
never loses).

Rules only, no I/O: the coordinator reads the commits and applies the policy
(:mod:`kafka_kip.consumer.coordinator`, :mod:`kafka_kip.consumer.reset`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafka.structs import TopicPartition


def counted(counts: Mapping[str, int], partitions: Iterable[TopicPartition]) -> dict[str, int]:
    """``counts`` (topic -> partitions known) raised to cover ``partitions``: known counts from the committed
    partitions and the held counts, or held counts updated with an assignment."""
    result = dict(counts)
    for tp in partitions:
        result[tp.topic] = max(result.get(tp.topic, 0), tp.partition + 1)
    return result


def new_partitions(uncommitted: Iterable[TopicPartition], known: Mapping[str, int]) -> set[TopicPartition]:
    """The partitions of ``uncommitted`` (no committed offset) created after the group knew their topic."""
    return {tp for tp in uncommitted if tp.topic in known and tp.partition >= known[tp.topic]}


__all__ = ['counted', 'new_partitions']
