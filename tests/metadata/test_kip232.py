"""KIP-232 metadata freshness end to end: stale broker metadata, a zombie leader, a recreated topic.

Every scenario runs on a 3-broker reference cluster without ``kip.1243``: with it, a broker whose metadata is
older than the client's consistency context never answers from it, so KIP-232's checks would see no stale view
(tests/metadata/test_kip1243_scenarios.py covers that). A client's metadata request is sent to the broker the scenario
needs (``refresh_from``), on the client's own network thread, so which view it gets is exact.
"""
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kafka
import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

import kafka_kip
from kafka_kip.metadata import Epochs, KipClusterMetadata, KipNetClient
from kafka_kip_reference import Drop, ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.fresh import FreshProcess

pytestmark = pytest.mark.kip232

TP = TopicPartition('t', 0)
CONSUMER = Path(__file__).resolve().parents[1] / 'support' / 'scenarios' / 'consumer.py'


@pytest.fixture
def cluster(reference_cluster_factory) -> ReferenceCluster:
    return reference_cluster_factory(features=('kip.232', 'kip.391'))


def manager_of(client):
    return client._sender._client._manager if isinstance(client, kafka.KafkaProducer) else client._manager


def refresh_from(client, broker_id):
    """One metadata request to ``broker_id``, applied (or refused) by the client's cluster."""
    manager = manager_of(client)
    # Not merged into a refresh of the client's own that is under way (it could go to any broker).
    wait_until(lambda: not manager.cluster.metadata_refresh_in_progress, 'no metadata refresh in progress')
    future = manager.call_soon(manager.cluster.refresh_metadata, broker_id)
    wait_until(lambda: future.is_done, f'the metadata response of broker {broker_id}')
    if future.failed():
        raise future.exception


def metadata_settled(cluster) -> bool:
    """No metadata refresh wanted or under way (a client that refused outdated metadata asks again, of a
    broker it picks at random, until an answer is applied)."""
    return not cluster.need_update and not cluster.metadata_refresh_in_progress


def count_metadata_requests(cluster, broker_id) -> tuple[list[int], Any]:
    """The Metadata requests that reach ``broker_id`` from now on (their correlation ids), and the handle."""
    asked: list[int] = []
    return asked, cluster.control(ApiKey.Metadata, lambda request: asked.append(request.correlation_id),
                                  broker_id=broker_id, keep=True)


def kip_producer(cluster, **configs):
    return kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, kafka_client=KipNetClient,
                               acks='all', **configs)


def produce(producer, values):
    for value in values:
        producer.send(TP.topic, value=value, partition=TP.partition)
    producer.flush()




def fresh_consumer(cluster, kip):
    """A consumer assigned t-0 that has its metadata, in a fresh process (stock: one that never imported
    kafka_kip)."""
    consumer = FreshProcess(CONSUMER, stock=not kip)
    consumer.call('start', kip, {'bootstrap_servers': cluster.bootstrap_servers, 'enable_auto_commit': False,
                                 'fetch_max_wait_ms': 100})
    consumer.call('assign', [['t', 0]])
    consumer.call('load_metadata')
    return consumer


R = [b'r%d' % i for i in range(5)]
R_SEEN = [[i, 0, f'r{i}'] for i in range(5)]


@contextmanager
def writers_before_a_fault(cluster) -> Iterator[tuple[kafka.KafkaProducer, kafka.KafkaProducer]]:
    """Topic t holding R, and two writers that learnt "leader 0 at epoch 0" before the fault: unmodified
    kafka-python (which follows a zombie) and one with kafka_kip's metadata (:func:`kip_producer`)."""
    cluster.create_topic('t', partitions=1, replication_factor=3)
    with kip_producer(cluster) as producer:
        produce(producer, R)
    zombie_writer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1)
    good_writer = kip_producer(cluster)
    try:
        assert zombie_writer.partitions_for('t') == good_writer.partitions_for('t') == {0}
        yield zombie_writer, good_writer
    finally:
        zombie_writer.close(timeout=5)
        good_writer.close(timeout=5)


