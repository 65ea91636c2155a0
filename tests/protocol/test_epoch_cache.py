"""The one EpochCache of the broker's logs and the mirror: Kafka's rules, on the object alone (no network)."""
from __future__ import annotations

from kafka_kip.mirror.state import ReadCursor
from kafka_kip.protocol.epoch_cache import EpochCache, EpochEntry
from kafka_kip_reference.broker.log import PartitionLog


def test_the_broker_log_and_the_mirror_keep_the_same_cache() -> None:
    assert type(PartitionLog().epoch_cache) is EpochCache
    assert type(ReadCursor(position=0, end=None).epochs) is EpochCache


def test_assign_follows_kafka_while_note_only_records_newer_epochs() -> None:
    assigned, noted = EpochCache(), EpochCache()
    for epoch, offset in [(0, 0), (2, 5), (1, 3)]:
        assigned.assign(epoch, offset)
        noted.note(epoch, offset)
    # assign: the lower epoch at a lower offset makes the conflicting entry give way (LeaderEpochFileCache)
    assert assigned.entries == [EpochEntry(0, 0), EpochEntry(1, 3)] and assigned.latest_epoch == 1
    # note: a reader seeing an older epoch than it read before keeps what it has
    assert noted.entries == [EpochEntry(0, 0), EpochEntry(2, 5)] and noted.latest_epoch == 2


def test_a_bounded_cache_keeps_the_newest_epochs() -> None:
    cache = EpochCache(max_entries=3)
    for epoch in range(5):
        cache.note(epoch, epoch * 10)
    assert cache.entries == [(2, 20), (3, 30), (4, 40)]


def test_end_offset_for_epoch_and_the_divergence_point_on_one_cache() -> None:
    cache = EpochCache()
    for epoch, start in [(0, 0), (2, 3), (5, 5)]:
        cache.assign(epoch, start)
    assert [cache.end_offset_for_epoch(e, 8) for e in (-1, 0, 1, 2, 5, 6)] == [
        (-1, -1), (0, 3), (0, 3), (2, 5), (5, 8), (-1, -1)]
    assert cache.divergence_point(8, 0, 2) == 2   # the leader's epoch 0 ends before ours
    assert cache.divergence_point(8, 1, 9) == 3   # our epoch 2 (from 3) is not on the leader
    assert cache.divergence_point(8, 5, 20) == 8  # the leader has everything we have
    cache.truncate_from_start(4)
    assert cache.entries == [(2, 4), (5, 5)] and cache.epoch_for_offset(4) == 2

