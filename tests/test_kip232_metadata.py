"""KIP-232 metadata freshness end to end: stale broker metadata, a zombie leader, a recreated topic.

Every scenario runs on a 3-broker reference cluster. A client's metadata request is sent to the broker the
scenario needs (``refresh_from``), on the client's own network thread, so which view it gets is exact.
"""
import time
from pathlib import Path

import kafka
import pytest
from kafka.structs import TopicPartition

import kafka_kip
from kafka_kip.metadata import Epochs, KipClusterMetadata, KipNetClient
from kafka_kip.testing import Drop, ReferenceCluster
from kafka_kip.testing.fresh import FreshProcess

TP = TopicPartition('t', 0)


@pytest.fixture
def cluster(reference_cluster: ReferenceCluster) -> ReferenceCluster:
    return reference_cluster


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(0.005)


def manager_of(client):
    return client._sender._client._manager if isinstance(client, kafka.KafkaProducer) else client._manager


def refresh_from(client, broker_id):
    """One metadata request to ``broker_id``, applied (or refused) by the client's cluster."""
    manager = manager_of(client)
    # Not merged into a refresh of the client's own that is under way (it could go to any broker).
    wait_until(lambda: not manager.cluster.metadata_refresh_in_progress)
    future = manager.call_soon(manager.cluster.refresh_metadata, broker_id)
    wait_until(lambda: future.is_done)
    if future.failed():
        raise future.exception


def record_fetches(consumer):
    """The broker ids the consumer sends Fetch requests to, in order."""
    manager = manager_of(consumer)
    send, fetched_from = manager.send, []

    def recording_send(request, node_id=None, **kwargs):
        if request.API_KEY == 1:
            fetched_from.append(node_id)
        return send(request, node_id=node_id, **kwargs)

    manager.send = recording_send
    return fetched_from


def consume(consumer, count, timeout=10.0):
    values = []
    deadline = time.monotonic() + timeout
    while len(values) < count:
        assert time.monotonic() < deadline, f'consumed only {values}'
        for records in consumer.poll(timeout_ms=100).values():
            values.extend(record.value for record in records)
    return values


def kip_producer(cluster, **configs):
    return kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, kafka_client=KipNetClient,
                               acks='all', **configs)


def produce(producer, values):
    for value in values:
        producer.send(TP.topic, value=value, partition=TP.partition)
    producer.flush()


def consumer_for(cluster, kip):
    """A consumer assigned t-0 that has its metadata."""
    servers = cluster.bootstrap_servers
    if kip:
        consumer = kafka_kip.KafkaConsumer(bootstrap_servers=servers, kafka_client=KipNetClient,
                                           enable_auto_commit=False, fetch_max_wait_ms=100)
    else:
        consumer = kafka.KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False,
                                       fetch_max_wait_ms=100)
    consumer.assign([TP])
    update = consumer._cluster.request_update()
    wait_until(lambda: update.is_done)
    return consumer


R = [b'r%d' % i for i in range(5)]


@pytest.mark.parametrize('kip', [True, False], ids=['kafka_kip', 'stock'])
def test_stale_broker_metadata(cluster, kip):
    cluster.create_topic('t', partitions=1, replication_factor=3)
    with kip_producer(cluster) as producer:
        produce(producer, R)
    consumer = consumer_for(cluster, kip)     # knows leader 0 at epoch 0, as every broker does
    try:
        fetched_from = record_fetches(consumer)
        metadata = consumer._cluster
        cluster.delay_metadata(2)             # broker 2 keeps serving: leader 0 at epoch 0
        assert cluster.elect_leader(TP, 1) == 1
        partition_epoch = cluster.partition_epoch(TP)
        refresh_from(consumer, 1)
        assert (metadata.leader_for_partition(TP), metadata.leader_epoch_for_partition(TP)) == (1, 1)
        refresh_from(consumer, 2)
        consumer.seek(TP, 0)
        if kip:
            assert metadata.outdated_responses == 1
            assert (metadata.leader_for_partition(TP), metadata.epochs_for_partition(TP)) == \
                (1, Epochs(leader_epoch=1, partition_epoch=partition_epoch))
            assert consume(consumer, 5) == R
            assert set(fetched_from) == {1}
        else:
            # kafka-python takes the stale view and fetches from the old leader first (which refuses it).
            assert (metadata.leader_for_partition(TP), metadata.leader_epoch_for_partition(TP)) == (0, 0)
            assert consume(consumer, 5) == R
            assert fetched_from[0] == 0
    finally:
        consumer.close()


def test_stale_broker_metadata_producer(cluster):
    cluster.create_topic('t', partitions=1, replication_factor=3)
    producer = kip_producer(cluster)
    try:
        produce(producer, R[:1])
        cluster.delay_metadata(2)
        assert cluster.elect_leader(TP, 1) == 1
        refresh_from(producer, 1)
        refresh_from(producer, 2)
        metadata = producer._metadata
        assert metadata.outdated_responses == 1
        assert (metadata.leader_for_partition(TP), metadata.leader_epoch_for_partition(TP)) == (1, 1)
        produce(producer, R[1:])
        assert [(r.offset, r.leader_epoch, r.value) for r in cluster.records(TP)] == \
            [(0, 0, b'r0')] + [(i, 1, b'r%d' % i) for i in range(1, 5)]
    finally:
        producer.close(timeout=5)