@pytest.mark.parametrize('kip', [True, False], ids=['kafka_kip', 'stock'])
def test_stale_broker_metadata(cluster, kip):
    cluster.create_topic('t', partitions=1, replication_factor=3)
    with kip_producer(cluster) as producer:
        produce(producer, R)
    with fresh_consumer(cluster, kip) as consumer:   # knows leader 0 at epoch 0, as every broker does
        cluster.delay_metadata(2)             # broker 2 keeps serving: leader 0 at epoch 0
        assert cluster.elect_leader(TP, 1) == 1
        partition_epoch = cluster.partition_epoch(TP)
        consumer.call('refresh_from', 1)
        assert consumer.call('metadata', 't', 0)['leader'] == 1
        stale_answers, counting = count_metadata_requests(cluster, 2)
        consumer.call('refresh_from', 2)
        consumer.call('seek', 't', 0, 0)
        seen = consumer.call('poll_until_records', 5)
        if kip:
            # every answer of the stale broker refused (the one asked for, and any of the consumer's own retries)
            consumer.call('wait_for_metadata_settled')
            counting.remove()
            assert consumer.call('metadata', 't', 0) == {
                'leader': 1, 'leader_epoch': 1, 'partition_epoch': partition_epoch,
                'outdated_responses': len(stale_answers)}
            assert seen['records'] == R_SEEN
            assert set(seen['fetched_from']) == {1}
        else:
            # kafka-python takes the stale view and fetches from the old leader first (which refuses it).
            assert seen['records'] == R_SEEN
            assert seen['fetched_from'][0] == 0
        consumer.call('close')


def test_stale_broker_metadata_producer(cluster):
    cluster.create_topic('t', partitions=1, replication_factor=3)
    producer = kip_producer(cluster)
    try:
        produce(producer, R[:1])
        cluster.delay_metadata(2)
        assert cluster.elect_leader(TP, 1) == 1
        refresh_from(producer, 1)
        stale_answers, counting = count_metadata_requests(cluster, 2)
        refresh_from(producer, 2)
        metadata = producer._metadata
        wait_until(lambda: metadata_settled(metadata), 'the producer to apply fresh metadata')
        counting.remove()
        assert metadata.outdated_responses == len(stale_answers)  # the one asked for, and any retries of its own
        assert (metadata.leader_for_partition(TP), metadata.leader_epoch_for_partition(TP)) == (1, 1)
        produce(producer, R[1:])
        assert [(r.offset, r.leader_epoch, r.value) for r in cluster.records(TP)] == \
            [(0, 0, b'r0')] + [(i, 1, b'r%d' % i) for i in range(1, 5)]
    finally:
        producer.close(timeout=5)


@pytest.mark.parametrize('kip', [True, False], ids=['kafka_kip', 'stock'])
def test_zombie_leader(cluster, kip):
    with writers_before_a_fault(cluster) as (zombie_writer, good_writer), fresh_consumer(cluster, kip) as consumer:
        cluster.delay_metadata(0)             # broker 0 stays leader at epoch 0: a zombie
        assert cluster.elect_leader(TP, 1) == 1
        produce(zombie_writer, [b'z5', b'z6', b'z7'])
        refresh_from(good_writer, 1)
        produce(good_writer, [b'g5', b'g6', b'g7'])
        assert [(r.offset, r.leader_epoch, r.value) for r in cluster.records(TP, broker_id=0)][4:] == \
            [(4, 0, b'r4'), (5, 0, b'z5'), (6, 0, b'z6'), (7, 0, b'z7')]
        assert [(r.offset, r.leader_epoch, r.value) for r in cluster.records(TP, broker_id=1)][4:] == \
            [(4, 0, b'r4'), (5, 1, b'g5'), (6, 1, b'g6'), (7, 1, b'g7')]

        consumer.call('refresh_from', 1)
        consumer.call('refresh_from', 0)      # the zombie's view: leader 0, epoch 0
        consumer.call('seek', 't', 0, 0)
        seen = consumer.call('poll_until_records', 8)
        if kip:
            assert seen['records'] == R_SEEN + [[5, 1, 'g5'], [6, 1, 'g6'], [7, 1, 'g7']]
            assert set(seen['fetched_from']) == {1}
        else:
            # kafka-python 3.0.12 follows the zombie and returns its diverged records.
            assert seen['records'] == R_SEEN + [[5, 0, 'z5'], [6, 0, 'z6'], [7, 0, 'z7']]
            assert set(seen['fetched_from']) == {0}
        consumer.call('close')


