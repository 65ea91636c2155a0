"""The single-broker clusters of the broker-operations tests (retention, connection counts), the reference
cluster and Apache Kafka with the same broker configs. A test module takes the ``bootstrap`` fixture by importing ``bootstrap_fixture``."""
from __future__ import annotations

import pytest

#: Retention checked every 100 ms from the start (Kafka's defaults: 300000 ms, the first after 30000 ms) and
#: connection counts for three loopback addresses the tests connect from (Kafka's own connections come from
#: 127.0.0.1): two from 127.0.0.2, none from 127.0.0.3, three from 127.0.0.4.
BROKER_CONFIG = {'log.retention.check.interval.ms': '100', 'log.initial.task.delay.ms': '0',
                 'max.connections.per.ip.overrides': '127.0.0.2:2,127.0.0.3:0,127.0.0.4:3'}


@pytest.fixture(name='bootstrap', params=['reference', 'apache-kafka'])
def bootstrap_fixture(request: pytest.FixtureRequest) -> str:
    """The bootstrap servers of a one-broker reference cluster or the session's one-broker Apache Kafka 4.4, both
    with :data:`BROKER_CONFIG`."""
    if request.param == 'reference':
        return request.getfixturevalue('reference_cluster_factory')(1, broker_config=BROKER_CONFIG).bootstrap_servers
    return request.getfixturevalue('apache_kafka_factory')('broker-operations', 1, BROKER_CONFIG).bootstrap_servers
