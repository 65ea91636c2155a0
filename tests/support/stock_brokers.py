"""The brokers without ``kip.253`` the stock-broker tests run on: the reference cluster with ``features=()`` and the
session's Apache Kafka cluster. A test module takes the ``brokers`` fixture by importing ``brokers_fixture``."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from kafka.admin import NewPartitions

from kafka_kip import KafkaAdminClient
from kafka_kip_reference import ReferenceCluster


@dataclass
class Brokers:
    bootstrap_servers: str
    create_topic: Callable[[str, int], None]

    def grow(self, topic: str, count: int) -> None:
        """Grow ``topic`` to ``count`` partitions."""
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers)
        try:
            admin.create_partitions({topic: NewPartitions(count)})
        finally:
            admin.close()


@pytest.fixture(name='brokers', params=['reference-without-kip253', 'apache-kafka'])
def brokers_fixture(request: pytest.FixtureRequest) -> Iterator[Brokers]:
    if request.param == 'reference-without-kip253':
        with ReferenceCluster(1, features=(), broker_config={'group.initial.rebalance.delay.ms': 0}) as cluster:
            yield Brokers(cluster.bootstrap_servers, lambda name, count: cluster.create_topic(name, count, 1))
    else:
        cluster = request.getfixturevalue('apache_kafka')
        yield Brokers(cluster.bootstrap_servers, lambda name, count: cluster.create_topic(name, count, 3))
