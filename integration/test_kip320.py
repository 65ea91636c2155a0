"""KIP-320: leader epochs on records and commits, position validation and truncation detection.

Validation needs OffsetForLeaderEpoch on the target; divergence needs a leader epoch history (a target
that can move leadership), and real data loss an unclean election (only the reference cluster). A
position whose leader epoch ended before it is what a consumer meets after its leader lost records, so
targets that can only move leadership still show the detection.
"""
from __future__ import annotations

from typing import Any

import kafka as stock_kafka
import pytest

import kafka_kip as kafka
from integration.support import (
    CLIENT_MODULES,
    CONSUMER_CONFIG,
    MOCK_BY_TIME,
    TP,
    consume,
    poll_outcome,
    produce_one_batch,
    timestamps,
)
from integration.targets import BrokerTarget
from kafka_kip.errors import TruncatedPartitionError

pytestmark = pytest.mark.kip320

TANSU_COMMIT_EPOCH = ('the leader epoch of a commit is not stored: OffsetFetch answers committed_leader_epoch -1 '
                      'for an offset committed with leader epoch 0')
MOCK_COMMIT_EPOCH = ('does not store the leader epoch of a commit: OffsetCommit only checks it against the current '
                     'leader epoch (refusing an older one with FENCED_LEADER_EPOCH), and OffsetFetch answers the '
                     "partition's current leader epoch as committed_leader_epoch (rd_kafka_mock_handle_OffsetFetch)")
# No reset policy: truncation is raised, not repaired. A short offset_epoch_wait_ms bounds how long a
# position whose leader epoch no metadata reaches is held before it is validated anyway.
VALIDATING = {**CONSUMER_CONFIG, 'auto_offset_reset': 'none', 'offset_epoch_wait_ms': 500}


