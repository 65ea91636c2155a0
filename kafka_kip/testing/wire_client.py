"""The blocking wire client of the reference cluster's tests: :class:`kafka_kip.protocol.wire.WireClient`, the
client's own (one wire client for both)."""
from __future__ import annotations

from kafka_kip.protocol.wire import WireClient

__all__ = ['WireClient']
