"""KIP-232 on the consumer: offset epochs, partition incarnations and metadata freshness.

The codec tests need no broker; the rest run on the reference cluster.
"""
from __future__ import annotations

import time
import uuid

import kafka.structs
import pytest
from kafka import KafkaProducer

from kafka_kip import KafkaConsumer, OffsetAndMetadata, OffsetAndOffsetEpoch, TopicPartition
from kafka_kip.consumer.offset_epoch import OffsetEpoch
from kafka_kip.errors import InvalidLeaderEpochError, InvalidPartitionEpochError
from kafka_kip.structs import OffsetAndTimestamp
from kafka_kip_reference import ReferenceCluster
from tests.support.consuming import poll_records

pytestmark = pytest.mark.kip232

TOPIC = 'epochs'
TP = TopicPartition(TOPIC, 0)
TOPIC_ID = uuid.UUID('12345678-1234-5678-1234-567812345678')


# -- the offset_epoch bytes ----------------------------------------------------------------------------


def test_offset_epoch_round_trip() -> None:
    epoch = OffsetEpoch(leader_epoch=3, partition_epoch=17, topic_id=TOPIC_ID)
    data = epoch.to_bytes()
    assert (len(data), data[0]) == (29, 1)   # version byte first
    assert OffsetEpoch.from_bytes(data) == epoch
    assert OffsetEpoch.from_bytes(bytearray(OffsetEpoch().to_bytes())) == OffsetEpoch(-1, -1, None)


@pytest.mark.parametrize(('data', 'problem'), [
    (b'', 'offset_epoch is empty'),
    (b'\x02' + bytes(28), 'offset_epoch has version 2; this client reads version 1'),
    (OffsetEpoch(1, 2, TOPIC_ID).to_bytes()[:-1], 'offset_epoch version 1 is 29 bytes long, got 28'),
    (b'\x01' + b'\xff' * 28, 'offset_epoch checksum mismatch: the bytes were altered or are not an offset_epoch'),
    (b'\x01garbage-garbage-garbage-garb', 'offset_epoch checksum mismatch'),
])
def test_undecodable_offset_epoch_is_a_value_error_naming_the_problem(data: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        OffsetEpoch.from_bytes(data)


def test_flipping_one_bit_is_detected() -> None:
    data = bytearray(OffsetEpoch(3, 17, TOPIC_ID).to_bytes())
    data[7] ^= 0x01
    with pytest.raises(ValueError, match='checksum mismatch'):
        OffsetEpoch.from_bytes(bytes(data))


def test_offset_epoch_must_be_bytes() -> None:
    with pytest.raises(TypeError, match='offset_epoch must be bytes, got str'):
        OffsetEpoch.from_bytes('AQAAAAM=')


# -- on the reference cluster ----------------------------------------------------------------------------


@pytest.fixture
def cluster():
    with ReferenceCluster(brokers=2) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=2)
        yield cluster


def produce(bootstrap_servers: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks='all')
    try:
        for value in values:
            producer.send(TOPIC, value=value, partition=0).get(10)
    finally:
        producer.close()


def new_consumer(bootstrap_servers: str, **configs: object) -> KafkaConsumer:
    configs = {'auto_offset_reset': 'none', 'enable_auto_commit': False, **configs}
    return KafkaConsumer(bootstrap_servers=bootstrap_servers, **configs)


def poll_until(consumer: KafkaConsumer, count: int, seconds: float = 10) -> list:
    return poll_records(consumer, count, seconds, TP)


def fields(records: list) -> list[tuple]:
    return [(r.offset, r.leader_epoch, r.timestamp, r.value) for r in records]


def test_position_and_offset_epoch_round_trip_continues_identically(cluster: ReferenceCluster) -> None:
    produce(cluster.bootstrap_servers, [b'v%d' % i for i in range(10)])
    first = new_consumer(cluster.bootstrap_servers, max_poll_records=4)
    second = new_consumer(cluster.bootstrap_servers)
    try:
        first.assign([TP])
        first.seek(TP, 0)
        assert [r.offset for r in poll_until(first, 4)] == [0, 1, 2, 3]
        stored = first.position_and_offset_epoch(TP)
        assert stored == OffsetAndOffsetEpoch(4, OffsetEpoch(0, cluster.partition_epoch(TP),
                                                             cluster.topic_id(TOPIC)).to_bytes())

        second.assign([TP])
        second.seek(TP, stored.offset, offset_epoch=stored.offset_epoch)
        assert second.position_and_offset_epoch(TP) == stored
        continued = fields(poll_until(second, 6))
        assert continued == fields(poll_until(first, 6))
        assert [offset for offset, *_ in continued] == [4, 5, 6, 7, 8, 9]
    finally:
        first.close()
        second.close()


