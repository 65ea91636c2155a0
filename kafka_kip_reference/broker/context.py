"""The contract between the reference cluster's brokers and its API handlers.

Handlers live in :mod:`kafka_kip_reference.broker.apis`, one registry entry per API key
(:func:`kafka_kip_reference.broker.registry.handles`), and are coroutines::

    async def handler(request, ctx: RequestContext) -> response | None

``request`` is a decoded request object (``kafka_kip.protocol.messages.REQUESTS[api_key]``) and the
handler returns a response object of class ``RESPONSES[api_key]`` built with ``version=ctx.api_version``
(None: no response, as for an acks=0 Produce). The broker frames and encodes it. A handler may await
(JoinGroup waits for members, Fetch waits for data); requests from one connection are still answered in
order. :class:`CloseConnection` closes the connection without an answer, as Kafka does for a request it
will not serve.

``ctx.cluster`` is the :class:`kafka_kip_reference.broker.state.ClusterState`; every call runs on the cluster's loop
thread, so no locking is needed. Its read API for handlers:

- ``live_broker_ids() -> list[int]``; ``broker(broker_id) -> BrokerAddress``.
- ``coordinator_for(key: str) -> int``: the broker coordinating a group (or transactional id), -1 if none.
- ``topic_id(name)``; ``topic_name(topic_id)``; ``partitions(topic) -> int | None``; ``partition(topic, i)``.
- ``partition_epoch(topic, partition)``, ``leader_epoch(topic, partition)``, ``high_watermark(...)``,
  ``log_start_offset(...)``: -1 if unknown.
- ``view(broker_id) -> MetadataImage``: the metadata that broker acts on (frozen while its metadata is
  delayed by ``ReferenceCluster.delay_metadata``).
- ``config`` (:class:`kafka_kip_reference.broker.config.BrokerConfig`), ``honours(feature)``, ``api_versions``,
  ``now_ms()``, ``loop``, ``cluster_id``, ``users``.

``ctx.groups`` is the :class:`kafka_kip_reference.broker.groups.GroupCoordinator`, the group state machines the
group APIs adapt to the wire; ``ctx.transactions`` the :class:`kafka_kip_reference.broker.transactions.TransactionCoordinator`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafka_kip_reference.broker.groups import GroupCoordinator
    from kafka_kip_reference.broker.sasl_mechanisms import SaslExchange
    from kafka_kip_reference.broker.state import ClusterState
    from kafka_kip_reference.broker.transactions import TransactionCoordinator


class CloseConnection(Exception):
    """Raised by a handler: close the connection without answering (not a broker bug)."""


@dataclass
class Session:
    """What a broker knows about one connection: its SASL state and authenticated user."""

    sasl: SaslExchange | None = None
    """The SASL exchange the SaslHandshake started (its mechanism's server side)."""
    authenticated: bool = False
    principal: str | None = None
    """SASL user name, None while unauthenticated."""
    host: str = ''
    """The client's address (ACLs may name hosts)."""
    close_after_response: bool = False
    raw_sasl_token_next: bool = False
    """After SaslHandshake v0 the client sends its token bare (not in a SaslAuthenticate request)."""
    throttle_ms: int = 0
    """Set by a handler whose request broke a client quota: the connection is muted this long after the answer."""


@dataclass
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker_id: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    session: Session
    cluster: ClusterState
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    request_bytes: int = 0
    """The request's size (header and body), as Kafka counts it against a produce quota."""

    @property
    def principal(self) -> str | None:
        """SASL user name of the connection, None when the connection is unauthenticated."""
        return self.session.principal

    @property
    def kafka_principal(self) -> str:
        """The connection's principal as ACLs name it: ``User:<SASL user>``, ``User:ANONYMOUS`` without SASL."""
        return f'User:{self.session.principal}' if self.session.principal is not None else 'User:ANONYMOUS'
