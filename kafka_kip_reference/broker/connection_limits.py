"""Per-connection limits of a reference broker, from Apache Kafka's socket configs (same names and defaults).

- ``socket.request.max.bytes`` (100 MiB): a larger request size closes the connection before its bytes are read.
- ``sasl.server.max.receive.size`` (512 KiB): on a SASL listener, a larger request (SASL tokens included) before
  the connection has authenticated closes it before its bytes are read.
- ``connections.max.idle.ms`` (10 min): a connection with no request in progress that has not completed a request
  or response for that long is closed (:func:`close_idle_connections` looks every quarter of it). A request that
  trickles in counts as idle until it is complete, so a slow sender cannot hold a connection open forever.
- ``connection.failed.authentication.delay.ms`` (100 ms): a failed SASL authentication is answered (and the
  connection closed) only after this delay, which holds up the failed connection alone.

And the connection counts of Kafka's ``ConnectionQuotas`` (dynamic: read at each accept):

- ``max.connections.per.ip`` (2147483647) and ``max.connections.per.ip.overrides`` (``host:count,...``, host names
  resolved): a new connection from an address that already has that many is closed at accept, unanswered.
- ``max.connections`` (2147483647): while a broker has that many connections it accepts no more (Kafka's acceptor
  waits for a slot); a new connection waits, unanswered, until another closes, then is served.
"""
from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from kafka_kip_reference.broker.config import BrokerConfig, host_counts

#: The longest pause between two looks for idle connections.
_MAX_SWEEP_INTERVAL_S = 30.0


@dataclass(frozen=True)
class ConnectionLimits:
    max_request_bytes: int
    idle_s: float
    failed_authentication_delay_s: float
    max_unauthenticated_request_bytes: int

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ConnectionLimits:
        return cls(config.int('socket.request.max.bytes'), config.int('connections.max.idle.ms') / 1000,
                   config.int('connection.failed.authentication.delay.ms') / 1000,
                   min(config.int('sasl.server.max.receive.size'), config.int('socket.request.max.bytes')))


def max_connections_from(config: BrokerConfig, address: str) -> int:
    """How many connections ``address`` may have open on one broker now."""
    return _address_counts(config['max.connections.per.ip.overrides']).get(
        address, config.int('max.connections.per.ip'))


@functools.lru_cache(maxsize=8)
def _address_counts(overrides: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` by IP address (checked when the config was set); a host name that does
    not resolve names no address a connection can come from."""
    counts = {}
    for host, count in host_counts(overrides).items():
        try:
            counts[socket.gethostbyname(host)] = count
        except OSError:
            continue
    return counts


class Idleable(Protocol):
    """What :func:`close_idle_connections` needs of a connection."""

    last_active: float
    busy: bool
    writer: object | None

    def close(self) -> None: ...


async def close_idle_connections(connections: Callable[[], Iterable[Idleable]], idle_s: float) -> None:
    """Close the connections idle for more than ``idle_s`` seconds, until cancelled (a negative ``idle_s``, as
    Kafka's -1, never closes any)."""
    if idle_s < 0:
        return
    loop = asyncio.get_running_loop()
    interval = min(max(idle_s / 4, 0.01), _MAX_SWEEP_INTERVAL_S)
    while True:
        await asyncio.sleep(interval)
        expired = loop.time() - idle_s
        for connection in list(connections()):
            if connection.writer is not None and not connection.busy and connection.last_active < expired:
                connection.close()  # (a TLS handshake in progress has its own timeout: the idle time)