def test_seek_refuses_garbage_offset_epoch_and_changes_nothing(cluster: ReferenceCluster) -> None:
    consumer = new_consumer(cluster.bootstrap_servers)
    try:
        consumer.assign([TP])
        consumer.seek(TP, 3)
        with pytest.raises(ValueError, match='offset_epoch checksum mismatch'):
            consumer.seek(TP, 7, offset_epoch=b'\x01' + b'\x00' * 28)
        with pytest.raises(ValueError, match='offset_epoch is empty'):
            consumer.seek(TP, 7, offset_epoch=b'')
        with pytest.raises(ValueError, match='both leader_epoch and offset_epoch'):
            consumer.seek(TP, 7, leader_epoch=0, offset_epoch=OffsetEpoch(0).to_bytes())
        assert consumer.position(TP) == 3
    finally:
        consumer.close()


def recreate(cluster: ReferenceCluster, values: list[bytes]) -> None:
    cluster.delete_topic(TOPIC)
    cluster.create_topic(TOPIC, partitions=1, replication_factor=2)
    produce(cluster.bootstrap_servers, values)


def assert_only_raises(consumer: KafkaConsumer, partition_epochs: dict, polls: int = 5) -> None:
    """Every poll raises InvalidPartitionEpochError(partition_epochs); none returns a record."""
    for _ in range(polls):
        with pytest.raises(InvalidPartitionEpochError) as raised:
            poll_until(consumer, 1, seconds=5)
        assert raised.value.partition_epochs == partition_epochs


def test_offset_of_a_deleted_topic_raises_and_returns_no_records(cluster: ReferenceCluster) -> None:
    produce(cluster.bootstrap_servers, [b'old-%d' % i for i in range(10)])
    old_partition_epoch = cluster.partition_epoch(TP)
    stored = stored_position(cluster.bootstrap_servers, 10)
    assert stored.offset == 10
    recreate(cluster, [b'new-%d' % i for i in range(20)])
    assert cluster.partition_epoch(TP) > old_partition_epoch

    consumer = new_consumer(cluster.bootstrap_servers, auto_offset_reset='earliest')
    try:
        consumer.assign([TP])
        consumer.seek(TP, stored.offset, offset_epoch=stored.offset_epoch)
        assert_only_raises(consumer, {TP: old_partition_epoch})
        # Seeking without the offset epoch is the application's way out: it reads the new topic.
        consumer.seek(TP, 10)
        assert [r.value for r in poll_until(consumer, 10)] == [b'new-%d' % i for i in range(10, 20)]
    finally:
        consumer.close()


def test_topic_id_alone_identifies_the_incarnation(cluster: ReferenceCluster) -> None:
    """As on a stock broker (no partition epochs): the offset epoch holds the topic id only."""
    produce(cluster.bootstrap_servers, [b'old-%d' % i for i in range(10)])
    old_topic_id = cluster.topic_id(TOPIC)
    recreate(cluster, [b'new-%d' % i for i in range(20)])
    consumer = new_consumer(cluster.bootstrap_servers)
    try:
        consumer.assign([TP])
        consumer.seek(TP, 10, offset_epoch=OffsetEpoch(0, -1, old_topic_id).to_bytes())
        assert_only_raises(consumer, {TP: -1})
    finally:
        consumer.close()


def test_a_consumer_reading_through_a_recreation_raises_instead_of_reading_on(cluster: ReferenceCluster) -> None:
    produce(cluster.bootstrap_servers, [b'old-%d' % i for i in range(10)])
    old_partition_epoch = cluster.partition_epoch(TP)
    consumer = new_consumer(cluster.bootstrap_servers)
    try:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        assert len(poll_until(consumer, 10)) == 10
        recreate(cluster, [b'new-%d' % i for i in range(20)])
        assert_only_raises(consumer, {TP: old_partition_epoch})
    finally:
        consumer.close()


RESUME_HINT = ('If this cluster holds the same records at the same offsets (a mirror that kept them), resume '
               'with seek(tp, offset) without offset_epoch; otherwise the position does not exist here.')


def stored_position(bootstrap_servers: str, offset: int) -> OffsetAndOffsetEpoch:
    """The position and offset epoch of a consumer that read the partition up to ``offset``."""
    reader = new_consumer(bootstrap_servers, max_poll_records=offset)
    try:
        reader.assign([TP])
        reader.seek(TP, 0)
        assert len(poll_until(reader, offset)) == offset
        return reader.position_and_offset_epoch(TP)
    finally:
        reader.close()


@pytest.fixture
def mirror():
    """A second cluster holding the topic with the same partition epoch as ``cluster``'s and another topic id."""
    with ReferenceCluster(brokers=1) as target:
        target.create_topic(TOPIC, partitions=1, replication_factor=1)
        yield target


