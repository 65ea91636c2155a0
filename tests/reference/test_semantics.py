"""Kafka semantics of the reference cluster, asserted over the wire.

Leader epochs and truncation (KIP-101/279/320), OffsetForLeaderEpoch, fencing, stale metadata and
zombie leaders (KAFKA-6880), partition epochs (KIP-232), produce-with-offsets (KIP-391),
idempotence, acks/min.insync.replicas, timestamps and ListOffsets, DeleteRecords, fetch waiting.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from kafka import TopicPartition
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import (
    CLUSTER_AUTHORIZATION_FAILED,
    CORRUPT_MESSAGE,
    FENCED_LEADER_EPOCH,
    INVALID_PRODUCE_OFFSET,
    INVALID_RECORD,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import (
    fetch_request,
    list_offsets_request,
    metadata_request,
    offset_for_leader_epoch_request,
    produce_request,
)
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.batches import build_batch, iter_records, parse_header
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient

T0 = TopicPartition('t', 0)


@pytest.fixture
def cluster(reference_cluster: ReferenceCluster) -> ReferenceCluster:
    return reference_cluster


def wire_to(cluster, broker_id):
    return WireClient(cluster.brokers()[broker_id])


def produce(cluster, broker_id, *values, tp=T0, acks=-1, use_offset=False, base_offset=0, timestamps=None,
            producer=(-1, -1, -1), records=None):
    pid, epoch, seq = producer
    records = records or build_batch([(None, v) for v in values], base_offset=base_offset, timestamps=timestamps,
                                     producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    with wire_to(cluster, broker_id) as wire:
        response = wire.request(produce_request(tp.topic, tp.partition, records, acks=acks, use_offset=use_offset))
    return response.responses[0].partition_responses[0]


def fetch(cluster, broker_id, offset, tp=T0, **kwargs):
    with wire_to(cluster, broker_id) as wire:
        response = wire.request(fetch_request(tp.topic, tp.partition, offset, **kwargs))
    return response.responses[0].partitions[0]


def fetched(partition) -> list[tuple[int, int, bytes]]:
    """(offset, leader_epoch, value) of the records in a fetched partition."""
    data, pos, out = bytes(partition.records or b''), 0, []
    while pos < len(data):
        header = parse_header(data, pos)
        out.extend((r.offset, header.partition_leader_epoch, r.value)
                   for r in iter_records(data[pos:pos + header.size]))
        pos += header.size
    return out


def epoch_end(cluster, broker_id, epoch, current=-1, tp=T0):
    with wire_to(cluster, broker_id) as wire:
        part = wire.request(offset_for_leader_epoch_request(tp.topic, tp.partition, epoch, current)).topics[0]
    p = part.partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


def list_offset(cluster, broker_id, timestamp, tp=T0, current=-1):
    with wire_to(cluster, broker_id) as wire:
        p = wire.request(list_offsets_request(tp.topic, tp.partition, timestamp, current)).topics[0].partitions[0]
    return p.error_code, p.timestamp, p.offset, p.leader_epoch, p.partition_epoch


def kv(cluster, tp=T0, broker_id=None):
    return [(r.offset, r.leader_epoch, r.value) for r in cluster.records(tp, broker_id)]


# -- leader epochs and truncation -------------------------------------------------------------------


def test_unclean_election_truncates_every_replica_to_the_new_leader(cluster):
    cluster.create_topic('t', 1, 3)
    produce(cluster, 0, b'a', b'b')
    cluster.pause_replication(T0, 2)
    produce(cluster, 0, b'c')
    produce(cluster, 0, b'd')
    assert cluster.isr(T0) == [0, 1]
    assert cluster.elect_leader(T0, 2, unclean=True) == 1
    expected = [(0, 0, b'a'), (1, 0, b'b')]
    for broker in (0, 1, 2):
        assert kv(cluster, broker_id=broker) == expected
    assert cluster.isr(T0) == [0, 1, 2]  # paused follower 2 is now the leader, 0 and 1 truncated and rejoined
    assert produce(cluster, 2, b'e').base_offset == 2
    expected.append((2, 1, b'e'))
    for broker in (0, 1, 2):
        assert kv(cluster, broker_id=broker) == expected
        assert cluster.epochs(T0, broker) == [(0, 0), (1, 2)]


def test_out_of_sync_replica_truncates_when_it_resumes(cluster):
    cluster.create_topic('t', 1, 3)
    produce(cluster, 0, b'a')
    cluster.pause_replication(T0, 1)
    cluster.pause_replication(T0, 2)
    produce(cluster, 0, b'b', b'c')
    cluster.elect_leader(T0, 1, unclean=True)  # 0 copies from 1 at once; 2 stays paused
    assert kv(cluster, broker_id=0) == [(0, 0, b'a')]
    produce(cluster, 1, b'x')
    assert kv(cluster, broker_id=2) == [(0, 0, b'a')]
    cluster.resume_replication(T0, 2)
    assert kv(cluster, broker_id=2) == [(0, 0, b'a'), (1, 1, b'x')]
    assert cluster.high_watermark(T0) == 2


def test_offset_for_leader_epoch_answers_kafkas_rules(cluster):
    cluster.create_topic('t', 1, 3)
    produce(cluster, 0, b'a', b'b', b'c')       # epoch 0: 0-2
    cluster.elect_leader(T0, 1)                 # epoch 1: no records
    cluster.elect_leader(T0, 2)                 # epoch 2: 3-4
    produce(cluster, 2, b'd', b'e')
    cluster.elect_leader(T0, 0)                 # epoch 3: 5
    produce(cluster, 0, b'f')
    assert cluster.epochs(T0) == [(0, 0), (2, 3), (3, 5)]
    assert epoch_end(cluster, 0, 0) == (NONE, 0, 3)       # known epoch: start of the next one
    assert epoch_end(cluster, 0, 1) == (NONE, 0, 3)       # between known: largest below, next start
    assert epoch_end(cluster, 0, 2) == (NONE, 2, 5)
    assert epoch_end(cluster, 0, 3) == (NONE, 3, 6)       # current epoch: the log end offset
    assert epoch_end(cluster, 0, 4) == (NONE, -1, -1)     # unknown (newer): UNDEFINED
    assert epoch_end(cluster, 0, 2, current=3) == (NONE, 2, 5)
    assert epoch_end(cluster, 0, 2, current=2)[0] == FENCED_LEADER_EPOCH
    assert epoch_end(cluster, 0, 2, current=4)[0] == UNKNOWN_LEADER_EPOCH
    assert epoch_end(cluster, 1, 2, current=3)[0] == NOT_LEADER_OR_FOLLOWER
    assert epoch_end(cluster, 1, 2, current=2)[0] == FENCED_LEADER_EPOCH  # epoch checked before leadership


def test_fetch_fences_epochs_and_reports_diverging_epochs(cluster):
    cluster.create_topic('t', 1, 3)
    produce(cluster, 0, b'a', b'b')
    cluster.elect_leader(T0, 1)
    produce(cluster, 1, b'c')
    assert fetched(fetch(cluster, 1, 0, current_leader_epoch=1)) == [(0, 0, b'a'), (1, 0, b'b'), (2, 1, b'c')]
    assert fetch(cluster, 1, 0, current_leader_epoch=0).error_code == FENCED_LEADER_EPOCH
    assert fetch(cluster, 1, 0, current_leader_epoch=2).error_code == UNKNOWN_LEADER_EPOCH
    assert fetch(cluster, 0, 0, current_leader_epoch=1).error_code == NOT_LEADER_OR_FOLLOWER
    assert fetch(cluster, 0, 0).current_leader.leader_id == 1
    # A consumer that read epoch 0 up to offset 3 (which the leader never had): diverging epoch (0, 2).
    diverged = fetch(cluster, 1, 3, current_leader_epoch=1, last_fetched_epoch=0)
    assert (diverged.error_code, diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (NONE, 0, 2)
    assert fetched(diverged) == []
    ok = fetch(cluster, 1, 2, current_leader_epoch=1, last_fetched_epoch=0)
    assert (ok.diverging_epoch, fetched(ok)) == (None, [(2, 1, b'c')])
    assert fetch(cluster, 1, 4).error_code == OFFSET_OUT_OF_RANGE


# -- stale metadata and zombie leaders -------------------------------------------------------------


def test_delayed_broker_serves_stale_metadata(cluster):
    cluster.create_topic('t', 1, 3)
    cluster.delay_metadata(2)
    cluster.create_topic('u', 1, 3)
    cluster.elect_leader(T0, 1)
    with wire_to(cluster, 2) as wire:
        stale = wire.request(metadata_request(['t', 'u']))
    assert [(t.name, t.error_code) for t in stale.topics] == [('t', NONE), ('u', UNKNOWN_TOPIC_OR_PARTITION)]
    assert (stale.topics[0].partitions[0].leader_id, stale.topics[0].partitions[0].leader_epoch) == (0, 0)
    assert stale.max_partition_epoch == 1
    cluster.release_metadata(2)
    with wire_to(cluster, 2) as wire:
        fresh = wire.request(metadata_request(['t', 'u']))
    assert [(t.name, t.error_code) for t in fresh.topics] == [('t', NONE), ('u', NONE)]
    assert (fresh.topics[0].partitions[0].leader_id, fresh.topics[0].partitions[0].leader_epoch) == (1, 1)
    assert fresh.max_partition_epoch == 2


def test_zombie_leader_keeps_its_old_epoch_until_released_then_truncates(cluster):
    cluster.create_topic('t', 1, 3)
    produce(cluster, 0, b'a')
    cluster.delay_metadata(0)                 # the leader stops hearing from the controller
    cluster.elect_leader(T0, 1)               # epoch 1 on broker 1; broker 0 does not know
    assert cluster.isr(T0) == [1, 2]
    zombie_write = produce(cluster, 0, b'lost', acks=1)
    assert (zombie_write.error_code, zombie_write.base_offset) == (NONE, 1)
    assert produce(cluster, 1, b'b').base_offset == 1
    assert kv(cluster, broker_id=0) == [(0, 0, b'a'), (1, 0, b'lost')]
    # Clients that follow the zombie get its old epoch; clients with the new epoch are told it is unknown.
    assert fetched(fetch(cluster, 0, 1, current_leader_epoch=0)) == [(1, 0, b'lost')]
    assert fetch(cluster, 0, 1, current_leader_epoch=1).error_code == UNKNOWN_LEADER_EPOCH
    assert epoch_end(cluster, 1, 0) == (NONE, 0, 1)   # what the zombie's reader needs to detect truncation
    cluster.release_metadata(0)
    for broker in (0, 1, 2):
        assert kv(cluster, broker_id=broker) == [(0, 0, b'a'), (1, 1, b'b')]
    assert cluster.isr(T0) == [0, 1, 2]
    assert produce(cluster, 0, b'x').error_code == NOT_LEADER_OR_FOLLOWER


# -- partition epochs (KIP-232) --------------------------------------------------------------------


def test_recreated_topic_gets_a_new_topic_id_and_new_partition_epochs(cluster):
    first_id = cluster.create_topic('t', 2, 3)
    produce(cluster, 0, b'a')
    assert fetch(cluster, 0, 0).partition_epoch == 1
    assert list_offset(cluster, 0, -1)[2:] == (1, 0, 1)
    cluster.delete_topic('t')
    second_id = cluster.create_topic('t', 2, 3)
    assert second_id != first_id
    with wire_to(cluster, 0) as wire:
        response = wire.request(metadata_request(['t']))
    assert response.max_partition_epoch == 5
    assert [p.partition_epoch for p in response.topics[0].partitions] == [4, 5]
    assert response.topics[0].topic_id == second_id
    assert fetch(cluster, 0, 0).partition_epoch == 4
    assert fetch(cluster, 0, 1).error_code == OFFSET_OUT_OF_RANGE  # the old records are gone


def test_topic_ids_address_partitions_from_produce_and_fetch_v13(cluster):
    topic_id = cluster.create_topic('t', 1, 3)
    with wire_to(cluster, 0) as wire:
        produced = wire.request(produce_request('', 0, build_batch([(None, b'a')]), version=13, topic_id=topic_id))
        fetched_v13 = wire.request(fetch_request('', 0, 0, version=13, topic_id=topic_id))
        unknown = wire.request(fetch_request('', 0, 0, version=13, topic_id=uuid.uuid4()))
        by_id = wire.request(REQUESTS[ApiKey.Metadata](version=12, topics=[REQUESTS[ApiKey.Metadata].MetadataRequestTopic(name=None, topic_id=topic_id)],
                                         allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert (produced.responses[0].topic_id, produced.responses[0].partition_responses[0].base_offset) == (topic_id, 0)
    topic = fetched_v13.responses[0]
    assert (topic.topic_id, fetched(topic.partitions[0])) == (topic_id, [(0, 0, b'a')])
    assert unknown.responses[0].partitions[0].error_code == UNKNOWN_TOPIC_ID
    assert (by_id.topics[0].name, by_id.topics[0].partitions[0].partition_epoch) == ('t', 1)


# -- produce with offsets (KIP-391) ---------------------------------------------------------------


def test_produce_with_offsets_writes_at_the_given_offsets_with_gaps(cluster):
    cluster.create_topic('t', 1, 3)
    first = produce(cluster, 0, b'a', b'b', use_offset=True, base_offset=5)
    assert (first.error_code, first.base_offset, first.log_end_offset) == (NONE, 5, 7)
    second = produce(cluster, 0, b'c', use_offset=True, base_offset=10)
    assert (second.base_offset, second.log_end_offset) == (10, 11)
    for broker in (0, 1, 2):
        assert kv(cluster, broker_id=broker) == [(5, 0, b'a'), (6, 0, b'b'), (10, 0, b'c')]
    assert fetched(fetch(cluster, 0, 7)) == [(10, 0, b'c')]     # a fetch inside a gap skips it
    assert fetched(fetch(cluster, 0, 0)) == [(5, 0, b'a'), (6, 0, b'b'), (10, 0, b'c')]
    assert list_offset(cluster, 0, -1)[:3] == (NONE, -1, 11)
    assert produce(cluster, 0, b'd').base_offset == 11           # plain produce continues at the end
    refused = produce(cluster, 0, b'e', use_offset=True, base_offset=11)
    assert (refused.error_code, refused.log_end_offset) == (INVALID_PRODUCE_OFFSET, 12)
    gapped = build_batch([(None, b'f'), (None, b'g')], base_offset=20, offset_deltas=[0, 2])
    assert produce(cluster, 0, records=gapped, use_offset=True).error_code == INVALID_RECORD  # offset range != count
    assert cluster.log_end_offset(T0) == 12


def test_produce_with_offsets_requires_replicator_write(reference_cluster_factory):
    users = {'alice': 'a', 'bob': 'b'}
    cluster = reference_cluster_factory(brokers=1, users=users, replicator_principals={'alice'})
    cluster.create_topic('t', 1, 1)
    for user, expected in (('bob', CLUSTER_AUTHORIZATION_FAILED), ('alice', NONE)):
        with wire_to(cluster, 0) as wire:
            wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN'))
            wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=b'\0' + user.encode() + b'\0' + users[user].encode()))
            response = wire.request(produce_request('t', 0, build_batch([(None, b'v')], base_offset=3),
                                                    use_offset=True))
        assert response.responses[0].partition_responses[0].error_code == expected
    assert [(r.offset, r.value) for r in cluster.records(T0)] == [(3, b'v')]


# -- idempotence, acks, corruption ------------------------------------------------------------------


def test_idempotent_producer_duplicates_and_sequence_gaps(cluster):
    cluster.create_topic('t', 1, 3)
    assert produce(cluster, 0, b'a', b'b', producer=(42, 0, 0)).base_offset == 0
    assert produce(cluster, 0, b'c', producer=(42, 0, 2)).base_offset == 2
    duplicate = produce(cluster, 0, b'a', b'b', producer=(42, 0, 0))
    assert (duplicate.error_code, duplicate.base_offset) == (NONE, 0)
    assert produce(cluster, 0, b'x', producer=(42, 0, 7)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    cluster.elect_leader(T0, 1)  # producer state is replicated: the new leader still deduplicates
    assert produce(cluster, 1, b'c', producer=(42, 0, 2)).base_offset == 2
    assert [r.value for r in cluster.records(T0)] == [b'a', b'b', b'c']


def test_acks_all_needs_min_insync_replicas(cluster):
    cluster.create_topic('t', 1, 3, configs={'min.insync.replicas': '2'})
    cluster.pause_replication(T0, 1)
    assert produce(cluster, 0, b'a').error_code == NONE
    cluster.pause_replication(T0, 2)
    assert produce(cluster, 0, b'b').error_code == NOT_ENOUGH_REPLICAS
    assert produce(cluster, 0, b'c', acks=1).base_offset == 1
    cluster.resume_replication(T0, 2)
    assert produce(cluster, 0, b'd').base_offset == 2


def test_corrupt_batch_is_refused(cluster):
    cluster.create_topic('t', 1, 3)
    bad = bytearray(build_batch([(None, b'v')]))
    bad[-1] ^= 1
    assert produce(cluster, 0, records=bytes(bad)).error_code == CORRUPT_MESSAGE
    assert cluster.log_end_offset(T0) == 0


# -- timestamps, ListOffsets, DeleteRecords --------------------------------------------------------


def test_list_offsets_by_timestamp_earliest_latest_and_max(cluster):
    cluster.create_topic('t', 1, 3)
    produce(cluster, 0, b'a', b'b', timestamps=[1000, 3000])
    cluster.elect_leader(T0, 1)
    produce(cluster, 1, b'c', b'd', timestamps=[2000, 2500])
    assert list_offset(cluster, 1, 1500) == (NONE, 3000, 1, 0, 1)
    assert list_offset(cluster, 1, 3001) == (NONE, -1, -1, -1, 1)
    assert list_offset(cluster, 1, -2) == (NONE, -1, 0, 0, 1)
    assert list_offset(cluster, 1, -1) == (NONE, -1, 4, 1, 1)
    assert list_offset(cluster, 1, -3) == (NONE, 3000, 1, 0, 1)
    assert list_offset(cluster, 1, -1, current=0)[0] == FENCED_LEADER_EPOCH
    assert list_offset(cluster, 0, -1)[0] == NOT_LEADER_OR_FOLLOWER


def test_log_append_time_topics_stamp_the_broker_time(cluster):
    cluster.create_topic('t', 1, 3, configs={'message.timestamp.type': 'LogAppendTime'})
    before = int(time.time() * 1000)
    response = produce(cluster, 0, b'a', b'b', timestamps=[1, 2])
    assert before <= response.log_append_time_ms <= int(time.time() * 1000)
    records = list(iter_records(fetch(cluster, 0, 0).records))
    assert [r.timestamp for r in records] == [response.log_append_time_ms] * 2
    assert list_offset(cluster, 0, before)[1:3] == (response.log_append_time_ms, 0)


def test_delete_records_moves_the_log_start_on_every_replica(cluster):
    cluster.create_topic('t', 1, 3)
    produce(cluster, 0, b'a', b'b', b'c')
    with wire_to(cluster, 0) as wire:
        request_class = REQUESTS[ApiKey.DeleteRecords]
        topic_class = request_class.DeleteRecordsTopic
        response = wire.request(request_class(version=2, timeout_ms=1000, topics=[topic_class(
            name='t', partitions=[topic_class.DeleteRecordsPartition(partition_index=0, offset=2)])]))
    partition = response.topics[0].partitions[0]
    assert (partition.error_code, partition.low_watermark) == (NONE, 2)
    for broker in (0, 1, 2):
        assert cluster.log_start_offset(T0, broker) == 2
        assert [r.value for r in cluster.records(T0, broker)] == [b'c']
    assert fetch(cluster, 0, 1).error_code == OFFSET_OUT_OF_RANGE
    assert list_offset(cluster, 0, -2)[2] == 2


# -- fetch waiting ------------------------------------------------------------------------------------


def parked_fetch(cluster, wake, tp=T0):
    """A fetch of ``tp`` at broker 0 from offset 0 whose max wait (10 min) outlasts the client's timeout: once it is at
    the broker, ``wake()`` runs; the fetch is answered only if the broker wakes it. Returns the partition answered."""
    arrived = threading.Event()
    handle = cluster.control(ApiKey.Fetch, lambda request: arrived.set() if request.client_id == 'parked' else None,
                             broker_id=0, keep=True)
    answers = []
    wire = WireClient(cluster.brokers()[0], client_id='parked', timeout=60)
    fetching = threading.Thread(target=lambda: answers.append(wire.request(
        fetch_request(tp.topic, tp.partition, 0, max_wait_ms=600_000))))
    fetching.start()
    try:
        # the broker handles a request from its control to its wait without serving another connection
        wait_until(arrived.is_set, 'the fetch at broker 0')
        wake()
    finally:
        fetching.join(90)
        handle.remove()
        wire.close()
    assert answers, 'the parked fetch got no answer'
    return answers[0].responses[0].partitions[0]


def test_fetch_waits_for_data_up_to_max_wait(cluster):
    cluster.create_topic('t', 1, 3)
    started = time.monotonic()
    empty = fetch(cluster, 0, 0, max_wait_ms=300)
    assert time.monotonic() - started >= 0.25
    assert (empty.error_code, fetched(empty)) == (NONE, [])
    woken = parked_fetch(cluster, lambda: produce(cluster, 0, b'late'))
    assert fetched(woken) == [(0, 0, b'late')]


def test_fetch_waiting_on_a_partition_returns_when_leadership_moves(cluster):
    cluster.create_topic('t', 1, 3)
    moved = parked_fetch(cluster, lambda: cluster.elect_leader(T0, 1))
    assert moved.error_code == NOT_LEADER_OR_FOLLOWER
