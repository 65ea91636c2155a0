"""``KafkaConnection.connection_made`` building kafka_kip's protocol parser instead of kafka-python's.

A connection builds its ``KafkaProtocol`` (the framing and response decoding) inline when the socket is
up. Scoped: only :class:`kafka_kip.protocol.connection.KipConnection` runs the returned function.
"""
from __future__ import annotations

from collections.abc import Callable

import kafka.net.connection as _stock

from kafka_kip._patch.rebind import rebound


def install(*, parser: type) -> Callable[..., None]:
    """kafka-python's ``KafkaConnection.connection_made`` building ``parser``; raises KafkaPythonChanged if
    it no longer builds ``KafkaProtocol`` by that name."""
    return rebound(_stock.KafkaConnection.connection_made, KafkaProtocol=parser)
