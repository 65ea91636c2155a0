"""The contract between the reference cluster's brokers and its API handlers.

Handlers (the non-group APIs in :mod:`kafka_kip.testing.apis`, the group APIs in
:mod:`kafka_kip.testing.groups`) are coroutines::

    async def handler(request, ctx: RequestContext) -> response

``request`` is a decoded request object (``kafka_kip.protocol.messages.REQUESTS[api_key]``) and the
handler returns a response object of class ``RESPONSES[api_key]`` built with
``version=ctx.api_version``. The broker frames the response (header with ``ctx.correlation_id``) and
encodes it. A handler may await (JoinGroup waits for members, Fetch waits for data); requests from
one connection are still answered in order.

Group APIs (8 OffsetCommit, 9 OffsetFetch, 10 FindCoordinator, 11 JoinGroup, 12 Heartbeat,
13 LeaveGroup, 14 SyncGroup, 15 DescribeGroups, 16 ListGroups, 42 DeleteGroups) are dispatched to
``ctx.cluster.groups.HANDLERS[api_key]``; ``ctx.cluster.groups`` is a
``kafka_kip.testing.groups.GroupCoordinator(cluster_state)`` created by the cluster, and the versions
the brokers advertise for those keys are ``GroupCoordinator.API_VERSIONS: dict[api_key, (min, max)]``.
The cluster calls ``groups.forget_topic(name)`` after deleting a topic and ``groups.close()`` when it
shuts down.

Read API of the cluster state (``ctx.cluster``, a :class:`kafka_kip.testing.cluster.ClusterState`)
that handlers may use; every call runs on the cluster's loop thread, so no locking is needed:

- ``live_broker_ids() -> list[int]``: ids of running brokers, ascending.
- ``broker(broker_id) -> BrokerAddress``: ``.node_id``, ``.host``, ``.port``, ``.rack`` (None).
- ``coordinator_for(group_id: str) -> int``: broker id of the group coordinator (a stable hash over
  the live brokers; it moves when that broker stops). Returns -1 when no broker is live.
- ``topic_id(name) -> uuid.UUID | None``; ``topic_name(topic_id) -> str | None``.
- ``partitions(topic) -> int | None``: partition count, None if the topic does not exist.
- ``partition_epoch(topic, partition) -> int``: KIP-232 partition epoch, -1 if unknown.
- ``leader_epoch(topic, partition) -> int``: current leader epoch, -1 if unknown.
- ``high_watermark(topic, partition) -> int``; ``log_start_offset(topic, partition) -> int``: -1 if
  unknown (committed offsets are checked against them).
- ``view(broker_id) -> MetadataImage``: the metadata that broker acts on (frozen while its metadata
  is delayed by ``ReferenceCluster.delay_metadata``); ``.topics``, ``.brokers``, ``.controller_id``.
- ``now_ms() -> int``: wall clock in milliseconds.
- ``loop``: the cluster's asyncio event loop (for timers such as session timeouts).
- ``cluster_id: str``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafka_kip.testing.cluster import ClusterState

GROUP_API_KEYS: frozenset[int] = frozenset({8, 9, 10, 11, 12, 13, 14, 15, 16, 42})


@dataclass
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker_id: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    principal: str | None
    """SASL PLAIN user name of the connection, None when the connection is unauthenticated."""
    cluster: ClusterState