@pytest.mark.parametrize('kip', [True, False], ids=['kafka_kip', 'stock'])
def test_group_member_resuming_a_committed_offset_waits_for_metadata_of_its_epochs(cluster, kip):
    """A new group member resumes at offset 6, committed under leader epoch 1, while every broker it gets
    metadata from says leader 0 at epoch 0: broker 2 is stale, broker 0 a zombie that took records of its own,
    and broker 1 (the leader, the one that knows epoch 1) drops Metadata requests until the stale phase ends.
    kafka_kip waits until its metadata reaches epoch 1; unmodified kafka-python (in a process that never
    imported kafka_kip) fetches from the zombie at once and returns its records."""
    with writers_before_a_fault(cluster) as (zombie_writer, good_writer):
        cluster.delay_metadata(0)             # broker 0 stays leader at epoch 0: a zombie
        cluster.delay_metadata(2)             # broker 2 keeps saying so
        assert cluster.elect_leader(TP, 1) == 1
        produce(zombie_writer, [b'z5', b'z6', b'z7'])
        refresh_from(good_writer, 1)
        produce(good_writer, [b'g5', b'g6', b'g7'])
        assert [r.value for r in cluster.records(TP, broker_id=1)][5:] == [b'g5', b'g6', b'g7']
        assert [r.value for r in cluster.records(TP, broker_id=0)][5:] == [b'z5', b'z6', b'z7']
        group = next(g for g in (f'resume-{i}' for i in range(100)) if cluster.state.coordinator_for(g) == 2)
        committer = kafka_kip.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                                            enable_auto_commit=False)
        committer.commit({TP: kafka_kip.OffsetAndMetadata(6, '', 1, partition_epoch=cluster.partition_epoch(TP))})
        committer.close()
    fresh_metadata_refused = cluster.control(ApiKey.Metadata, lambda request: Drop(), broker_id=1, keep=True)
    stale = cluster.brokers()[2]
    with FreshProcess(CONSUMER, stock=not kip) as member:
        member.call('start', kip, {'topics': ['t'], 'bootstrap_servers': f'{stale.host}:{stale.port}',
                                   'group_id': group, 'enable_auto_commit': False, 'auto_offset_reset': 'none',
                                   'fetch_max_wait_ms': 100})
        if kip:
            seen = member.call('poll_until_positioned', 't-0')   # joined, assigned, at the committed offset
            assert seen == {'positions': {'t-0': 6}, 'records': [], 'fetched_from': []}
            seen = member.call('poll_times', 10)
            assert (seen['records'], seen['fetched_from']) == ([], [])
            fresh_metadata_refused.remove()
            for broker in (0, 2):
                cluster.release_metadata(broker)
            seen = member.call('poll_until_records', 2)
            assert seen['records'] == [[6, 1, 'g6'], [7, 1, 'g7']]
            assert set(seen['fetched_from']) == {1}
        else:
            seen = member.call('poll_until_records', 2)
            assert seen['records'] == [[6, 0, 'z6'], [7, 0, 'z7']]
            assert seen['fetched_from'][0] == 0
        member.call('close')


def test_topic_deleted_and_recreated(cluster):
    old_id = cluster.create_topic('t', partitions=2, replication_factor=3)
    assert cluster.elect_leader(TP, 1) == 1 and cluster.elect_leader(TP, 2) == 2
    producer = kip_producer(cluster)
    try:
        produce(producer, [b'old'])
        metadata = producer._metadata
        refresh_from(producer, 1)
        assert (metadata.topic_id('t'), metadata.epochs_for_partition(TP), metadata.max_partition_epoch) == \
            (old_id, Epochs(leader_epoch=2, partition_epoch=1), 2)

        cluster.delay_metadata(0)             # broker 0 will keep serving the old incarnation
        cluster.delete_topic('t')
        new_id = cluster.create_topic('t', partitions=1, replication_factor=3)
        assert (cluster.leader_epoch(TP), cluster.partition_epoch(TP)) == (0, 4)
        assert cluster.max_partition_epoch() == 4

        refresh_from(producer, 1)
        assert metadata.outdated_responses == 0
        # the new incarnation's leader epoch is unknown until seen again (kafka-python resets it on a new topic id)
        assert (metadata.topic_id('t'), metadata.epochs_for_partition(TP), metadata.max_partition_epoch) == \
            (new_id, Epochs(leader_epoch=-1, partition_epoch=4), 4)
        assert metadata.partitions_for_topic('t') == {0}

        refresh_from(producer, 0)             # old topic id, higher leader epoch, lower max partition epoch
        assert metadata.outdated_responses == 1
        assert (metadata.topic_id('t'), metadata.epochs_for_partition(TP)) == (new_id, Epochs(-1, 4))

        # No wedge: the new incarnation takes writes, and its leader epoch is known again at the next refresh.
        assert producer.send('t', value=b'new', partition=0).get(timeout=10).offset == 0
        refresh_from(producer, 1)
        assert (metadata.outdated_responses, metadata.epochs_for_partition(TP)) == (1, Epochs(0, 4))
        assert [(r.offset, r.leader_epoch, r.value) for r in cluster.records(TP)] == [(0, 0, b'new')]
    finally:
        producer.close(timeout=5)


def test_admin_client_installs_the_cluster(cluster):
    admin = kafka.KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, kafka_client=KipNetClient)
    try:
        assert type(admin._manager.cluster) is KipClusterMetadata
        assert sorted(b.node_id for b in admin._manager.cluster.brokers()) == [0, 1, 2]
    finally:
        admin.close()