def test_offset_epoch_of_another_cluster_raises_on_the_first_poll(cluster, mirror) -> None:
    values = [b'v%d' % i for i in range(10)]
    for copy in (cluster, mirror):
        produce(copy.bootstrap_servers, values)
    assert cluster.partition_epoch(TP) == mirror.partition_epoch(TP) == 1
    source_id, target_id = cluster.topic_id(TOPIC), mirror.topic_id(TOPIC)
    stored = stored_position(cluster.bootstrap_servers, 4)
    consumer = new_consumer(mirror.bootstrap_servers)
    try:
        consumer.assign([TP])
        consumer.seek(TP, stored.offset, offset_epoch=stored.offset_epoch)
        with pytest.raises(InvalidPartitionEpochError) as raised:
            consumer.poll(timeout_ms=10000)
        assert raised.value.partition_epochs == {TP: 1}
        assert str(raised.value) == (
            f'[Error 10001] InvalidPartitionEpochError: epochs-0 at offset 4 with epochs (partition epoch 1, leader '
            f'epoch 0, topic id {source_id}) belongs to another incarnation of the partition than this cluster\'s '
            f'(partition epoch 1, leader epoch 0, topic id {target_id}): the topic was deleted and recreated, or the '
            f'epochs were taken on another cluster. {RESUME_HINT}')
        consumer.seek(TP, stored.offset)   # the mirror kept the offsets: resume there without the epochs
        assert [r.value for r in poll_until(consumer, 6)] == values[4:]
    finally:
        consumer.close()


def test_offset_epoch_ahead_of_this_cluster_warns_then_raises_after_offset_epoch_wait_ms(
        cluster, mirror, caplog) -> None:
    values = [b'v%d' % i for i in range(10)]
    recreate(cluster, values)   # the source's partition epoch is now 3, the mirror's is 1
    produce(mirror.bootstrap_servers, values)
    source_id, target_id = cluster.topic_id(TOPIC), mirror.topic_id(TOPIC)
    stored = stored_position(cluster.bootstrap_servers, 4)
    consumer = new_consumer(mirror.bootstrap_servers, offset_epoch_wait_ms=1000)
    held = f'epochs-0 at offset 4 with epochs (partition epoch 3, leader epoch 0, topic id {source_id})'
    here = f'partition epoch 1, leader epoch 0, topic id {target_id}'
    try:
        consumer.assign([TP])
        consumer.seek(TP, stored.offset, offset_epoch=stored.offset_epoch)
        seeked = time.monotonic()
        with caplog.at_level('WARNING', logger='kafka_kip.consumer.fetcher'):
            with pytest.raises(InvalidPartitionEpochError) as raised:
                poll_until(consumer, 1, seconds=10)   # raises before any record is returned
        assert time.monotonic() - seeked >= 1.0
        assert [r.getMessage() for r in caplog.records if r.name == 'kafka_kip.consumer.fetcher'] == [
            f"Holding {held} until this cluster's metadata reaches those epochs (it has {here}); if it does not "
            'within offset_epoch_wait_ms=1000, poll() raises InvalidPartitionEpochError']
        assert raised.value.partition_epochs == {TP: 3}
        assert str(raised.value) == (
            f"[Error 10001] InvalidPartitionEpochError: {held}: this cluster's metadata has not reached those "
            f'epochs within offset_epoch_wait_ms=1000 ({here}): the epochs were taken on another cluster, or the '
            f'metadata is stuck. {RESUME_HINT}')
        assert_only_raises(consumer, {TP: 3}, polls=2)   # until the application seeks
        consumer.seek(TP, stored.offset)
        assert [r.value for r in poll_until(consumer, 6)] == values[4:]
    finally:
        consumer.close()


def test_offsets_for_times_carry_an_offset_epoch_that_seek_takes(cluster) -> None:
    timestamps = [1_700_000_000_000 + 1000 * i for i in range(6)]
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all')
    try:
        for i, timestamp in enumerate(timestamps):
            producer.send(TOPIC, value=b'v%d' % i, partition=0, timestamp_ms=timestamp).get(10)
    finally:
        producer.close()
    lookup = new_consumer(cluster.bootstrap_servers)
    try:
        found = lookup.offsets_for_times({TP: timestamps[3]})[TP]
    finally:
        lookup.close()
    assert tuple(found) == (3, timestamps[3], 0)   # kafka-python's OffsetAndTimestamp fields
    assert isinstance(found, kafka.structs.OffsetAndTimestamp) and isinstance(found, OffsetAndTimestamp)
    assert OffsetEpoch.from_bytes(found.offset_epoch) == OffsetEpoch(0, cluster.partition_epoch(TP),
                                                                     cluster.topic_id(TOPIC))
    consumer = new_consumer(cluster.bootstrap_servers)
    try:
        consumer.assign([TP])
        consumer.seek(TP, found.offset, offset_epoch=found.offset_epoch)
        assert [r.value for r in poll_until(consumer, 3)] == [b'v3', b'v4', b'v5']
        old_partition_epoch = cluster.partition_epoch(TP)
        recreate(cluster, [b'new-%d' % i for i in range(6)])
        consumer.seek(TP, found.offset, offset_epoch=found.offset_epoch)   # the lookup was in the old topic
        assert_only_raises(consumer, {TP: old_partition_epoch}, polls=1)
    finally:
        consumer.close()


