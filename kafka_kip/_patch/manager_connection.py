"""``KafkaConnectionManager.get_connection`` building kafka_kip's connections instead of kafka-python's.

The manager builds every ``KafkaConnection`` inline in ``get_connection`` (bootstrap connections too).
Scoped: only :class:`kafka_kip.metadata.KipConnectionManager` runs the returned function, so only
kafka_kip's clients get :class:`kafka_kip.protocol.connection.KipConnection` connections.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kafka.net.manager as _stock

from kafka_kip._patch.rebind import rebound


def install(*, connection: type) -> Callable[..., Any]:
    """kafka-python's ``KafkaConnectionManager.get_connection`` building ``connection``; raises
    KafkaPythonChanged if it no longer builds ``KafkaConnection`` by that name."""
    return rebound(_stock.KafkaConnectionManager.get_connection, KafkaConnection=connection)
