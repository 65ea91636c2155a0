"""pytest fixtures for the reference cluster (registered as a ``pytest11`` entry point).

- ``reference_cluster``: a fresh 3-broker :class:`ReferenceCluster` per test.
- ``reference_cluster_factory``: ``factory(brokers=..., **kwargs)`` starts more clusters (any
  :class:`ReferenceCluster` argument); all are closed when the test ends.

A test fails at teardown when a broker raised inside a request handler (``internal_errors``): the broker
answered something, but that is a bug of the cluster, not the behaviour under test.

pytest loads this module in every session of an environment where kafka-python-kip is installed, so it
imports the reference cluster only when one of its fixtures is used.
"""
from __future__ import annotations

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