def _abc(target: BrokerTarget, topic: str, clients: Any) -> Any:
    """A new topic whose partition 0 (returned) holds a, b, c at offsets 0-2 under leader epoch 0."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    produce_one_batch(clients, tp, [b'a', b'b', b'c'])
    return tp


def _validating_at(clients: Any, tp: Any, offset: int, leader_epoch: int) -> Any:
    """A validating consumer assigned ``tp``, at ``offset`` claiming ``leader_epoch``."""
    consumer = clients(kafka.KafkaConsumer, **VALIDATING)
    consumer.assign([tp])
    consumer.seek(tp, offset, leader_epoch=leader_epoch)
    return consumer


def test_new_topic_records_carry_leader_epoch_zero(target: BrokerTarget, topic: str, clients: Any) -> None:
    """Records of a new partition carry leader epoch 0."""
    tp = _abc(target, topic, clients)
    consumer = clients(kafka.KafkaConsumer, **CONSUMER_CONFIG)
    consumer.assign([tp])
    assert [(r.offset, r.leader_epoch) for r in consume(consumer, 3)] == [(0, 0), (1, 0), (2, 0)]


def _consume_three_and_commit(target: BrokerTarget, topic: str, clients: Any, module: Any) -> Any:
    tp = _abc(target, topic, clients)
    consumer = clients(module.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    assert len(consume(consumer, 3)) == 3
    consumer.commit()
    return consumer


@pytest.mark.parametrize('client', [
    pytest.param('kafka-python', marks=pytest.mark.known_bug('tansu', 'tansu', TANSU_COMMIT_EPOCH)),
    'kafka_kip',
])
def test_committing_consumer_reads_back_the_leader_epoch_of_its_position(target: BrokerTarget, topic: str,
                                                                         clients: Any, client: str) -> None:
    """committed() of the consumer that committed its position shows the leader epoch of the last record.

    kafka-python shows what the coordinator answers; kafka_kip falls back to the epoch of its own commit
    of the same offset where the coordinator answers none, so on Tansu only kafka-python shows its bug.
    """
    consumer = _consume_three_and_commit(target, topic, clients, CLIENT_MODULES[client])
    committed = consumer.committed(TP(topic, 0), metadata=True)
    assert (committed.offset, committed.leader_epoch) == (3, 0)


@pytest.mark.known_bug('tansu', 'tansu', TANSU_COMMIT_EPOCH)
def test_new_group_member_reads_the_committed_leader_epoch(target: BrokerTarget, topic: str,
                                                           clients: Any) -> None:
    """Another member of the group reads the committed offset with its leader epoch (the coordinator's)."""
    _consume_three_and_commit(target, topic, clients, kafka).close()
    reader = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    committed = reader.committed(TP(topic, 0), metadata=True)
    assert (committed.offset, committed.leader_epoch) == (3, 0)


@pytest.mark.known_bug('librdkafka-mock', 'librdkafka-mock', MOCK_COMMIT_EPOCH)
def test_commit_without_leader_epoch_reads_back_without_one(target: BrokerTarget, topic: str,
                                                           clients: Any) -> None:
    """An offset committed without a leader epoch (-1) is read back without one."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    consumer.commit({tp: kafka.OffsetAndMetadata(0, '', -1)})
    committed = consumer.committed(tp, metadata=True)
    assert (committed.offset, committed.leader_epoch) == (0, -1)


@pytest.mark.requires('leader_epoch_bumps')
def test_records_and_commits_follow_a_leader_epoch_bump(target: BrokerTarget, topic: str,
                                                        clients: Any) -> None:
    """After a leader change, new records carry epoch 1 (the producer retries the old leader's refusal
    without duplicates) and a commit of the position keeps epoch 1."""
    tp = _abc(target, topic, clients)
    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    assert [r.leader_epoch for r in consume(consumer, 3)] == [0, 0, 0]
    producer = clients(kafka.KafkaProducer)
    assert producer.send(topic, value=b'x', partition=0).get(timeout=10).offset == 3  # learns the leader

    assert target.bump_leader_epoch(tp) == 1
    # One at a time: the first send meets the old leader and is retried, and must not overtake the second.
    assert [producer.send(topic, value=v, partition=0).get(timeout=10).offset for v in (b'd', b'e')] == [4, 5]
    assert [(r.offset, r.value, r.leader_epoch) for r in consume(consumer, 3)] == \
        [(3, b'x', 0), (4, b'd', 1), (5, b'e', 1)]
    assert consumer.poll(timeout_ms=300) == {}
    consumer.commit()
    committed = consumer.committed(tp, metadata=True)
    assert (committed.offset, committed.leader_epoch) == (6, 1)


@pytest.mark.requires('leader_epoch_bumps')
# On the mock, kafka-python retries the FENCED_LEADER_EPOCH answer until the commit times out.
@pytest.mark.known_bug('librdkafka-mock', 'librdkafka-mock', MOCK_COMMIT_EPOCH, raises=kafka.errors.KafkaTimeoutError)
def test_commit_with_an_older_leader_epoch_is_stored(target: BrokerTarget, topic: str, clients: Any) -> None:
    """A position read under epoch 0 and committed after the leader changed is stored with epoch 0."""
    tp = _abc(target, topic, clients)
    assert target.bump_leader_epoch(tp) == 1
    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    consumer.commit({tp: kafka.OffsetAndMetadata(3, '', 0)}, timeout_ms=2000)
    committed = consumer.committed(tp, metadata=True)
    assert (committed.offset, committed.leader_epoch) == (3, 0)


# -- position validation ----------------------------------------------------------------------------

def test_seek_with_a_leader_epoch_reads_on_from_a_valid_position(target: BrokerTarget, topic: str,
                                                                 clients: Any) -> None:
    """seek(tp, 1, leader_epoch=0) inside epoch 0 reads on from offset 1 (validated where the target can)."""
    tp = _abc(target, topic, clients)
    consumer = _validating_at(clients, tp, 1, leader_epoch=0)
    assert [(r.offset, r.leader_epoch) for r in consume(consumer, 2, timeout=2)] == [(1, 0), (2, 0)]


def _epoch_history(target: BrokerTarget, topic: str, clients: Any) -> Any:
    """Offsets 0-2 under leader epoch 0, 3-4 under epoch 1."""
    tp = _abc(target, topic, clients)
    assert target.bump_leader_epoch(tp) == 1
    producer = clients(kafka.KafkaProducer)
    assert [producer.send(topic, value=v, partition=0).get(timeout=10).offset for v in (b'd', b'e')] == [3, 4]
    return tp


@pytest.mark.requires('leader_epoch_bumps', 'offset_for_leader_epoch')
def test_seek_past_the_end_of_its_leader_epoch_raises_truncation(target: BrokerTarget, topic: str,
                                                                 clients: Any) -> None:
    """A position at offset 5 claiming epoch 0, which ended at 3, raises TruncatedPartitionError({tp: 3})
    before any record is returned; polling on continues from the position."""
    tp = _epoch_history(target, topic, clients)
    consumer = _validating_at(clients, tp, 5, leader_epoch=0)
    with pytest.raises(TruncatedPartitionError) as raised:
        consume(consumer, 1, timeout=5)
    assert raised.value.truncated_offsets == {tp: 3}
    assert consumer.position(tp) == 5
    produce_one_batch(clients, tp, [b'f'])
    assert [(r.offset, r.value, r.leader_epoch) for r in consume(consumer, 1)] == [(5, b'f', 1)]


@pytest.mark.requires('leader_epoch_bumps', 'offset_for_leader_epoch', 'groups')
@pytest.mark.known_bug('librdkafka-mock', 'librdkafka-mock', MOCK_COMMIT_EPOCH)  # the taker reads epoch 1
def test_group_member_taking_over_a_commit_past_its_epoch_detects_truncation(target: BrokerTarget, topic: str,
                                                                           clients: Any) -> None:
    """A member that takes over offset 5 committed under epoch 0 (which ended at 3) raises
    TruncatedPartitionError({tp: 3}) on its first poll; stock kafka-python reads on unchecked."""
    tp = _abc(target, topic, clients)
    committer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    committer.assign([tp])
    committer.commit({tp: kafka.OffsetAndMetadata(5, '', 0)})
    committer.close()
    assert target.bump_leader_epoch(tp) == 1
    produce_one_batch(clients, tp, [b'd', b'e', b'f', b'g'])

    stock = clients(stock_kafka.KafkaConsumer, group_id=f'{topic}-g', **{**CONSUMER_CONFIG, 'auto_offset_reset': 'none'})
    stock.assign([tp])
    assert [(r.offset, r.value) for r in consume(stock, 2)] == [(5, b'f'), (6, b'g')]
    taker = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **VALIDATING)
    taker.assign([tp])
    outcome = poll_outcome(taker)
    assert isinstance(outcome, TruncatedPartitionError), outcome
    assert outcome.truncated_offsets == {tp: 3}


@pytest.mark.requires('offset_for_leader_epoch')
def test_seek_with_an_unknown_leader_epoch_raises_unknown_truncation(target: BrokerTarget, topic: str,
                                                                     clients: Any) -> None:
    """A position claiming leader epoch 7, which the leader never had, raises
    TruncatedPartitionError({tp: None}): truncated, divergence point unknown."""
    tp = _abc(target, topic, clients)
    consumer = _validating_at(clients, tp, 3, leader_epoch=7)
    with pytest.raises(TruncatedPartitionError) as raised:
        consume(consumer, 1, timeout=5)
    assert raised.value.truncated_offsets == {tp: None}


@pytest.mark.requires('offset_for_leader_epoch')
@pytest.mark.known_bug('librdkafka-mock', 'librdkafka-mock', MOCK_BY_TIME)
def test_closest_resets_by_timestamp_after_unknown_truncation(target: BrokerTarget, topic: str,
                                                              clients: Any) -> None:
    """auto_offset_reset='closest': after an unknown truncation the consumer resets to the first record
    at or after the timestamp of the last one it consumed (offset 1 of 0-2)."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    produce_one_batch(clients, tp, [b'a', b'b', b'c'], timestamps=timestamps(3))
    consumer = clients(kafka.KafkaConsumer, **{**VALIDATING, 'auto_offset_reset': 'closest'})
    consumer.assign([tp])
    consumer.seek(tp, kafka.OffsetAndMetadata(3, '', 7, timestamp=timestamps(3)[1]))
    assert [(r.offset, r.value) for r in consume(consumer, 2, timeout=2)] == [(1, b'b'), (2, b'c')]


@pytest.mark.requires('unclean_election')
def test_unclean_election_truncation_is_detected_precisely(target: BrokerTarget, topic: str,
                                                           clients: Any) -> None:
    """Records 5-9 a consumer read are lost in an unclean election: the next poll raises
    TruncatedPartitionError({tp: 5}); polling on reads the new leader's records from the position."""
    target.create_topic(topic)
    tp = TP(topic, 0)

    def produce(values: list[bytes]) -> list[int]:
        # A producer of its own: the new leader lacks the idempotence state of the records it lost.
        producer = clients(kafka.KafkaProducer, acks='all')
        return [producer.send(topic, value=v, partition=0).get(timeout=10).offset for v in values]

    assert produce([b'a%d' % i for i in range(5)]) == [0, 1, 2, 3, 4]
    follower = target.pause_follower(tp)
    assert produce([b'b%d' % i for i in range(5, 10)]) == [5, 6, 7, 8, 9]
    consumer = clients(kafka.KafkaConsumer, **VALIDATING)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    assert [(r.offset, r.leader_epoch) for r in consume(consumer, 10)] == [(o, 0) for o in range(10)]
    # The new epoch is the target's to choose: Kafka's controller also bumps it when the old leader leaves.
    epoch = target.elect_uncleanly(tp, follower)
    assert epoch >= 1 and target.describe_partition(tp).leader_epoch == epoch
    assert produce([b'c%d' % i for i in range(5, 13)]) == list(range(5, 13))

    with pytest.raises(TruncatedPartitionError) as raised:
        consume(consumer, 1, timeout=5)
    assert raised.value.truncated_offsets == {tp: 5}
    assert consumer.position(tp) == 10
    assert [(r.offset, r.value, r.leader_epoch) for r in consume(consumer, 3)] == \
        [(10, b'c10', epoch), (11, b'c11', epoch), (12, b'c12', epoch)]
