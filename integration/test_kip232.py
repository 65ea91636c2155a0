"""KIP-232: offset epochs, recreated topics (partition epochs, or topic ids on stock brokers), stale metadata.

The consumer ties a position to the partition incarnation it was read from: by partition epoch where
the target advertises ``kip.232`` (the reference cluster), by topic id (KIP-516) elsewhere. Stale
metadata needs brokers that serve an old view on purpose, which only the reference cluster can do.
"""
from __future__ import annotations

from typing import Any

import pytest

import kafka_kip as kafka
from integration.support import (
    CONSUMER_CONFIG,
    TP,
    consume,
    poll_outcome,
    produce_one_batch,
)
from integration.targets import BrokerTarget
from kafka_kip.consumer.offset_epoch import OffsetEpoch
from kafka_kip.errors import InvalidPartitionEpochError

pytestmark = pytest.mark.kip232

# Clients must not re-create a deleted topic by asking for its metadata.
NO_AUTO_CREATE = {**CONSUMER_CONFIG, 'allow_auto_create_topics': False}


def _read_old_incarnation(target: BrokerTarget, topic: str, clients: Any) -> tuple[Any, Any, int]:
    """Topic with records 0-2 read by a consumer; returns (tp, that consumer, partition epoch it holds)."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    produce_one_batch(clients, tp, [b'old-0', b'old-1', b'old-2'])
    reader = clients(kafka.KafkaConsumer, **NO_AUTO_CREATE)
    reader.assign([tp])
    assert len(consume(reader, 3)) == 3
    held = target.describe_partition(tp).partition_epoch if 'kip.232' in target.capabilities else -1
    return tp, reader, held


def _recreate_with_new_records(target: BrokerTarget, tp: Any, clients: Any) -> None:
    old_id = target.describe_partition(tp).topic_id
    target.recreate_topic(tp.topic)
    assert target.describe_partition(tp).topic_id != old_id
    assert produce_one_batch(clients, tp, [b'new-%d' % i for i in range(5)]) == [0, 1, 2, 3, 4]


def test_position_and_offset_epoch_round_trip(target: BrokerTarget, topic: str, clients: Any) -> None:
    """position_and_offset_epoch() after 2 of 5 records encodes leader epoch 0 plus the partition epoch
    (kip.232) or topic id the target serves; another consumer seeking to it reads exactly records 2-4."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    produce_one_batch(clients, tp, [b'a', b'b', b'c', b'd', b'e'])
    reader = clients(kafka.KafkaConsumer, max_poll_records=2, **CONSUMER_CONFIG)
    reader.assign([tp])
    assert [r.offset for r in consume(reader, 2)] == [0, 1]
    stored = reader.position_and_offset_epoch(tp)
    reader.close()

    info = target.describe_partition(tp)
    assert stored.offset == 2
    assert OffsetEpoch.from_bytes(stored.offset_epoch) == OffsetEpoch(
        leader_epoch=0,
        partition_epoch=info.partition_epoch if 'kip.232' in target.capabilities else -1,
        topic_id=info.topic_id if 'topic_ids' in target.capabilities else None)
    resumed = clients(kafka.KafkaConsumer, **{**CONSUMER_CONFIG, 'auto_offset_reset': 'none'})
    resumed.assign([tp])
    resumed.seek(tp, stored.offset, offset_epoch=stored.offset_epoch)
    assert [(r.offset, r.value) for r in consume(resumed, 3, timeout=2)] == [(2, b'c'), (3, b'd'), (4, b'e')]
    # nothing read twice: the next record it gets is the next one written
    produce_one_batch(clients, tp, [b'f'])
    assert [(r.offset, r.value) for r in consume(resumed, 1)] == [(5, b'f')]


@pytest.mark.requires('topic_recreation', 'topic_ids')
def test_offset_epoch_of_a_recreated_topic_raises_invalid_partition_epoch(target: BrokerTarget, topic: str,
                                                                          clients: Any) -> None:
    """Seeking to an offset_epoch of a deleted incarnation makes every poll raise
    InvalidPartitionEpochError({tp: partition epoch held}); a seek without it reads the new topic."""
    tp, reader, held = _read_old_incarnation(target, topic, clients)
    stored = reader.position_and_offset_epoch(tp)
    reader.close()
    _recreate_with_new_records(target, tp, clients)

    consumer = clients(kafka.KafkaConsumer, **NO_AUTO_CREATE)
    consumer.assign([tp])
    consumer.seek(tp, stored.offset, offset_epoch=stored.offset_epoch)
    for _ in range(2):
        outcome = poll_outcome(consumer)
        assert isinstance(outcome, InvalidPartitionEpochError), outcome
        assert outcome.partition_epochs == {tp: held}
    consumer.seek(tp, 3)
    assert [(r.offset, r.value) for r in consume(consumer, 2)] == [(3, b'new-3'), (4, b'new-4')]


