"""The ``cluster`` fixture several reference-cluster test modules share: a fresh cluster with a topic ``t``.

A module takes it with one line, ``cluster = cluster_with_topic_t(brokers, partitions, replication_factor)``.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from kafka_kip_reference import ReferenceCluster


def cluster_with_topic_t(brokers: int, partitions: int, replication_factor: int) -> Callable[..., ReferenceCluster]:
    """A ``cluster`` fixture: a fresh ReferenceCluster of ``brokers`` brokers holding topic ``t``."""

    @pytest.fixture(name='cluster')
    def cluster_fixture(reference_cluster_factory: Callable[..., ReferenceCluster]) -> ReferenceCluster:
        cluster = reference_cluster_factory(brokers)
        cluster.create_topic('t', partitions, replication_factor)
        return cluster

    return cluster_fixture
