"""The KIP-848 side of the reference cluster's group coordinator: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

Consumer groups live in the same table as classic groups (:attr:`GroupCoordinator.groups`, one namespace of
group ids, offsets committed and fetched the same way), so a coordinator move, OffsetCommit, OffsetFetch,
ListGroups and DeleteGroups treat both kinds alike. A joining heartbeat to an *empty* classic group turns it into
a consumer group keeping its offsets, as Kafka does; to a classic group with members it makes Kafka's online
upgrade (:mod:`kafka_kip_reference.broker.group_migration`) or answers Kafka's GROUP_ID_NOT_FOUND where the
migration policy or the group refuses one. A consumer group whose last consumer-protocol member goes while
classic members remain is handed to :meth:`GroupTable.downgrade`.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from kafka.errors import GroupIdNotFoundError, NotCoordinatorError, RebalanceInProgressError

from kafka_kip.protocol import constants
from kafka_kip_reference.broker.committed_offsets import GroupOffsets
from kafka_kip_reference.broker.consumer_groups import (
    JOIN_EPOCH,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupError,
    HeartbeatRequest,
    HeartbeatResult,
    Timer,
    validate_heartbeat,
)
from kafka_kip_reference.broker.group_migration import check_upgrade, upgraded_members

if TYPE_CHECKING:
    from kafka_kip_reference.broker.config import BrokerConfig
    from kafka_kip_reference.broker.state import ClusterState


class GroupTable(Protocol):
    """What this coordinator needs of :class:`GroupCoordinator` (which owns it: typed here so the import is one-way)."""

    groups: dict[str, Any]
    offset_metadata_max_bytes: int

    def not_coordinator(self, group_id: str, broker_id: int) -> bool: ...

    def downgrade(self, group: ConsumerGroup) -> None: ...


def consumer_group_config(config: BrokerConfig) -> ConsumerGroupConfig:
    """The ``group.consumer.*`` broker configs as a :class:`ConsumerGroupConfig`."""
    return ConsumerGroupConfig(
        heartbeat_interval_ms=config.int('group.consumer.heartbeat.interval.ms'),
        session_timeout_ms=config.int('group.consumer.session.timeout.ms'),
        assignors=tuple(name.strip() for name in (config['group.consumer.assignors'] or '').split(',') if name.strip()),
        max_size=config.int('group.consumer.max.size'),
        migration_policy=config['group.consumer.migration.policy'] or 'bidirectional')


class ClusterTopics:
    """The cluster's topics as a consumer group reads them (:class:`kafka_kip_reference.broker.consumer_groups.Topics`)."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state

    def topic_id(self, name: str) -> uuid.UUID | None:
        return self._state.topic_id(name)

    def partitions(self, topic: str) -> int | None:
        return self._state.partitions(topic)

    def topic_names(self) -> Iterable[str]:
        return self._state.image().topics.keys()


class ConsumerGroupCoordinator:
    """ConsumerGroupHeartbeat and ConsumerGroupDescribe over :class:`GroupCoordinator`'s table of groups."""

    def __init__(self, groups: GroupTable, state: ClusterState, config: ConsumerGroupConfig) -> None:
        self._groups = groups
        self._state = state
        self._topics = ClusterTopics(state)
        self.config = config

    def _schedule(self, delay_ms: int, callback: Any) -> Timer:
        return self._state.loop.call_later(delay_ms / 1000, callback)

    def heartbeat(self, group_id: str, request: HeartbeatRequest, broker_id: int,
                  member_id_required: bool = True) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat; raises :class:`ConsumerGroupError` with Kafka's error and message.
        ``member_id_required`` from v1 on (the member generates its id, KIP-1082)."""
        validate_heartbeat(request, group_id, self.config, member_id_required)
        if self._groups.not_coordinator(group_id, broker_id):
            raise ConsumerGroupError(NotCoordinatorError.errno, f'This is not the coordinator of group {group_id}.')
        group = self._groups.groups.get(group_id)
        if group is not None and group.group_type != ConsumerGroup.group_type:
            if request.member_epoch != JOIN_EPOCH:
                raise ConsumerGroupError(GroupIdNotFoundError.errno, f'Group {group_id} is not a consumer group.')
            group = self._upgrade(group, broker_id)
        if group is None:
            if request.member_epoch != JOIN_EPOCH:
                raise ConsumerGroupError(GroupIdNotFoundError.errno, f'Consumer group {group_id} not found.')
            group = self._new_group(group_id, broker_id, GroupOffsets(self._state, self._groups.offset_metadata_max_bytes))
        return group.heartbeat(request)

    def _upgrade(self, classic: Any, broker_id: int) -> ConsumerGroup:
        """A joining heartbeat reached classic group ``classic``: an empty one becomes a consumer group with its
        offsets; one with members is upgraded online, or refused (:func:`check_upgrade`)."""
        if not classic.members:
            classic.close(dead=False)
            return self._new_group(classic.group_id, broker_id, classic.offsets)
        check_upgrade(classic, self.config)
        members = upgraded_members(classic, self._topics)
        # Parked joins and syncs learn that another rebalance began and rejoin (into the consumer group).
        classic.close(dead=False, parked_error=RebalanceInProgressError.errno)
        group = self._new_group(classic.group_id, broker_id, classic.offsets)
        group.adopt(classic.generation_id, members)
        return group

    def _new_group(self, group_id: str, broker_id: int, offsets: GroupOffsets) -> ConsumerGroup:
        group = ConsumerGroup(group_id, self._topics, self.config, self._schedule, offsets)
        group.coordinator_id = broker_id
        group.on_downgrade = self._groups.downgrade
        self._groups.groups[group_id] = group
        return group

    def describe(self, group_id: str, broker_id: int) -> tuple[int, str | None, ConsumerGroup | None]:
        """ConsumerGroupDescribe of one group: (error, message, the group)."""
        if self._groups.not_coordinator(group_id, broker_id):
            return NotCoordinatorError.errno, None, None
        group = self._groups.groups.get(group_id)
        if group is None:
            return GroupIdNotFoundError.errno, f'Group {group_id} not found.', None
        if not isinstance(group, ConsumerGroup):
            return GroupIdNotFoundError.errno, f'Group {group_id} is not a consumer group.', None
        return constants.NONE, None, group
