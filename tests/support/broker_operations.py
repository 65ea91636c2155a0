"""The single-broker clusters of the broker-operations tests (retention, connection counts), the reference
cluster and Apache Kafka with the same broker configs. A test module takes the ``bootstrap`` fixture by importing ``bootstrap_fixture``."""
from __future__ import annotations

import pytest

from tests.support.apache_kafka_clusters import CLUSTERS, shared_apache_kafka

#: The broker configs of both clusters (tests/support/apache_kafka_clusters.py says what they are for).
BROKER_CONFIG = CLUSTERS['broker-operations']['broker_config']


@pytest.fixture(name='bootstrap', params=['reference', 'apache-kafka'])
def bootstrap_fixture(request: pytest.FixtureRequest) -> str:
    """The bootstrap servers of a one-broker reference cluster or the session's one-broker Apache Kafka 4.4, both
    with :data:`BROKER_CONFIG`."""
    if request.param == 'reference':
        return request.getfixturevalue('reference_cluster_factory')(1, broker_config=BROKER_CONFIG).bootstrap_servers
    return shared_apache_kafka(request, 'broker-operations').bootstrap_servers
