"""KIP-1243 in kafka_kip's clients: what requests carry, what responses teach, STALE_METADATA, cluster ids.

A control on every API of the cluster records the consistency state of each request header it sees, so what a
client sent is read at the broker.
"""
from __future__ import annotations

import pytest
from kafka.errors import InconsistentClusterIdError
from kafka.protocol.api_key import ApiKey

import kafka_kip
from kafka_kip import ClientFactory, ConsistencyContext, ConsistencyContextStore
from kafka_kip.admin import ConfigResource, ConfigResourceType
from kafka_kip.errors import StaleMetadataError
from kafka_kip.metadata.written_topics import TopicWrite, WriteKind
from kafka_kip.protocol.headers import ConsistencyState
from kafka_kip_reference import Delay, ReferenceCluster

pytestmark = pytest.mark.kip1243

WAIT_MS = 200


def kip_cluster(factory, **kwargs) -> ReferenceCluster:
    return factory(broker_config={'metadata.consistency.wait.max.ms': WAIT_MS}, **kwargs)


def broker_2_behind(factory) -> ReferenceCluster:
    """A :func:`kip_cluster` whose broker 2 has frozen its metadata (it answers stale) until released."""
    cluster = kip_cluster(factory)
    cluster.delay_metadata(2)
    return cluster


class Headers:
    """The consistency state of every request the cluster receives: ``[(broker, api_key, state)]``."""

    def __init__(self, cluster: ReferenceCluster) -> None:
        self.seen: list[tuple[int, int, ConsistencyState | None]] = []
        cluster.control(None, self._record, keep=True)

    def _record(self, request) -> None:
        self.seen.append((request.broker_id, request.api_key, request.consistency_state))

    def states(self, api_key: int | None = None) -> list[ConsistencyState | None]:
        return [state for _, key, state in self.seen if api_key is None or key == api_key]


def address(cluster: ReferenceCluster, broker_id: int) -> str:
    broker = cluster.brokers()[broker_id]
    return f'{broker.host}:{broker.port}'


def test_requests_carry_the_store_and_responses_advance_it(reference_cluster_factory):
    cluster = kip_cluster(reference_cluster_factory)
    headers = Headers(cluster)
    store = ConsistencyContextStore.empty()
    with ClientFactory(store).admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        bootstrap_offset = cluster.metadata_offset()
        assert store.read() == ConsistencyContext.of(cluster.cluster_id, bootstrap_offset)
        admin.create_topics({'t': {'num_partitions': 2, 'replication_factor': 3}})
        assert cluster.metadata_offset() == bootstrap_offset + 1
        assert store.read() == ConsistencyContext.of(cluster.cluster_id, bootstrap_offset + 1)
        create_states = headers.states(ApiKey.CreateTopics)
        admin.describe_cluster()
    # ApiVersions never carries one; the first Metadata went out before anything was known
    assert set(headers.states(ApiKey.ApiVersions)) == {None}
    assert headers.states(ApiKey.Metadata)[0] is None
    assert create_states == [ConsistencyState(cluster.cluster_id, bootstrap_offset)]
    assert headers.states(ApiKey.DescribeCluster)[-1] == ConsistencyState(cluster.cluster_id, bootstrap_offset + 1)


def test_eventually_consistent_store_sends_nothing(reference_cluster_factory):
    cluster = kip_cluster(reference_cluster_factory)
    headers = Headers(cluster)
    store = ConsistencyContextStore.eventually_consistent()
    with kafka_kip.KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers,
                                    consistency_context_store=store) as admin:
        admin.create_topics({'t': {'num_partitions': 1, 'replication_factor': 1}})
        admin.describe_cluster()
    assert len(headers.seen) >= 4 and set(headers.states()) == {None}
    assert store.read().is_unknown()


def test_nothing_is_sent_to_a_broker_without_kip_1243(reference_cluster_factory):
    cluster = reference_cluster_factory(features=('kip.232', 'kip.391'))
    headers = Headers(cluster)
    store = ConsistencyContextStore.of(ConsistencyContext.of(cluster.cluster_id, 3))
    with ClientFactory(store).admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics({'t': {'num_partitions': 1, 'replication_factor': 1}})
        admin.describe_cluster()
    assert len(headers.seen) >= 4 and set(headers.states()) == {None}
    assert store.read() == ConsistencyContext.of(cluster.cluster_id, 3)  # no token came back either


def test_a_client_bootstrapped_on_a_stale_broker_reads_from_another(reference_cluster_factory):
    cluster = broker_2_behind(reference_cluster_factory)
    store = ConsistencyContextStore.empty()
    with ClientFactory(store).admin(bootstrap_servers=address(cluster, 0)) as admin:
        admin.create_topics({'t': {'num_partitions': 3, 'replication_factor': 3}})
    handed_over = ConsistencyContextStore.of(ConsistencyContext.from_bytes(store.read().to_bytes()))
    consumer = kafka_kip.KafkaConsumer(bootstrap_servers=address(cluster, 2), consistency_context_store=handed_over)
    try:
        assert consumer.partitions_for_topic('t') == {0, 1, 2}
        assert consumer._cluster.stale_responses >= 1  # broker 2's bootstrap answer, not applied
        assert consumer._manager.consistency.stale_responses >= 1
    finally:
        consumer.close()


