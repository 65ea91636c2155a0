"""KIP-232 freshness rules (kafka_kip.metadata.freshness), with exact epochs."""
import uuid

import pytest
from kafka.structs import TopicPartition

from kafka_kip.metadata.freshness import (
    Epochs,
    MetadataEpochs,
    Outdated,
    TopicEpochs,
    find_outdated,
    is_at_least,
    is_new_incarnation,
    is_older,
)

pytestmark = pytest.mark.kip232

ID_1 = uuid.UUID(int=1)
ID_2 = uuid.UUID(int=2)
NIL = uuid.UUID(int=0)


@pytest.mark.parametrize('received, cached, older', [
    (Epochs(leader_epoch=3, partition_epoch=7), Epochs(leader_epoch=4, partition_epoch=7), True),
    (Epochs(leader_epoch=4, partition_epoch=7), Epochs(leader_epoch=4, partition_epoch=7), False),
    (Epochs(leader_epoch=5, partition_epoch=7), Epochs(leader_epoch=4, partition_epoch=7), False),
    # A lower partition epoch is older whatever the leader epoch says ...
    (Epochs(leader_epoch=9, partition_epoch=6), Epochs(leader_epoch=0, partition_epoch=7), True),
    # ... and a higher one is a new incarnation whose leader epochs restarted.
    (Epochs(leader_epoch=0, partition_epoch=8), Epochs(leader_epoch=9, partition_epoch=7), False),
    # Stock brokers: leader epochs alone.
    (Epochs(leader_epoch=3), Epochs(leader_epoch=4), True),
    (Epochs(leader_epoch=4), Epochs(leader_epoch=4), False),
    (Epochs(leader_epoch=5), Epochs(leader_epoch=4), False),
    # One side without a partition epoch: fall back to leader epochs.
    (Epochs(leader_epoch=3, partition_epoch=-1), Epochs(leader_epoch=4, partition_epoch=7), True),
    (Epochs(leader_epoch=3, partition_epoch=7), Epochs(leader_epoch=4, partition_epoch=-1), True),
    # Unknown epochs never make metadata older.
    (Epochs(), Epochs(leader_epoch=4, partition_epoch=7), False),
    (Epochs(leader_epoch=-1, partition_epoch=7), Epochs(leader_epoch=4, partition_epoch=7), False),
    (Epochs(leader_epoch=3, partition_epoch=7), Epochs(leader_epoch=-1, partition_epoch=7), False),
    (Epochs(leader_epoch=0, partition_epoch=0), Epochs(), False),
])
def test_is_older(received, cached, older):
    assert is_older(received, cached) is older


@pytest.mark.parametrize('received, cached, older', [
    (Epochs(leader_epoch=0), Epochs(leader_epoch=4), False),            # stock broker: epochs restart
    (Epochs(leader_epoch=0, partition_epoch=9), Epochs(leader_epoch=4, partition_epoch=7), False),
    (Epochs(leader_epoch=5, partition_epoch=6), Epochs(leader_epoch=0, partition_epoch=7), True),
])
def test_is_older_across_incarnations(received, cached, older):
    assert is_older(received, cached, same_incarnation=False) is older


@pytest.mark.parametrize('cached, wanted, result', [
    (Epochs(leader_epoch=4, partition_epoch=7), Epochs(leader_epoch=4, partition_epoch=7), True),
    (Epochs(leader_epoch=5, partition_epoch=7), Epochs(leader_epoch=4, partition_epoch=7), True),
    (Epochs(leader_epoch=3, partition_epoch=7), Epochs(leader_epoch=4, partition_epoch=7), False),
    (Epochs(leader_epoch=9, partition_epoch=6), Epochs(leader_epoch=0, partition_epoch=7), False),
    (Epochs(leader_epoch=0, partition_epoch=8), Epochs(leader_epoch=4, partition_epoch=7), True),
    (Epochs(leader_epoch=3), Epochs(leader_epoch=4), False),
    (Epochs(), Epochs(leader_epoch=4, partition_epoch=7), True),  # nothing to compare: do not wedge
    (None, Epochs(leader_epoch=4, partition_epoch=7), False),     # not cached yet: refresh
    (None, Epochs(leader_epoch=4), False),
    (None, Epochs(), True),                                        # no epochs to wait for
])
def test_is_at_least(cached, wanted, result):
    assert is_at_least(cached, wanted) is result


