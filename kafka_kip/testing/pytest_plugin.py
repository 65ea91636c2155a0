"""pytest fixtures for the reference cluster and Apache Kafka (registered as a ``pytest11`` entry point).

- ``reference_cluster``: a fresh 3-broker :class:`ReferenceCluster` per test.
- ``reference_cluster_factory``: ``factory(brokers=..., **kwargs)`` starts more clusters (any
  :class:`ReferenceCluster` argument); all are closed when the test ends.
- ``apache_kafka``: the session's 3-broker Apache Kafka cluster (``kafka_kip.testing.apache_kafka``);
  ``apache_kafka_factory(name, brokers, broker_config)`` shares more clusters across the session.

A test fails at teardown when a broker raised inside a request handler (``internal_errors``): the broker
answered something, but that is a bug of the cluster, not the behaviour under test.

pytest loads this module in every session of an environment where kafka-python-kip is installed, so it
imports the reference cluster only when one of its fixtures is used.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kafka_kip.testing.cluster import ReferenceCluster


@pytest.fixture
def reference_cluster_factory() -> Iterator[Callable[..., ReferenceCluster]]:
    """Start reference clusters on demand; every one is closed at teardown."""
    from kafka_kip.testing.cluster import ReferenceCluster

    clusters: list[ReferenceCluster] = []

    def factory(brokers: int = 3, **kwargs: Any) -> ReferenceCluster:
        cluster = ReferenceCluster(brokers, **kwargs).start()
        clusters.append(cluster)
        return cluster

    yield factory
    for cluster in clusters:
        cluster.close()
    errors = [error for cluster in clusters for error in cluster.internal_errors]
    if errors:
        pytest.fail(f'reference cluster internal errors: {errors}', pytrace=False)


@pytest.fixture
def reference_cluster(reference_cluster_factory: Callable[..., ReferenceCluster]) -> ReferenceCluster:
    """A running 3-broker reference cluster."""
    return reference_cluster_factory(3)


# -- Apache Kafka (kafka_kip.testing.apache_kafka, imported only by the tests that use it) ------------

@pytest.fixture(scope='session')
def apache_kafka_factory() -> Callable[..., Any]:
    """``factory(name='default', brokers=3, broker_config=None)``: an Apache Kafka cluster from Maven
    Central's jars, started once per session for each distinct set of arguments and shared by every test
    that asks for it. Skips the test, with the reason in one line, where Java or Maven Central is missing."""
    from kafka_kip.testing.apache_kafka import JavaUnavailable, shared_cluster

    def factory(name: str = 'default', brokers: int = 3, broker_config: dict[str, Any] | None = None) -> Any:
        try:
            return shared_cluster(name, brokers, broker_config)
        except JavaUnavailable as exc:
            pytest.skip(f'Apache Kafka cannot run here: {exc}')

    return factory


@pytest.fixture
def apache_kafka(apache_kafka_factory: Callable[..., Any]) -> Iterator[Any]:
    """The session's shared 3-broker :class:`~kafka_kip.testing.apache_kafka.ApacheKafkaCluster`; brokers a
    test stopped or killed are started again after it."""
    cluster = apache_kafka_factory()
    yield cluster
    cluster.start_stopped_brokers()


def pytest_sessionfinish() -> None:
    module = sys.modules.get('kafka_kip.testing.apache_kafka')
    if module is not None:
        module.close_shared_clusters()