def test_stale_answers_of_a_given_broker_are_retried_until_it_catches_up(reference_cluster_factory):
    cluster = broker_2_behind(reference_cluster_factory)
    store = ConsistencyContextStore.empty()
    with ClientFactory(store).admin(bootstrap_servers=address(cluster, 0)) as admin:
        admin.create_topics({'t': {'num_partitions': 1, 'replication_factor': 3}})
        answered = []

        def release_after_first(request):
            answered.append(request.broker_id)
            if len(answered) == 2:  # broker 2 answered STALE_METADATA once; the retry comes after the release
                cluster.state.release_metadata(2)
            return Delay(seconds=0)

        cluster.control(ApiKey.DescribeConfigs, release_after_first, broker_id=2, keep=True)
        resource = ConfigResource(ConfigResourceType.BROKER, '2')
        result = admin.describe_configs([resource])
    assert answered[:2] == [2, 2]
    assert admin._manager.consistency.stale_responses == 1
    assert result  # answered by broker 2 once it had caught up


@pytest.mark.parametrize('features', [None, ('kip.232', 'kip.391')], ids=['kip.1243', 'stock'])
def test_a_store_of_another_cluster_is_fatal(reference_cluster_factory, features):
    cluster_a = kip_cluster(reference_cluster_factory, brokers=1)
    cluster_b = kip_cluster(reference_cluster_factory, brokers=1, features=features)
    context_a = ConsistencyContext.of(cluster_a.cluster_id, cluster_a.metadata_offset())
    factory = ClientFactory(ConsistencyContextStore.of(context_a))
    expected = f"belongs to cluster '{cluster_b.cluster_id}', but the consistency context store holds a context of " \
               f"cluster '{cluster_a.cluster_id}'"
    with pytest.raises(InconsistentClusterIdError, match=expected) as caught:
        factory.admin(bootstrap_servers=cluster_b.bootstrap_servers, bootstrap_timeout_ms=20_000)
    assert (caught.value.expected_cluster_id, caught.value.cluster_id) == (cluster_a.cluster_id,
                                                                           cluster_b.cluster_id)
    with pytest.raises(InconsistentClusterIdError, match=expected):
        factory.producer(bootstrap_servers=cluster_b.bootstrap_servers, bootstrap_timeout_ms=20_000)
    with pytest.raises(InconsistentClusterIdError, match=expected):
        factory.consumer('t', bootstrap_servers=cluster_b.bootstrap_servers, bootstrap_timeout_ms=20_000)
    # without a bootstrap at construction (api_version given): the first send's future, poll() raise it
    producer = factory.producer(bootstrap_servers=cluster_b.bootstrap_servers, api_version=(4, 0), max_block_ms=20_000)
    try:
        with pytest.raises(InconsistentClusterIdError, match=expected):
            producer.send('t', b'v').get(timeout=20)
    finally:
        producer.close(timeout=5)
    consumer = factory.consumer(bootstrap_servers=cluster_b.bootstrap_servers, api_version=(4, 0))
    try:
        consumer.subscribe(['t'])
        with pytest.raises(InconsistentClusterIdError, match=expected):
            for _ in range(100):
                consumer.poll(timeout_ms=200)
    finally:
        consumer.close()
    assert factory.store.read() == context_a


def test_an_admin_call_raises_once_the_shared_context_names_another_cluster(reference_cluster_factory, tmp_path):
    cluster = kip_cluster(reference_cluster_factory, brokers=1)
    path = tmp_path / 'context'
    with ClientFactory(ConsistencyContextStore.file(path)).admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        assert admin.describe_cluster()['cluster_id'] == cluster.cluster_id
        path.write_bytes(ConsistencyContext.of('cluster-of-another-app', 7).to_bytes())  # a misconfigured share
        with pytest.raises(InconsistentClusterIdError, match=f"belongs to cluster '{cluster.cluster_id}', but the "
                                                             "consistency context store holds a context of cluster "
                                                             "'cluster-of-another-app'"):
            admin.describe_cluster()
        with pytest.raises(InconsistentClusterIdError):
            admin.list_topics()  # and every call after it, without a request
    assert path.read_bytes() == ConsistencyContext.of('cluster-of-another-app', 7).to_bytes()


def test_the_factorys_wait_for_its_writes_is_bounded(reference_cluster_factory):
    cluster = reference_cluster_factory(brokers=1, features=())
    factory = ClientFactory(ConsistencyContextStore.empty(), max_block_ms=300)
    consumer = factory.consumer(bootstrap_servers=cluster.bootstrap_servers, allow_auto_create_topics=False)
    try:
        # a write no broker will ever show (recorded as an admin client would): the consumer waits 300 ms at most
        factory.written_topics.record(TopicWrite('ghost', WriteKind.CREATED, 3))
        assert consumer.partitions_for_topic('ghost') == set()
        assert consumer._cluster.unreflected_responses >= 1
    finally:
        consumer.close()


def test_answers_that_stay_stale_fail_the_call_with_stale_metadata_when_it_times_out(reference_cluster_factory):
    cluster = broker_2_behind(reference_cluster_factory)
    factory = ClientFactory(ConsistencyContextStore.empty())
    with factory.admin(bootstrap_servers=address(cluster, 0), request_timeout_ms=1500) as admin:
        admin.create_topics({'t': {'num_partitions': 1, 'replication_factor': 3}})
        asked = []
        cluster.control(ApiKey.DescribeConfigs, lambda request: asked.append(request.broker_id), broker_id=2,
                        keep=True)
        with pytest.raises(StaleMetadataError, match='answers until the request timed out came from metadata '
                                                     f'older than the consistency context .token '
                                                     f'{cluster.metadata_offset()}'):
            admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, '2')])  # broker 2's own configs
    assert len(asked) >= 2  # asked again after the first STALE_METADATA, until the timeout