@pytest.mark.parametrize('received, cached, result', [
    (ID_2, ID_1, True), (ID_1, ID_1, False), (ID_2, None, False), (None, ID_1, False),
    (NIL, ID_1, False), (ID_1, NIL, False), (None, None, False),
])
def test_is_new_incarnation(received, cached, result):
    assert is_new_incarnation(received, cached) is result


def view(max_partition_epoch=-1, cluster_id='cluster-a', **topics):
    """topics: name=(topic_id, {partition: (leader_epoch, partition_epoch)})."""
    return MetadataEpochs(cluster_id, max_partition_epoch, {
        name: TopicEpochs(topic_id, {p: Epochs(*epochs) for p, epochs in partitions.items()})
        for name, (topic_id, partitions) in topics.items()
    })


CACHED = view(12, t=(ID_1, {0: (4, 7), 1: (2, 8)}), u=(ID_2, {0: (1, 11)}))


def test_fresh_response_is_not_outdated():
    received = view(12, t=(ID_1, {0: (5, 7), 1: (2, 8)}), u=(ID_2, {0: (1, 11)}))
    assert find_outdated(received, CACHED) is None


def test_lower_max_partition_epoch_is_outdated():
    outdated = find_outdated(view(11, t=(ID_1, {0: (5, 7)})), CACHED)
    assert outdated == Outdated(None, Epochs(partition_epoch=12), Epochs(partition_epoch=11))
    assert str(outdated) == 'max_partition_epoch 11 < cached 12'


def test_first_older_partition_is_reported_with_both_epochs():
    received = view(12, t=(ID_1, {0: (4, 7), 1: (1, 8)}), u=(ID_2, {0: (0, 11)}))
    outdated = find_outdated(received, CACHED)
    assert outdated == Outdated(TopicPartition('t', 1), Epochs(2, 8), Epochs(1, 8))
    assert str(outdated) == ('t-1: received (partition_epoch=8, leader_epoch=1), '
                             'cached (partition_epoch=8, leader_epoch=2)')


def test_lower_partition_epoch_is_outdated_despite_higher_leader_epoch():
    outdated = find_outdated(view(12, u=(ID_2, {0: (5, 10)})), CACHED)
    assert outdated == Outdated(TopicPartition('u', 0), Epochs(1, 11), Epochs(5, 10))


def test_unknown_max_partition_epoch_is_not_compared():
    assert find_outdated(view(-1, t=(ID_1, {0: (4, 7)})), CACHED) is None


def test_new_topic_id_is_a_new_incarnation():
    assert find_outdated(view(12, t=(ID_2, {0: (0, 13), 1: (0, 14)})), CACHED) is None
    assert find_outdated(view(-1, t=(ID_2, {0: (0, -1), 1: (0, -1)})), CACHED) is None


def test_new_topic_id_with_lower_partition_epoch_is_outdated():
    # The cache already holds the recreated topic (ID_2); a stale view shows the deleted one (ID_1).
    cached = view(-1, t=(ID_2, {0: (0, 13)}))
    outdated = find_outdated(view(-1, t=(ID_1, {0: (4, 7)})), cached)
    assert outdated == Outdated(TopicPartition('t', 0), Epochs(0, 13), Epochs(4, 7))


@pytest.mark.parametrize('topic_id', [None, NIL])
def test_unknown_topic_id_does_not_excuse_older_epochs(topic_id):
    outdated = find_outdated(view(12, t=(topic_id, {0: (3, 7)})), CACHED)
    assert outdated == Outdated(TopicPartition('t', 0), Epochs(4, 7), Epochs(3, 7))


def test_new_cluster_id_is_a_new_incarnation():
    assert find_outdated(view(0, cluster_id='cluster-b', t=(ID_1, {0: (0, 0)})), CACHED) is None


def test_new_partitions_and_topics_are_not_compared():
    received = view(13, t=(ID_1, {0: (4, 7), 2: (0, 13)}), v=(uuid.UUID(int=3), {0: (0, 12)}))
    assert find_outdated(received, CACHED) is None


def test_topics_missing_from_the_response_are_not_compared():
    assert find_outdated(view(12), CACHED) is None
