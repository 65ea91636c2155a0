"""The consumer protocol embedded in classic JoinGroup / SyncGroup (Kafka's ``ConsumerProtocol``), as the group
coordinator reads and writes it when a consumer group has classic members or a group changes protocol.

The coordinator reads a member's ``ConsumerProtocolSubscription`` (topics, owned partitions, rack) and writes its
assignment as a ``ConsumerProtocolAssignment`` of the version the member's subscription was written in (capped at
the assignment's highest version), as Kafka's ``ConsumerProtocol.serializeAssignment`` does.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription


class MalformedConsumerProtocol(ValueError):
    """Bytes that are not a ConsumerProtocolSubscription / Assignment."""


@dataclass(frozen=True)
class Subscription:
    """What the coordinator uses of a member's ConsumerProtocolSubscription."""

    version: int
    topics: tuple[str, ...]
    owned: tuple[tuple[str, int], ...]
    rack_id: str | None


def decode_subscription(metadata: bytes) -> Subscription:
    """A ConsumerProtocolSubscription of any version; :class:`MalformedConsumerProtocol` if it is none."""
    try:
        decoded = ConsumerProtocolSubscription.decode(metadata)
    except Exception as exc:  # kafka-python raises struct/index/value errors alike on short or bad bytes
        raise MalformedConsumerProtocol(f'not a ConsumerProtocolSubscription: {exc}') from None
    version = decoded.version or 0
    owned = tuple((tp.topic, p) for tp in (decoded.owned_partitions or ()) for p in tp.partitions) if version >= 1 \
        else ()
    return Subscription(version, tuple(decoded.topics or ()), owned, decoded.rack_id if version >= 3 else None)


def decode_assignment(assignment: bytes) -> dict[str, list[int]]:
    """A ConsumerProtocolAssignment as ``{topic: partitions}`` (empty bytes: no partitions)."""
    if not assignment:
        return {}
    try:
        decoded = ConsumerProtocolAssignment.decode(assignment)
    except Exception as exc:  # as above
        raise MalformedConsumerProtocol(f'not a ConsumerProtocolAssignment: {exc}') from None
    out: dict[str, list[int]] = {}
    for tp in decoded.assigned_partitions:
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return out


def encode_assignment(partitions: Mapping[str, Iterable[int]], subscription_version: int) -> bytes:
    """``{topic: partitions}`` as a ConsumerProtocolAssignment in the member's own protocol version."""
    version = min(max(subscription_version, 0), ConsumerProtocolAssignment.max_version)
    return ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=sorted(ps))
                             for topic, ps in sorted(partitions.items())],
        user_data=None, version=version).encode()


__all__ = ['MalformedConsumerProtocol', 'Subscription', 'decode_assignment', 'decode_subscription',
           'encode_assignment']
