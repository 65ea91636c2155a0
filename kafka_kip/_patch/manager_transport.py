"""``KafkaConnectionManager._build_transport`` building kafka_kip's socket transports instead of kafka-python's.

The manager builds a connection's transport inline (``KafkaTCPTransport(...)`` / ``KafkaSSLTransport(...)``), and
the transport's read loop hands whatever ``_sock_recv()`` returns to the connection. Scoped: only
:class:`kafka_kip.metadata.KipConnectionManager` runs the returned function, so only kafka_kip's clients get
:mod:`kafka_kip.protocol.transport`'s transports.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kafka.net.manager as _stock
from kafka.net.transport import KafkaTCPTransport

from kafka_kip._patch.rebind import rebound, require_names


def install(*, tcp: type, ssl: type) -> Callable[..., Any]:
    """kafka-python's ``KafkaConnectionManager._build_transport`` building ``tcp`` / ``ssl``; raises
    KafkaPythonChanged if it no longer builds the transports by those names, or if a transport no longer reads
    through ``_sock_recv`` (the method the given classes override)."""
    require_names(KafkaTCPTransport._read_from_sock, {'_sock_recv'}, 'to read the socket through _sock_recv()')
    return rebound(_stock.KafkaConnectionManager._build_transport, KafkaTCPTransport=tcp, KafkaSSLTransport=ssl)


__all__ = ['install']
