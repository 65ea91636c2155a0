"""KipClusterMetadata applying the KIP-232 rules to MetadataResponses (no broker needed); its installation."""
import logging
import uuid

import kafka
import pytest
from kafka.protocol.metadata import MetadataResponse as StockMetadataResponse
from kafka.structs import TopicPartition

from kafka_kip import KafkaConsumer, KafkaProducer
from kafka_kip.metadata import Epochs, Interest, KipClusterMetadata, KipConnectionManager, KipNetClient
from kafka_kip.protocol.messages import MetadataResponse

pytestmark = pytest.mark.kip232

T0, T1, U0 = TopicPartition('t', 0), TopicPartition('t', 1), TopicPartition('u', 0)
ID_T, ID_T2, ID_U = uuid.UUID(int=0x7), uuid.UUID(int=0x77), uuid.UUID(int=0x8)


def response(topics, max_partition_epoch=-1, brokers=(0, 1, 2), cluster_id='cluster-a', version=12,
             cls=MetadataResponse):
    """topics: {name: (topic_id, {partition: (leader_id, leader_epoch, partition_epoch)})}."""
    topic_cls = cls.MetadataResponseTopic
    partition_cls = topic_cls.MetadataResponsePartition
    extension = {'partition_epoch'} if cls is MetadataResponse else set()
    fields = {'max_partition_epoch': max_partition_epoch} if extension else {}
    return cls(
        version=version, throttle_time_ms=0, cluster_id=cluster_id,
        controller_id=brokers[0] if brokers else -1, **fields,
        brokers=[cls.MetadataResponseBroker(node_id=b, host='127.0.0.1', port=9000 + b, rack=None)
                 for b in brokers],
        topics=[topic_cls(
            error_code=0, name=name, topic_id=topic_id, is_internal=False,
            partitions=[partition_cls(
                error_code=0, partition_index=p, leader_id=leader, leader_epoch=leader_epoch,
                replica_nodes=list(brokers), isr_nodes=list(brokers), offline_replicas=[],
                **({'partition_epoch': partition_epoch} if extension else {}))
                for p, (leader, leader_epoch, partition_epoch) in partitions.items()])
            for name, (topic_id, partitions) in topics.items()],
    )


def decoded(resp):
    """The response as the client sees it: encoded and decoded at its version."""
    return type(resp).decode(resp.encode(), version=resp.version)


@pytest.fixture
def cluster():
    cluster = KipClusterMetadata(bootstrap_servers='127.0.0.1:9000')
    cluster.update_metadata(decoded(response(
        {'t': (ID_T, {0: (0, 4, 7), 1: (1, 2, 8)}), 'u': (ID_U, {0: (2, 1, 11)})}, max_partition_epoch=12)))
    return cluster


def test_fresh_response_is_applied_with_its_epochs(cluster):
    assert (cluster.leader_for_partition(T0), cluster.leader_epoch_for_partition(T0)) == (0, 4)
    assert cluster.partition_epoch_for_partition(T0) == 7
    assert cluster.epochs_for_partition(T1) == Epochs(leader_epoch=2, partition_epoch=8)
    assert cluster.epochs_for_partition(TopicPartition('t', 2)) is None
    assert cluster.partition_epoch_for_partition(TopicPartition('t', 2)) is None
    assert cluster.max_partition_epoch == 12
    assert cluster.topic_id('t') == ID_T
    assert cluster.interest() is None   # a producer's or an admin client's: every cached partition

    cluster.update_metadata(decoded(response(
        {'t': (ID_T, {0: (1, 5, 7), 1: (1, 2, 8)}), 'u': (ID_U, {0: (2, 1, 11)})}, max_partition_epoch=12)))
    assert (cluster.leader_for_partition(T0), cluster.leader_epoch_for_partition(T0)) == (1, 5)
    assert cluster.outdated_responses == 0


