"""Fixtures of tests/reference/."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_kip_reference import ReferenceCluster
from tests.reference.acl_helpers import running_acl_cluster
from tests.support.apache_kafka_clusters import shared_apache_kafka


@pytest.fixture(scope='module')
def acl_cluster() -> Iterator[ReferenceCluster]:
    """The ACL tests' cluster (:func:`tests.reference.acl_helpers.running_acl_cluster`), one per module."""
    with running_acl_cluster() as cluster:
        yield cluster


def one_broker_address(request: pytest.FixtureRequest, broker_config: dict, apache_kafka_name: str) -> tuple[str, int]:
    """``(host, port)`` of a fresh one-broker cluster for a test parametrized 'reference' / 'apache-kafka': the
    reference cluster with ``broker_config``, or the Apache Kafka 4.4 named ``apache_kafka_name`` in tests/support/apache_kafka_clusters.py."""
    if request.param == 'reference':
        cluster = request.getfixturevalue('reference_cluster_factory')(1, broker_config=broker_config)
    else:
        cluster = shared_apache_kafka(request, apache_kafka_name)
    host, port = cluster.bootstrap_servers.split(',')[0].split(':')
    return host, int(port)
