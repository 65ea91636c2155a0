"""``group_protocol`` (Java's ``group.protocol``) and the settings that go with it, checked at construction.

``'classic'`` (the default): JoinGroup/SyncGroup/Heartbeat, a member of the group assigns the partitions
(``partition_assignment_strategy``), the client chooses ``session_timeout_ms`` and ``heartbeat_interval_ms``.
``'consumer'``: KIP-848's ConsumerGroupHeartbeat, the group coordinator assigns the partitions
(``group_remote_assignor``: 'uniform' or 'range', None for the broker's default) and dictates session timeout
and heartbeat interval (the broker's ``group.consumer.*`` configs). As Java's consumer does, the classic-only
settings given with ``'consumer'`` and ``group_remote_assignor`` given with ``'classic'`` are refused.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka.errors import KafkaConfigurationError

CLASSIC, CONSUMER = 'classic', 'consumer'
GROUP_PROTOCOLS = (CLASSIC, CONSUMER)
#: The server-side assignors ``group_remote_assignor`` names (Apache Kafka's and the reference cluster's).
REMOTE_ASSIGNORS = ('uniform', 'range')
#: Settings only the classic protocol has: with 'consumer' the coordinator assigns and dictates the timing.
CLASSIC_ONLY_SETTINGS = ('partition_assignment_strategy', 'session_timeout_ms', 'heartbeat_interval_ms')


def parse_group_protocol(configs: Mapping[str, Any]) -> str:
    """The group protocol ``configs`` ask for ('classic' or 'consumer', any case), after checking the settings that
    depend on it; ``KafkaConfigurationError`` naming the bad setting and what is accepted otherwise."""
    protocol = configs.get('group_protocol', CLASSIC)
    if not isinstance(protocol, str) or protocol.lower() not in GROUP_PROTOCOLS:
        raise KafkaConfigurationError(
            f"group_protocol must be one of {', '.join(map(repr, GROUP_PROTOCOLS))}, got {protocol!r}")
    protocol = protocol.lower()
    assignor = configs.get('group_remote_assignor')
    if protocol == CLASSIC:
        if assignor is not None:
            raise KafkaConfigurationError(
                f"group_remote_assignor={assignor!r} needs group_protocol='consumer' (with 'classic' the members "
                'assign the partitions: partition_assignment_strategy)')
        return protocol
    for setting in CLASSIC_ONLY_SETTINGS:
        if setting in configs:
            raise KafkaConfigurationError(
                f"{setting} is not supported with group_protocol='consumer': the group coordinator assigns the "
                'partitions (group_remote_assignor) and dictates session timeout and heartbeat interval (its '
                f'group.consumer.* configs); remove {setting} or use group_protocol=\'classic\'')
    if assignor is not None and assignor not in REMOTE_ASSIGNORS:
        raise KafkaConfigurationError(
            f"group_remote_assignor must be one of {', '.join(map(repr, REMOTE_ASSIGNORS))} or None (the "
            f"broker's default), got {assignor!r}")
    return protocol