def test_outdated_response_is_not_applied_at_all(cluster, caplog):
    updates = []
    cluster.add_listener(updates.append)
    waiter = cluster.request_update()
    caplog.set_level(logging.DEBUG, logger='kafka_kip.metadata.cluster')
    # Partition t-0 went back from leader epoch 4 to 3 (broker 2 as leader); the stale view also lists
    # a broker 3 and a new partition t-2, and says nothing of u.
    cluster.update_metadata(decoded(response(
        {'t': (ID_T, {0: (2, 3, 7), 1: (1, 2, 8), 2: (3, 0, 12)})}, max_partition_epoch=12,
        brokers=(0, 1, 2, 3))))

    assert cluster.outdated_responses == 1
    assert (cluster.leader_for_partition(T0), cluster.leader_epoch_for_partition(T0)) == (0, 4)
    assert cluster.partitions_for_topic('t') == {0, 1}
    assert cluster.partitions_for_topic('u') == {0}
    assert sorted(b.node_id for b in cluster.brokers()) == [0, 1, 2]
    assert cluster.partitions_for_broker(2) == {U0}
    assert updates == [] and not waiter.is_done
    assert cluster.need_update
    # Refreshed again after the normal backoff (retry_backoff_ms, 100 ms by default).
    assert 90 < cluster.ttl() <= 100
    assert ('Not applying outdated metadata, refreshing again: t-0: received (partition_epoch=7, '
            'leader_epoch=3), cached (partition_epoch=7, leader_epoch=4)') in caplog.messages

    cluster.update_metadata(decoded(response(
        {'t': (ID_T, {0: (2, 5, 7), 1: (1, 2, 8)}), 'u': (ID_U, {0: (2, 1, 11)})}, max_partition_epoch=12)))
    assert (cluster.leader_for_partition(T0), cluster.leader_epoch_for_partition(T0)) == (2, 5)
    assert updates == [cluster] and waiter.succeeded()
    assert not cluster.need_update


def test_lower_partition_epoch_is_outdated_whatever_the_leader_epoch(cluster):
    cluster.update_metadata(decoded(response({'u': (ID_U, {0: (0, 9, 10)})}, max_partition_epoch=12)))
    assert cluster.outdated_responses == 1
    assert cluster.epochs_for_partition(U0) == Epochs(leader_epoch=1, partition_epoch=11)


def test_lower_max_partition_epoch_is_outdated(cluster):
    cluster.update_metadata(decoded(response(
        {'t': (ID_T, {0: (1, 5, 7), 1: (1, 2, 8)})}, max_partition_epoch=11)))
    assert cluster.outdated_responses == 1
    assert cluster.max_partition_epoch == 12
    assert cluster.leader_for_partition(T0) == 0


def test_only_partitions_of_interest_decide(cluster):
    interest = Interest(frozenset({'u'}), frozenset({T1}))   # subscribed to u, assigned t-1
    cluster.set_interest(lambda: interest)
    assert cluster.interest() == interest
    # t-0 went back, but only u and t-1 matter: applied (as kafka-python would).
    cluster.update_metadata(decoded(response(
        {'t': (ID_T, {0: (2, 3, 7), 1: (1, 2, 8)}), 'u': (ID_U, {0: (2, 1, 11)})}, max_partition_epoch=12)))
    assert cluster.outdated_responses == 0
    assert (cluster.leader_for_partition(T0), cluster.leader_epoch_for_partition(T0)) == (2, 3)
    # t-1 went back: refused, whatever t-0 says
    cluster.update_metadata(decoded(response(
        {'t': (ID_T, {0: (2, 9, 7), 1: (1, 1, 8)})}, max_partition_epoch=12)))
    assert cluster.outdated_responses == 1
    cluster.update_metadata(decoded(response({'u': (ID_U, {0: (0, 0, 11)})}, max_partition_epoch=12)))
    assert cluster.outdated_responses == 2
    # the interest is asked at every response: what the consumer subscribes to later counts at once
    interest = Interest(frozenset({'t'}))
    cluster.update_metadata(decoded(response({'u': (ID_U, {0: (0, 0, 11)})}, max_partition_epoch=12)))
    assert (cluster.outdated_responses, cluster.epochs_for_partition(U0)) == (2, Epochs(0, 11))
    cluster.set_interest(None)
    assert cluster.interest() is None


