"""Online upgrade and downgrade between classic and KIP-848 consumer groups, as Apache Kafka 4.4's group
coordinator makes them under ``group.consumer.migration.policy`` (default ``bidirectional``).

- **Upgrade**: a ConsumerGroupHeartbeat joining (epoch 0) a classic group *with members* turns it into a consumer
  group when the policy allows upgrades, the group uses the ``consumer`` embedded protocol and its members fit in
  ``group.consumer.max.size``. Each classic member becomes a member at the group's generation, keeping its
  assignment (also its target) and speaking the classic protocol on; the joining member then bumps the group
  epoch like any new member, and the classic members learn through REBALANCE_IN_PROGRESS that they must rejoin.
  Refusals are Kafka's GROUP_ID_NOT_FOUND with Kafka's messages. (An *empty* classic group, e.g. one holding only
  committed offsets, becomes a consumer group under any policy, as in Kafka.)
- **Downgrade**: when the last consumer-protocol member of a consumer group leaves or is fenced and classic
  members remain, the policy allowing it, the group becomes a classic group at the group epoch, each member
  holding its target assignment, and rebalances at once (the members rejoin through JoinGroup).

This module turns one kind of group into the other's members; the coordinators swap the groups in their table.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kafka.errors import GroupIdNotFoundError

from kafka_kip_reference.broker.consumer_groups import (
    ClassicProtocol,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupError,
    ConsumerMember,
    Topics,
)
from kafka_kip_reference.broker.embedded_protocol import (
    MalformedConsumerProtocol,
    decode_assignment,
    decode_subscription,
)

#: The protocol type of groups of consumers (Kafka's ``ConsumerProtocol.PROTOCOL_TYPE``).
CONSUMER_PROTOCOL_TYPE = 'consumer'


class ClassicMemberView(Protocol):
    """What an upgrade reads of a classic member (:class:`kafka_kip_reference.broker.groups.Member`)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes


class ClassicGroupView(Protocol):
    """What an upgrade reads of a classic group (:class:`kafka_kip_reference.broker.groups.Group`)."""

    group_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    members: Mapping[str, ClassicMemberView]


def _not_found(message: str) -> ConsumerGroupError:
    return ConsumerGroupError(GroupIdNotFoundError.errno, message)


def check_upgrade(group: ClassicGroupView, config: ConsumerGroupConfig) -> None:
    """Kafka's ``validateOnlineUpgrade``: raises :class:`ConsumerGroupError` GROUP_ID_NOT_FOUND where it refuses."""
    prefix = f'Cannot upgrade classic group {group.group_id} to consumer group because'
    if not config.upgrade_enabled:
        raise _not_found(f'{prefix} online upgrade is disabled.')
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise _not_found(f'{prefix} the group does not use the consumer embedded protocol.')
    if len(group.members) > config.max_size:
        raise _not_found(f'{prefix} the group size exceeds the consumer group maximum size.')


def upgraded_members(group: ClassicGroupView, topics: Topics) -> list[ConsumerMember]:
    """The classic members as members of a consumer group at the group's generation (Kafka's
    ``ConsumerGroup.fromClassicGroup``); GROUP_ID_NOT_FOUND if a subscription or assignment cannot be read."""
    members = []
    for classic in group.members.values():
        protocols = dict(classic.protocols)
        metadata = protocols.get(group.protocol_name or '', classic.protocols[0][1])
        try:
            subscription = decode_subscription(metadata)
            assigned = decode_assignment(classic.assignment)
        except MalformedConsumerProtocol:
            raise _not_found(f'Cannot upgrade classic group {group.group_id} to consumer group because the embedded '
                             'consumer protocol is malformed.') from None
        by_id = {}
        for topic, partitions in assigned.items():
            topic_id = topics.topic_id(topic)
            if topic_id is not None:
                by_id[topic_id] = frozenset(partitions)
        members.append(ConsumerMember(
            classic.member_id, instance_id=classic.group_instance_id, rack_id=subscription.rack_id,
            client_id=classic.client_id, rebalance_timeout_ms=classic.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(subscription.topics)), member_epoch=group.generation_id,
            previous_member_epoch=group.generation_id, assigned=by_id,
            classic=ClassicProtocol(classic.session_timeout_ms, classic.protocols)))
    return members


@dataclass(frozen=True)
class DowngradedMember:
    """A classic member of the classic group a downgrade makes: who it is and its assignment's bytes."""

    member_id: str
    instance_id: str | None
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes


def downgraded_members(group: ConsumerGroup) -> Iterable[DowngradedMember]:
    """The (classic) members of ``group``, each with its target assignment (Kafka's
    ``ClassicGroup.fromConsumerGroup``)."""
    for member in group.members.values():
        assert member.classic is not None, f'{member.member_id} does not speak the classic protocol'
        yield DowngradedMember(
            member.member_id, member.instance_id, member.client_id, member.classic.session_timeout_ms,
            member.rebalance_timeout_ms, member.classic.protocols,
            group.classic_assignment(member, group.target.get(member.member_id, {})))


__all__ = ['CONSUMER_PROTOCOL_TYPE', 'ClassicGroupView', 'DowngradedMember', 'check_upgrade', 'downgraded_members',
           'upgraded_members']
