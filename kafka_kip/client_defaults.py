"""Settings in which kafka_kip's clients differ from kafka-python's defaults, and why.

Every key stays a public kafka-python setting: a caller who passes it explicitly gets what it asked for.
"""
from __future__ import annotations

#: kafka-python 3.0 doubles a failed connection's backoff up to ``reconnect_backoff_max_ms=30000`` and backs
#: its metadata refresh off the same way; Kafka's Java clients stop at 1 s (``reconnect.backoff.max.ms``).
#: After an outage of every broker a client knew, kafka-python then waits up to 30 s after the brokers are
#: back before it tries again; kafka_kip's clients take Java's 1 s (tests/test_recovery_all_brokers_down.py).
CLIENT_DEFAULTS: dict[str, object] = {'reconnect_backoff_max_ms': 1000}