def test_recreated_topic_is_accepted_with_its_new_epochs(cluster):
    cluster.update_metadata(decoded(response(
        {'t': (ID_T2, {0: (2, 0, 13)}), 'u': (ID_U, {0: (2, 1, 11)})}, max_partition_epoch=13)))
    assert cluster.outdated_responses == 0
    assert cluster.topic_id('t') == ID_T2
    assert cluster.partitions_for_topic('t') == {0}
    # the new incarnation's partition epoch; its leader epoch unknown until it is seen again (as kafka-python)
    assert (cluster.leader_for_partition(T0), cluster.epochs_for_partition(T0)) == (2, Epochs(-1, 13))
    cluster.update_metadata(decoded(response(
        {'t': (ID_T2, {0: (2, 0, 13)}), 'u': (ID_U, {0: (2, 1, 11)})}, max_partition_epoch=13)))
    assert (cluster.outdated_responses, cluster.epochs_for_partition(T0)) == (0, Epochs(0, 13))


def test_recreated_topic_on_stock_broker_resets_leader_epochs_without_wedging():
    # kafka-python's contract (its test_recreation_resets_leader_epoch_and_updates_index): a new topic id resets
    # the cached leader epochs to -1, whatever epoch the response carries
    cluster = KipClusterMetadata(bootstrap_servers='127.0.0.1:9000')
    cluster.update_metadata(decoded(response({'t': (ID_T, {0: (0, 4, -1)})})))
    cluster.update_metadata(decoded(response({'t': (ID_T2, {0: (1, 9, -1)})})))
    assert cluster.outdated_responses == 0
    assert (cluster.leader_for_partition(T0), cluster.leader_epoch_for_partition(T0)) == (1, -1)
    assert (cluster.topic_id('t'), cluster.topic_name_for_id(ID_T2), cluster.topic_name_for_id(ID_T)) == (
        ID_T2, 't', None)
    cluster.update_metadata(decoded(response({'t': (ID_T2, {0: (1, 0, -1)})})))
    assert cluster.leader_epoch_for_partition(T0) == 0


def test_stale_broker_still_showing_the_deleted_topic_is_outdated(cluster):
    cluster.update_metadata(decoded(response(
        {'t': (ID_T2, {0: (2, 0, 13)}), 'u': (ID_U, {0: (2, 1, 11)})}, max_partition_epoch=13)))
    # A broker that missed the deletion serves the old incarnation: a "new" topic id, but the cluster-wide
    # max partition epoch tells it apart.
    cluster.update_metadata(decoded(response(
        {'t': (ID_T, {0: (0, 4, 7), 1: (1, 2, 8)}), 'u': (ID_U, {0: (2, 1, 11)})}, max_partition_epoch=12)))
    assert cluster.outdated_responses == 1
    assert cluster.topic_id('t') == ID_T2
    assert cluster.epochs_for_partition(T0) == Epochs(-1, 13)  # as the recreation left it: not applied


def test_new_cluster_id_is_accepted():
    cluster = KipClusterMetadata(bootstrap_servers='127.0.0.1:9000')
    cluster.update_metadata(decoded(response({'t': (ID_T, {0: (0, 4, 7)})}, max_partition_epoch=12)))
    cluster.update_metadata(decoded(response({'t': (ID_T, {0: (1, 0, 0)})}, max_partition_epoch=0,
                                             cluster_id='cluster-b')))
    assert (cluster.cluster_id, cluster.max_partition_epoch) == ('cluster-b', 0)
    assert cluster.epochs_for_partition(T0) == Epochs(0, 0)


