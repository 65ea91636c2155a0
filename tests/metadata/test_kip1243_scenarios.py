"""KIP-1243's scenarios end to end: a topic created (or grown) through one broker while another is stale.

Broker 2's metadata is delayed before the write, so it serves the old view; the write goes through broker 0. The
clients that read afterwards are bootstrapped on broker 2 only and ask it for metadata once more on purpose
(``refresh_from``). A client in another process gets the writer's consistency context as bytes; a stock
kafka-python client runs in a process that never imported kafka_kip. Each scenario also runs on stock brokers
(``features=()``, no ``kip.1243``): there a client of another process gets no guarantee (it sees what kafka-python
sees), while the clients of the writer's own ClientFactory still read their writes. (tests/metadata/test_kip1243_clients.py
checks that nothing is sent to a broker that advertises the other extensions but not ``kip.1243``.)
"""
from __future__ import annotations

from pathlib import Path

import pytest
from kafka.partitioner.default import murmur2
from kafka.protocol.api_key import ApiKey

import kafka_kip_reference.demo
from kafka_kip import ClientFactory, ConsistencyContextStore
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.fresh import FreshProcess

pytestmark = pytest.mark.kip1243

CLIENT = Path(kafka_kip_reference.demo.__file__).with_name('lagging_clients.py')
WAIT_MS = 200
WITHOUT_KIP_1243 = ()  # stock brokers (with kip.232 a client that saw the new topic would refuse the old view)
PARTITIONS = 6
BROKERS = {'kip.1243': None, 'no kip.1243': WITHOUT_KIP_1243}


def address(cluster: ReferenceCluster, broker_id: int) -> str:
    broker = cluster.brokers()[broker_id]
    return f'{broker.host}:{broker.port}'


def stale_cluster(factory, features) -> ReferenceCluster:
    cluster = factory(broker_config={'metadata.consistency.wait.max.ms': WAIT_MS}, features=features)
    cluster.delay_metadata(2)
    return cluster


def refresh_from(client, broker_id):
    """One metadata request of ``client`` (this process) to ``broker_id``, applied or refused by it."""
    manager = client._sender._client._manager if hasattr(client, '_sender') else client._manager
    wait_until(lambda: not manager.cluster.metadata_refresh_in_progress, 'no metadata refresh in progress')
    future = manager.call_soon(manager.cluster.refresh_metadata, broker_id)
    wait_until(lambda: future.is_done, f'the metadata response of broker {broker_id}')
    if future.failed():
        raise future.exception


class Produced:
    """Every Produce request the cluster receives from a client id: ``[broker_id, ...]``."""

    def __init__(self, cluster: ReferenceCluster, client_id: str) -> None:
        self.brokers: list[int] = []
        cluster.control(ApiKey.Produce, self._record, keep=True)
        self._client_id = client_id

    def _record(self, request) -> None:
        if request.client_id == self._client_id:
            self.brokers.append(request.broker_id)


def create_topic_through_broker_0(cluster: ReferenceCluster, factory: ClientFactory, partitions: int) -> None:
    with factory.admin(bootstrap_servers=address(cluster, 0)) as admin:
        admin.create_topics({'t': {'num_partitions': partitions, 'replication_factor': 3}})


def topic_written_while_broker_2_is_stale(reference_cluster_factory, brokers: str) -> tuple[ReferenceCluster,
                                                                                            ClientFactory]:
    """The cluster (broker 2 stale) and the writer's factory, which created t with PARTITIONS partitions."""
    cluster = stale_cluster(reference_cluster_factory, BROKERS[brokers])
    writer = ClientFactory(ConsistencyContextStore.empty())
    create_topic_through_broker_0(cluster, writer, PARTITIONS)
    return cluster, writer


# stock kafka-python sends no context: it runs the same with or without kip.1243
OTHER_PROCESS = pytest.mark.parametrize('brokers, kip', [('kip.1243', True), ('kip.1243', False),
                                                         ('no kip.1243', True)],
                                        ids=['kafka_kip', 'stock', 'kafka_kip-no kip.1243'])


