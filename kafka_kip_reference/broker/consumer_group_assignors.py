"""The server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range``, as Apache Kafka names them.

An assignor maps the group's members (their subscriptions and previous target assignments) and the subscribed
topics' partition counts to a new target assignment. Both are pure functions of their inputs, so the reference
broker's assignments are reproducible and unit tests can state them exactly.

- ``uniform`` (Kafka's default): balanced and sticky. Every member keeps the partitions of its previous target
  assignment that still exist and that it still subscribes to; unassigned partitions then go, in (topic id,
  partition) order, to the eligible member holding fewest partitions (ties: the smallest member id); finally
  partitions move from a member holding two or more above an eligible member to that member until no such
  pair is left. With identical subscriptions every member ends with ⌊P/N⌋ or ⌈P/N⌉ partitions.
- ``range``: per topic, the members subscribed to it sorted by member id get contiguous ranges, the first
  ``P mod N`` of them one partition more (Kafka's range semantics, co-partitioned topics land together).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: A member's partitions: topic id -> partition indexes.
Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class MemberSpec:
    """What an assignor knows of one member: the topic ids it subscribes to and its previous target."""

    subscribed: frozenset[uuid.UUID]
    previous: Mapping[uuid.UUID, frozenset[int]]


#: ``assign(members, partition_counts) -> {member_id: assignment}``; every member gets an entry.
Assignor = Callable[[Mapping[str, MemberSpec], Mapping[uuid.UUID, int]], dict[str, Assignment]]


def _freeze(held: dict[str, set[tuple[uuid.UUID, int]]]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for member_id, partitions in held.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, partition in partitions:
            by_topic.setdefault(topic_id, set()).add(partition)
        out[member_id] = {topic_id: frozenset(indexes) for topic_id, indexes in by_topic.items()}
    return out


def uniform(members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """Kafka's ``uniform`` assignor semantics: balanced, keeping previous assignments where balance allows."""
    order = sorted(members)
    held: dict[str, set[tuple[uuid.UUID, int]]] = {member_id: set() for member_id in order}
    owner: dict[tuple[uuid.UUID, int], str] = {}
    for member_id in order:
        spec = members[member_id]
        for topic_id, partitions in spec.previous.items():
            if topic_id not in spec.subscribed or topic_id not in partition_counts:
                continue
            for partition in sorted(partitions):
                tp = (topic_id, partition)
                if partition < partition_counts[topic_id] and tp not in owner:
                    owner[tp] = member_id
                    held[member_id].add(tp)

    def eligible(topic_id: uuid.UUID) -> list[str]:
        return [m for m in order if topic_id in members[m].subscribed]

    all_partitions = [(topic_id, p) for topic_id in sorted(partition_counts) for p in range(partition_counts[topic_id])]
    for tp in all_partitions:
        if tp in owner:
            continue
        candidates = eligible(tp[0])
        if candidates:
            chosen = min(candidates, key=lambda m: (len(held[m]), m))
            owner[tp] = chosen
            held[chosen].add(tp)
    # Balance: a member holding two or more partitions above an eligible member gives it one, most loaded first.
    moved = True
    while moved:
        moved = False
        for member_id in sorted(order, key=lambda m: (-len(held[m]), m)):
            for tp in sorted(held[member_id], reverse=True):
                candidates = [m for m in eligible(tp[0]) if len(held[m]) + 1 < len(held[member_id])]
                if candidates:
                    target = min(candidates, key=lambda m: (len(held[m]), m))
                    held[member_id].discard(tp)
                    held[target].add(tp)
                    moved = True
                    break
            if moved:
                break
    return _freeze(held)


def range_(members: Mapping[str, MemberSpec], partition_counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """Kafka's ``range`` assignor semantics: per topic, contiguous ranges over the subscribers by member id."""
    held: dict[str, set[tuple[uuid.UUID, int]]] = {member_id: set() for member_id in members}
    for topic_id in sorted(partition_counts):
        subscribers = sorted(m for m, spec in members.items() if topic_id in spec.subscribed)
        if not subscribers:
            continue
        quota, extra = divmod(partition_counts[topic_id], len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            count = quota + (1 if i < extra else 0)
            held[member_id].update((topic_id, p) for p in range(start, start + count))
            start += count
    return _freeze(held)


#: The server-side assignors by the names clients ask for (``group.remote.assignor``).
ASSIGNORS: dict[str, Assignor] = {'uniform': uniform, 'range': range_}