@pytest.mark.parametrize('version', [9, 10, 12])
def test_stock_broker_leader_epochs_alone(version):
    topic_id = ID_T if version >= 10 else None
    cluster = KipClusterMetadata(bootstrap_servers='127.0.0.1:9000')
    cluster.update_metadata(decoded(response({'t': (topic_id, {0: (0, 4, -1)})}, version=version)))
    cluster.update_metadata(decoded(response({'t': (topic_id, {0: (1, 3, -1)})}, version=version)))
    assert cluster.outdated_responses == 1
    assert (cluster.leader_for_partition(T0), cluster.epochs_for_partition(T0)) == (0, Epochs(4, -1))
    cluster.update_metadata(decoded(response({'t': (topic_id, {0: (1, 5, -1)})}, version=version)))
    assert (cluster.leader_for_partition(T0), cluster.epochs_for_partition(T0)) == (1, Epochs(5, -1))


def test_kafka_python_response_classes_are_handled():
    cluster = KipClusterMetadata(bootstrap_servers='127.0.0.1:9000')
    cluster.update_metadata(decoded(response({'t': (ID_T, {0: (0, 4, -1)})}, cls=StockMetadataResponse)))
    cluster.update_metadata(decoded(response({'t': (ID_T, {0: (1, 3, -1)})}, cls=StockMetadataResponse)))
    assert cluster.outdated_responses == 1
    assert cluster.epochs_for_partition(T0) == Epochs(4, -1)
    assert cluster.max_partition_epoch == -1


def test_before_v9_leader_epochs_are_unreliable_and_not_compared():
    cluster = KipClusterMetadata(bootstrap_servers='127.0.0.1:9000')
    cluster.update_metadata(decoded(response({'t': (None, {0: (0, 4, -1)})}, version=8)))
    cluster.update_metadata(decoded(response({'t': (None, {0: (1, 3, -1)})}, version=8)))
    assert cluster.outdated_responses == 0
    assert (cluster.leader_for_partition(T0), cluster.epochs_for_partition(T0)) == (1, Epochs(-1, -1))


def test_leader_hint_from_fetch_response_is_not_rolled_back(cluster):
    assert cluster.update_partition_leader(T0, 1, 6)
    cluster.update_metadata(decoded(response(
        {'t': (ID_T, {0: (0, 5, 7), 1: (1, 2, 8)}), 'u': (ID_U, {0: (2, 1, 11)})}, max_partition_epoch=12)))
    assert cluster.outdated_responses == 1
    assert (cluster.leader_for_partition(T0), cluster.leader_epoch_for_partition(T0)) == (1, 6)


def test_is_at_least(cluster):
    assert cluster.is_at_least(T0, leader_epoch=4, partition_epoch=7)
    assert cluster.is_at_least(T0, leader_epoch=3, partition_epoch=7)
    assert not cluster.is_at_least(T0, leader_epoch=5, partition_epoch=7)
    assert not cluster.is_at_least(T0, leader_epoch=0, partition_epoch=8)
    assert cluster.is_at_least(T0)
    assert cluster.is_at_least(TopicPartition('t', 5))
    assert not cluster.is_at_least(TopicPartition('t', 5), leader_epoch=0)


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