@OTHER_PROCESS
def test_a_consumer_of_another_process_sees_every_partition_at_once(reference_cluster_factory, brokers, kip):
    cluster, writer = topic_written_while_broker_2_is_stale(reference_cluster_factory, brokers)
    with writer.producer(bootstrap_servers=address(cluster, 0)) as producer:
        for partition in range(PARTITIONS):
            producer.send('t', value=b'r%d' % partition, partition=partition)
    blob = writer.store.read().to_bytes().hex()
    with FreshProcess(CLIENT, stock=not kip) as other:
        other.call('start_consumer', kip, {'context': blob}, 't', {'bootstrap_servers': address(cluster, 2),
                                                       'enable_auto_commit': False})
        other.call('refresh_from', 2)
        if kip and brokers == 'kip.1243':
            assert other.call('partitions_for_topic') == list(range(PARTITIONS))
            assert set(other.call('views')) == {PARTITIONS}  # every view it applied had every partition
            assert other.call('stale_answers') >= 2          # broker 2 answered STALE to bootstrap and refresh
            assert other.call('poll_all', PARTITIONS) == [[p, 0, f'r{p}'] for p in range(PARTITIONS)]
        else:
            # broker 2 says the topic does not exist, and the client takes its word: kafka-python always,
            # kafka_kip when the broker carries no consistency token
            assert 0 in other.call('views')
            assert other.call('stale_answers') in (None, 0)
        other.call('close')


@OTHER_PROCESS
def test_a_producer_of_another_process_delivers_on_its_first_try(reference_cluster_factory, brokers, kip):
    cluster, writer = topic_written_while_broker_2_is_stale(reference_cluster_factory, brokers)
    produced = Produced(cluster, 'other-process')
    with FreshProcess(CLIENT, stock=not kip) as other:
        other.call('start_producer', kip, {'context': writer.store.read().to_bytes().hex()}, 't',
                   {'bootstrap_servers': address(cluster, 2), 'client_id': 'other-process', 'linger_ms': 0,
                    'max_block_ms': 5000})
        other.call('refresh_from', 2)
        sent = other.call('send', ['v'])
        if kip and brokers == 'kip.1243':
            assert sent['offsets'] == [0]
            assert set(other.call('views')) == {PARTITIONS}
            assert len(produced.brokers) == 1  # one Produce request: the first try
        else:
            assert 0 in other.call('views')  # it took broker 2's word that the topic does not exist
            # then it keeps asking broker 2 (its one idle connection, so kafka-python's least loaded node) until
            # max_block_ms, unless a refresh happened to go to another broker first
            assert sent.get('offsets') == [0] or sent['error'].startswith('KafkaTimeoutError'), sent
        other.call('close')


@pytest.mark.parametrize('brokers', BROKERS)
def test_the_factorys_own_clients_read_its_writes_on_any_broker(reference_cluster_factory, brokers):
    cluster = stale_cluster(reference_cluster_factory, BROKERS[brokers])
    factory = ClientFactory(ConsistencyContextStore.empty())
    producer = factory.producer(bootstrap_servers=address(cluster, 2), client_id='factory-producer', linger_ms=0)
    consumer = factory.consumer(bootstrap_servers=address(cluster, 2), enable_auto_commit=False)
    views = []

    def record(cache):
        if 't' in cache._topics:
            views.append(len(cache.partitions_for_topic('t') or ()))

    producer._metadata.add_listener(record)
    consumer._cluster.add_listener(record)
    produced = Produced(cluster, 'factory-producer')
    try:
        create_topic_through_broker_0(cluster, factory, PARTITIONS)
        consumer._cluster.add_topic('t')
        producer._metadata.add_topic('t')
        refresh_from(consumer, 2)
        refresh_from(producer, 2)
        assert consumer.partitions_for_topic('t') == set(range(PARTITIONS))
        assert producer.send('t', b'v', partition=5).get(timeout=30).offset == 0
        assert len(produced.brokers) == 1
        assert views and set(views) == {PARTITIONS}
        # broker 2's view: answered STALE_METADATA and asked elsewhere (kip.1243), or refused as missing the write
        refused = producer._sender._client._manager.consistency.stale_responses + \
            producer._metadata.unreflected_responses
        assert refused >= 1
    finally:
        producer.close(timeout=5)
        consumer.close()


def expected_partitions(keys: list[str], count: int) -> list[int]:
    return [(murmur2(key.encode()) & 0x7FFFFFFF) % count for key in keys]


KEYS = [f'key-{i}' for i in range(40)]