@pytest.mark.reference_cluster(brokers=1)
def test_no_fetch_until_metadata_is_as_new_as_the_offset_epoch(reference_cluster) -> None:
    """The only broker keeps serving stale metadata (leader epoch 0) after the partition moved on to leader
    epoch 1: a position whose offset_epoch says epoch 1 is held until the metadata says so too."""
    reference_cluster.create_topic(TOPIC, partitions=1, replication_factor=1)
    produce(reference_cluster.bootstrap_servers, [b'v%d' % i for i in range(10)])
    reference_cluster.delay_metadata(0)
    assert reference_cluster.elect_leader(TP, 0) == 1
    offset_epoch = OffsetEpoch(1, reference_cluster.partition_epoch(TP), reference_cluster.topic_id(TOPIC)).to_bytes()
    plain = new_consumer(reference_cluster.bootstrap_servers)
    held = new_consumer(reference_cluster.bootstrap_servers)
    try:
        plain.assign([TP])
        plain.seek(TP, 5)
        assert [r.value for r in poll_until(plain, 5)] == [b'v%d' % i for i in range(5, 10)]

        held.assign([TP])
        held.seek(TP, 5, offset_epoch=offset_epoch)
        assert poll_until(held, 1, seconds=2) == []
        assert held._subscription.assignment[TP].held_for_leader_epoch == 1   # held for leader epoch 1, not slow
        reference_cluster.release_metadata(0)
        assert [r.value for r in poll_until(held, 5)] == [b'v%d' % i for i in range(5, 10)]
    finally:
        plain.close()
        held.close()


def test_commit_of_a_position_in_a_deleted_incarnation_is_refused(cluster: ReferenceCluster) -> None:
    produce(cluster.bootstrap_servers, [b'old-%d' % i for i in range(10)])
    old_partition_epoch = cluster.partition_epoch(TP)
    consumer = new_consumer(cluster.bootstrap_servers, group_id='committer')
    try:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        poll_until(consumer, 10)
        recreate(cluster, [b'new-%d' % i for i in range(20)])
        with pytest.raises(InvalidPartitionEpochError) as raised:
            consumer.commit()
        assert raised.value.partition_epochs == {TP: old_partition_epoch}
        assert consumer.committed(TP) is None   # the new topic has no committed offset
    finally:
        consumer.close()


def test_a_commit_on_a_new_coordinator_connection_carries_the_partition_epoch(cluster: ReferenceCluster) -> None:
    # The commit is the first request on the coordinator's connection: it waits for the broker's features.
    epoch = cluster.partition_epoch(TP)
    committer = new_consumer(cluster.bootstrap_servers, group_id='first-request')
    try:
        committer.commit({TP: OffsetAndMetadata(3, '', 0, partition_epoch=epoch, timestamp=1_700_000_000_000)})
    finally:
        committer.close()
    reader = new_consumer(cluster.bootstrap_servers, group_id='first-request')
    try:
        assert reader.committed(TP, metadata=True) == OffsetAndMetadata(3, '', 0, partition_epoch=epoch,
                                                                        timestamp=1_700_000_000_000)
    finally:
        reader.close()


def test_commit_with_an_older_leader_epoch_than_committed_is_refused(cluster: ReferenceCluster) -> None:
    produce(cluster.bootstrap_servers, [b'v%d' % i for i in range(3)])
    cluster.elect_leader(TP, cluster.replicas(TP)[1])                              # leader epoch 0 -> 1
    epoch = cluster.partition_epoch(TP)
    consumer = new_consumer(cluster.bootstrap_servers, group_id='committer')
    try:
        consumer.assign([TP])
        consumer.commit({TP: OffsetAndMetadata(3, '', 1, partition_epoch=epoch)})
        with pytest.raises(InvalidLeaderEpochError) as raised:
            consumer.commit({TP: OffsetAndMetadata(2, '', 0, partition_epoch=epoch)})
        assert str(raised.value) == ('[Error 10008] InvalidLeaderEpochError: Commit refused: the leader epoch of '
                                     'the offset is older than the one committed before for epochs-0 (leader epoch 0)')
        assert consumer.committed(TP) == 3
    finally:
        consumer.close()