@pytest.mark.requires('topic_recreation', 'topic_ids')
def test_consumer_reading_through_a_recreation_raises_before_new_records(target: BrokerTarget, topic: str,
                                                                         clients: Any) -> None:
    """A consumer positioned at offset 3 of the old incarnation raises InvalidPartitionEpochError after the
    topic is recreated with 5 records, instead of returning the new records 3-4 as if they followed: its
    fetches name the old topic id (Fetch v13+, KIP-516), which the broker no longer serves, or carry the
    partition epoch (kip.232)."""
    tp, reader, held = _read_old_incarnation(target, topic, clients)
    old_id = target.describe_partition(tp).topic_id
    _recreate_with_new_records(target, tp, clients)
    outcome = poll_outcome(reader)
    assert isinstance(outcome, InvalidPartitionEpochError), outcome
    assert (outcome.partition_epochs, outcome.topic_ids) == ({tp: held}, {tp: old_id})


@pytest.mark.requires('topic_recreation')
def test_producer_writes_to_a_recreated_topic(target: BrokerTarget, topic: str, clients: Any) -> None:
    """A producer that wrote to a topic (after a leader change, where the target can make one) writes to
    its new incarnation from offset 0: its metadata cache takes the new incarnation's lower epochs."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    producer = clients(kafka.KafkaProducer, allow_auto_create_topics=False)
    assert producer.send(topic, value=b'old-0', partition=0).get(timeout=10).offset == 0
    if 'leader_epoch_bumps' in target.capabilities:
        assert target.bump_leader_epoch(tp) == 1
        assert producer.send(topic, value=b'old-1', partition=0).get(timeout=10).offset == 1
    target.recreate_topic(topic)
    assert [producer.send(topic, value=v, partition=0).get(timeout=10).offset for v in (b'new-0', b'new-1')] == \
        [0, 1]
    consumer = clients(kafka.KafkaConsumer, **NO_AUTO_CREATE)
    consumer.assign([tp])
    assert [(r.offset, r.value) for r in consume(consumer, 2)] == [(0, b'new-0'), (1, b'new-1')]
    # nothing of the old incarnation: the next record it gets is the next one written
    assert producer.send(topic, value=b'new-2', partition=0).get(timeout=10).offset == 2
    assert [(r.offset, r.value) for r in consume(consumer, 1)] == [(2, b'new-2')]


@pytest.mark.requires('stale_metadata', 'leader_epoch_bumps')
def test_position_newer_than_the_metadata_waits_for_it(target: BrokerTarget, topic: str, clients: Any) -> None:
    """While every broker serves metadata from before a leader epoch bump, a consumer seeking to an
    offset_epoch from the new epoch fetches nothing; once the metadata catches up it reads on. A plain
    seek reads at once."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    produce_one_batch(clients, tp, [b'a', b'b', b'c', b'd', b'e'])
    info = target.describe_partition(tp)
    plain = clients(kafka.KafkaConsumer, **CONSUMER_CONFIG)
    held = clients(kafka.KafkaConsumer, **CONSUMER_CONFIG)
    plain.assign([tp])
    held.assign([tp])
    target.hold_metadata()
    try:
        assert target.bump_leader_epoch(tp) == 1
        # What a consumer that read offsets 0-1 under the new epoch stores.
        offset_epoch = OffsetEpoch(1, info.partition_epoch, info.topic_id).to_bytes()
        plain.seek(tp, 2)
        assert [r.offset for r in consume(plain, 3)] == [2, 3, 4]
        held.seek(tp, 2, offset_epoch=offset_epoch)
        assert consume(held, 1, timeout=1.0) == []
        assert held._subscription.assignment[tp].held_for_leader_epoch == 1   # held for leader epoch 1, not slow
    finally:
        target.release_metadata()
    assert [r.offset for r in consume(held, 3)] == [2, 3, 4]