@pytest.mark.parametrize('brokers', BROKERS)
def test_after_create_partitions_a_factory_producer_uses_the_new_count(reference_cluster_factory, brokers):
    cluster = reference_cluster_factory(broker_config={'metadata.consistency.wait.max.ms': WAIT_MS},
                                        features=BROKERS[brokers])
    cluster.create_topic('t', partitions=2, replication_factor=3)
    factory = ClientFactory(ConsistencyContextStore.empty())
    producer = factory.producer(bootstrap_servers=address(cluster, 2), linger_ms=0)
    try:
        with FreshProcess(CLIENT, stock=True) as stock:
            stock.call('start_producer', False, None, 't', {'bootstrap_servers': address(cluster, 2)})
            # both know t with 2 partitions
            assert stock.call('send', ['before'], ['before'])['partitions'] == expected_partitions(['before'], 2)
            assert producer.send('t', b'before', key=b'before').get(timeout=30).partition == \
                expected_partitions(['before'], 2)[0]
            cluster.delay_metadata(2)
            with factory.admin(bootstrap_servers=address(cluster, 0)) as admin:
                admin.create_partitions({'t': 4})
            refresh_from(producer, 2)
            stock.call('refresh_from', 2)
            values = [f'v{i}' for i in range(len(KEYS))]
            futures = [producer.send('t', key=key.encode(), value=value.encode()) for key, value in zip(KEYS, values, strict=True)]
            assert [f.get(timeout=30).partition for f in futures] == expected_partitions(KEYS, 4)
            # kafka-python partitions by the count it had: broker 2 confirms it
            assert stock.call('send', values, KEYS)['partitions'] == expected_partitions(KEYS, 2)
            assert stock.call('views')[-1] == 2
            stock.call('close')
        if brokers == 'kip.1243':  # a new producer of another process, handed the context: the new count too
            with FreshProcess(CLIENT, stock=False) as other:
                other.call('start_producer', True, {'context': factory.store.read().to_bytes().hex()}, 't',
                           {'bootstrap_servers': address(cluster, 2)})
                other.call('refresh_from', 2)
                assert other.call('send', values, KEYS)['partitions'] == expected_partitions(KEYS, 4)
                other.call('close')
    finally:
        producer.close(timeout=5)


def test_a_producer_of_another_process_sharing_a_file_store_learns_the_new_count_at_its_next_request(
        reference_cluster_factory, tmp_path):
    cluster = reference_cluster_factory(broker_config={'metadata.consistency.wait.max.ms': WAIT_MS})
    cluster.create_topic('t', partitions=2, replication_factor=3)
    shared = {'file': str(tmp_path / 'context')}
    factory = ClientFactory(ConsistencyContextStore.file(shared['file']))
    with FreshProcess(CLIENT, stock=False) as other:
        other.call('start_producer', True, shared, 't', {'bootstrap_servers': address(cluster, 2), 'linger_ms': 0})
        other.call('refresh_from', 2)
        assert other.call('views')[-1] == 2  # it knows t with 2 partitions
        cluster.delay_metadata(2)
        with factory.admin(bootstrap_servers=address(cluster, 0)) as admin:
            admin.create_partitions({'t': 4})
        # its next request carries the newer context from the file and makes it refresh (through another broker)
        assert other.call('send', ['next'], ['next'])['partitions'] == expected_partitions(['next'], 2)
        other.call('wait_for_view', 4)
        assert other.call('send', KEYS, KEYS)['partitions'] == expected_partitions(KEYS, 4)
        other.call('close')


@pytest.mark.parametrize('brokers', BROKERS)
def test_after_a_delete_the_factorys_consumer_does_not_take_a_stale_brokers_word(reference_cluster_factory, brokers):
    cluster = reference_cluster_factory(broker_config={'metadata.consistency.wait.max.ms': WAIT_MS,
                                                       'auto.create.topics.enable': 'false'},
                                        features=BROKERS[brokers])
    cluster.create_topic('t', partitions=2, replication_factor=3)
    factory = ClientFactory(ConsistencyContextStore.empty())
    consumer = factory.consumer(bootstrap_servers=address(cluster, 2), enable_auto_commit=False,
                                allow_auto_create_topics=False)
    try:
        assert consumer.partitions_for_topic('t') == {0, 1}
        cluster.delay_metadata(2)
        with factory.admin(bootstrap_servers=address(cluster, 0)) as admin:
            admin.delete_topics(['t'])
        views = []
        consumer._cluster.add_listener(lambda cache: views.append(cache.partitions_for_topic('t')))
        consumer._cluster.add_topic('t')

        def broker_2_refused() -> bool:
            # broker 2 still has t; asked again while a refresh that add_topic started elsewhere answered instead
            refresh_from(consumer, 2)
            return consumer._manager.consistency.stale_responses + consumer._cluster.unreflected_responses >= 1

        wait_until(broker_2_refused, "broker 2's answer refused")
        wait_until(lambda: consumer._cluster.partitions_for_topic('t') is None, 'a view without t')
        assert views and set(views) == {None}  # no view with the deleted topic was applied
    finally:
        consumer.close()
