"""The Apache Kafka clusters the test session shares, declared once by name: a test gets one with
:func:`shared_apache_kafka` (kafka_kip_reference's ``apache_kafka_factory`` starts each once per session), and a
whole-suite run starts them all in the background while the tests are collected (tests/conftest.py)."""
from __future__ import annotations

from typing import Any

import pytest

#: name -> ``apache_kafka_factory`` arguments ('default': the session's 3-broker cluster, the ``apache_kafka``
#: fixture's). The one-broker clusters are fresh for tests that need what the shared one cannot keep (internal
#: topics not yet created, internal topics deleted) or broker configs of their own.
CLUSTERS: dict[str, dict[str, Any]] = {
    'default': {},
    # compaction soon after a write (the mirror's compacted sources)
    'mirror': {'brokers': 1, 'broker_config': {'log.cleaner.backoff.ms': 100, 'log.cleaner.min.compaction.lag.ms': 0}},
    # retention checked every 100 ms from the start (Kafka's defaults: 300000 ms, the first after 30000 ms) and
    # connection counts for three loopback addresses the tests connect from (Kafka's own connections come from
    # 127.0.0.1): two from 127.0.0.2, none from 127.0.0.3, three from 127.0.0.4
    'broker-operations': {'brokers': 1, 'broker_config': {
        'log.retention.check.interval.ms': '100', 'log.initial.task.delay.ms': '0',
        'max.connections.per.ip.overrides': '127.0.0.2:2,127.0.0.3:0,127.0.0.4:3'}},
    'internal-topics': {'brokers': 1},
    'auto-creation': {'brokers': 1},
    'oauthbearer': {'brokers': 1, 'sasl_mechanisms': ('OAUTHBEARER',)},
}


def shared_apache_kafka(request: pytest.FixtureRequest, name: str) -> Any:
    """The session's Apache Kafka cluster ``name`` of :data:`CLUSTERS` (a skip where Kafka cannot run here)."""
    return request.getfixturevalue('apache_kafka_factory')(name, **CLUSTERS[name])


def start_every_cluster() -> None:
    """Start every cluster of :data:`CLUSTERS` (errors are left for the tests that ask for them to meet)."""
    from kafka_kip_reference.external.apache_kafka import shared_cluster

    for name, arguments in CLUSTERS.items():
        try:
            shared_cluster(name, **arguments)
        except Exception:  # noqa: BLE001  (the first test that asks for the cluster meets the same error, or skips)
            return