def test_metadata_outdated_for_metadata_max_age_is_applied(monkeypatch, caplog):
    clock = FakeClock()
    monkeypatch.setattr('kafka_kip.metadata.cluster.time', clock)
    cluster = KipClusterMetadata(bootstrap_servers='127.0.0.1:9000', metadata_max_age_ms=200)
    cluster.update_metadata(decoded(response({'t': (None, {0: (0, 4, -1)})}, version=9)))
    # A topic recreated on a broker without topic ids: its leader epochs went back for good.
    stale = decoded(response({'t': (None, {0: (1, 0, -1)})}, version=9))
    cluster.update_metadata(stale)
    clock.now += 0.125
    cluster.update_metadata(stale)
    assert cluster.outdated_responses == 2
    assert cluster.leader_epoch_for_partition(T0) == 4
    clock.now += 0.125
    caplog.set_level(logging.WARNING, logger='kafka_kip.metadata.cluster')
    cluster.update_metadata(stale)
    assert cluster.outdated_responses == 2
    assert (cluster.leader_for_partition(T0), cluster.leader_epoch_for_partition(T0)) == (1, 0)
    assert caplog.messages == ['Applying metadata that is still outdated after 250 ms (t-0: received '
                               '(partition_epoch=-1, leader_epoch=0), cached (partition_epoch=-1, '
                               'leader_epoch=4)): taking the cluster at its word']
    # The clock restarts once a response was applied.
    cluster.update_metadata(decoded(response({'t': (None, {0: (2, 1, -1)})}, version=9)))
    clock.now += 10
    cluster.update_metadata(decoded(response({'t': (None, {0: (0, 0, -1)})}, version=9)))
    assert cluster.outdated_responses == 3
    assert cluster.leader_epoch_for_partition(T0) == 1


def test_empty_broker_list_is_still_a_failed_update(cluster):
    waiter = cluster.request_update()
    cluster.update_metadata(decoded(response({}, brokers=())))
    assert waiter.failed() and cluster.outdated_responses == 0


@pytest.mark.parametrize('client_class', [kafka.KafkaConsumer, kafka.KafkaProducer])
def test_kafka_client_installs_the_cluster(client_class):
    # api_version given: the client does not bootstrap, so no broker is needed to build it.
    client = client_class(bootstrap_servers='127.0.0.1:9', api_version=(2, 8), kafka_client=KipNetClient,
                          retry_backoff_ms=250, metadata_max_age_ms=1234)
    try:
        manager = client._client._manager if hasattr(client, '_client') else client._sender._client._manager
        assert type(manager) is KipConnectionManager
        assert type(manager.cluster) is KipClusterMetadata
        assert manager.cluster.config == {
            'retry_backoff_ms': 250, 'metadata_max_age_ms': 1234, 'bootstrap_servers': '127.0.0.1:9',
            'allow_auto_create_topics': True, 'client_dns_lookup': 'use_all_dns_ips'}
    finally:
        client.close(timeout=1) if client_class is kafka.KafkaProducer else client.close()


def test_an_outdated_response_is_refreshed_again_after_the_clients_retry_backoff():
    consumer = KafkaConsumer(bootstrap_servers='127.0.0.1:9', api_version=(2, 8), retry_backoff_ms=250)
    try:
        cluster = consumer._client.cluster
        cluster.update_metadata(decoded(response({'t': (ID_T, {0: (0, 4, 7)})}, max_partition_epoch=12)))
        consumer.assign([T0])
        cluster.update_metadata(decoded(response({'t': (ID_T, {0: (2, 3, 7)})}, max_partition_epoch=12)))
        assert cluster.outdated_responses == 1
        assert 240 < cluster.ttl() <= 250
    finally:
        consumer.close()


def test_the_consumer_checks_the_partitions_it_subscribed_to_or_was_assigned():
    consumer = KafkaConsumer(bootstrap_servers='127.0.0.1:9', api_version=(2, 8))
    try:
        cluster = consumer._client.cluster
        assert cluster.interest() == Interest()
        consumer.assign([T1, U0])
        assert cluster.interest() == Interest(frozenset(), frozenset({T1, U0}))
        consumer.unsubscribe()
        consumer.subscribe(['t'])
        assert cluster.interest() == Interest(frozenset({'t'}), frozenset())
    finally:
        consumer.close()
    producer = KafkaProducer(bootstrap_servers='127.0.0.1:9', api_version=(2, 8))
    try:
        assert producer._metadata.interest() is None   # a producer is interested in every partition
    finally:
        producer.close(timeout=1)