@pytest.mark.parametrize('kip', [True, False], ids=['kafka_kip', 'stock'])
def test_zombie_leader(cluster, kip):
    cluster.create_topic('t', partitions=1, replication_factor=3)
    with kip_producer(cluster) as producer:
        produce(producer, R)
    # Clients that learnt "leader 0 at epoch 0" before the fault.
    consumer = consumer_for(cluster, kip)
    zombie_writer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1)
    good_writer = kip_producer(cluster)
    try:
        assert zombie_writer.partitions_for('t') == good_writer.partitions_for('t') == {0}
        cluster.delay_metadata(0)             # broker 0 stays leader at epoch 0: a zombie
        assert cluster.elect_leader(TP, 1) == 1
        produce(zombie_writer, [b'z5', b'z6', b'z7'])
        refresh_from(good_writer, 1)
        produce(good_writer, [b'g5', b'g6', b'g7'])
        assert [(r.offset, r.leader_epoch, r.value) for r in cluster.records(TP, broker_id=0)][4:] == \
            [(4, 0, b'r4'), (5, 0, b'z5'), (6, 0, b'z6'), (7, 0, b'z7')]
        assert [(r.offset, r.leader_epoch, r.value) for r in cluster.records(TP, broker_id=1)][4:] == \
            [(4, 0, b'r4'), (5, 1, b'g5'), (6, 1, b'g6'), (7, 1, b'g7')]

        fetched_from = record_fetches(consumer)
        refresh_from(consumer, 1)
        refresh_from(consumer, 0)             # the zombie's view: leader 0, epoch 0
        consumer.seek(TP, 0)
        if kip:
            assert consume(consumer, 8) == R + [b'g5', b'g6', b'g7']
            assert set(fetched_from) == {1}
        else:
            # kafka-python 3.0.12 follows the zombie and returns its diverged records.
            assert consume(consumer, 8) == R + [b'z5', b'z6', b'z7']
            assert set(fetched_from) == {0}
    finally:
        consumer.close()
        zombie_writer.close(timeout=5)
        good_writer.close(timeout=5)


GROUP_MEMBER = Path(__file__).with_name('scenarios') / 'group_member.py'


@pytest.mark.parametrize('kip', [True, False], ids=['kafka_kip', 'stock'])
def test_group_member_resuming_a_committed_offset_waits_for_metadata_of_its_epochs(cluster, kip):
    """A new group member resumes at offset 6, committed under leader epoch 1, while every broker it gets
    metadata from says leader 0 at epoch 0: broker 2 is stale, broker 0 a zombie that took records of its own,
    and broker 1 (the leader, the one that knows epoch 1) drops Metadata requests until the stale phase ends.
    kafka_kip waits until its metadata reaches epoch 1; unmodified kafka-python (in a process that never
    imported kafka_kip) fetches from the zombie at once and returns its records."""
    cluster.create_topic('t', partitions=1, replication_factor=3)
    with kip_producer(cluster) as producer:
        produce(producer, R)
    zombie_writer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1)
    good_writer = kip_producer(cluster)
    try:
        # both writers learn "leader 0 at epoch 0" before the fault
        assert zombie_writer.partitions_for('t') == good_writer.partitions_for('t') == {0}
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
    finally:
        zombie_writer.close(timeout=5)
        good_writer.close(timeout=5)
    fresh_metadata_refused = cluster.control(3, lambda request: Drop(), broker_id=1, keep=True)
    stale = cluster.brokers()[2]
    with FreshProcess(GROUP_MEMBER, stock=not kip) as member:
        member.call('start', kip, f'{stale.host}:{stale.port}', 't', group)
        if kip:
            seen = member.call('poll_until', None, 't-0')   # joined, assigned, at the committed offset
            assert seen == {'positions': {'t-0': 6}, 'records': [], 'fetched_from': []}
            seen = member.call('poll_times', 10)
            assert (seen['records'], seen['fetched_from']) == ([], [])
            fresh_metadata_refused.remove()
            for broker in (0, 2):
                cluster.release_metadata(broker)
            seen = member.call('poll_until', 2)
            assert seen['records'] == [[6, 'g6'], [7, 'g7']]
            assert set(seen['fetched_from']) == {1}
        else:
            seen = member.call('poll_until', 2)
            assert seen['records'] == [[6, 'z6'], [7, 'z7']]
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
        assert (metadata.topic_id('t'), metadata.epochs_for_partition(TP), metadata.max_partition_epoch) == \
            (new_id, Epochs(leader_epoch=0, partition_epoch=4), 4)
        assert metadata.partitions_for_topic('t') == {0}

        refresh_from(producer, 0)             # old topic id, higher leader epoch, lower max partition epoch
        assert metadata.outdated_responses == 1
        assert (metadata.topic_id('t'), metadata.epochs_for_partition(TP)) == (new_id, Epochs(0, 4))

        # No wedge: the new incarnation takes writes.
        assert producer.send('t', value=b'new', partition=0).get(timeout=10).offset == 0
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
