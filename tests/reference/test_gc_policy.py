"""The broker process's garbage collection policy and the objects a partition costs (issue #30: 100,000 partitions
created in seconds, other clients served meanwhile)."""
from __future__ import annotations

import gc
import weakref

import pytest

from kafka_kip_reference.broker import gc_policy
from kafka_kip_reference.broker.gc_policy import FreezeSurvivors
from kafka_kip_reference.broker.log import PartitionLog
from kafka_kip_reference.broker.state import ClusterState


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def policy():
    installed = FreezeSurvivors()
    installed.install()
    try:
        yield installed
    finally:
        installed.uninstall()


def test_survivors_of_a_full_collection_are_frozen_and_a_doubling_walks_everything_again(policy, monkeypatch):
    assert policy in gc.callbacks and gc.get_freeze_count() > 0
    cycle = Cycle()
    alive = weakref.ref(cycle)
    gc.collect()
    assert (policy.partial_walks, policy.whole_walks) == (1, 0)
    del cycle
    gc.collect()  # the cycle is garbage now, but frozen: this collection does not walk it
    assert alive() is not None
    assert (policy.partial_walks, policy.whole_walks) == (2, 0)
    monkeypatch.setattr(gc_policy, 'GROWTH_BEFORE_A_WHOLE_WALK', 0)  # as if the frozen objects had doubled
    gc.collect()
    assert alive() is None
    assert (policy.partial_walks, policy.whole_walks) == (2, 1)
    assert gc.get_freeze_count() > 0


def test_uninstalling_unfreezes_and_removes_the_callback():
    policy = FreezeSurvivors()
    policy.install()
    policy.uninstall()
    assert policy not in gc.callbacks
    assert gc.get_freeze_count() == 0


def test_a_process_embedding_the_cluster_keeps_its_own_collector(reference_cluster_factory):
    reference_cluster_factory(brokers=1)
    assert not [c for c in gc.callbacks if isinstance(c, FreezeSurvivors)]
    assert gc.get_freeze_count() == 0


def test_an_empty_log_shares_its_empty_containers_until_its_first_append():
    empty, other = PartitionLog(), PartitionLog()
    assert empty._batches is other._batches and empty.segments is other.segments
    assert empty._producers is other._producers and empty._transactions is other._transactions
    assert empty._waiters is None


def test_a_partition_of_a_new_topic_costs_fewer_than_14_tracked_objects():
    state = ClusterState(1)
    state.broker_started(0)
    state.create_topic('warm-up', 1, 1)
    state.image()
    gc.collect()
    before = len(gc.get_objects())
    state.create_topic('many', 2000, 1)
    state.image()
    gc.collect()
    # 23.6 before empty logs were made lazy (issue #30); 12.6 now, 13 when a log's segment limits also close over
    # its broker id
    assert (len(gc.get_objects()) - before) / 2000 < 14
