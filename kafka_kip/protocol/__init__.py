"""Wire extensions: patched message specs, headers, feature negotiation, kafka_kip's broker connections.

Importing this package changes nothing in kafka-python: the patched message classes are used by
kafka_kip's own connections (:mod:`kafka_kip.protocol.connection`) and by the reference cluster.
"""
from __future__ import annotations

from kafka_kip.protocol import connection, extensions, features, headers, messages

__all__ = ['connection', 'extensions', 'features', 'headers', 'messages']
