"""KIP-1243: consistency contexts, a ClientFactory's read-your-writes, and one cluster per context.

Where the target advertises ``kip.1243`` (the reference cluster) every request carries the store's context and
every response's token is stored; elsewhere nothing is sent and the store stays as it was. On every target a
``ClientFactory``'s producer sends to a topic its admin just created or grew by the new partition count, and a
context of another cluster is refused with ``InconsistentClusterIdError`` before anything is sent (by the cluster id
of the MetadataResponse where there is no token). Stale brokers that make the difference are exercised on the
reference cluster (tests/metadata/test_kip1243_scenarios.py): no other target can be made to serve stale metadata on purpose.
"""
from __future__ import annotations

from typing import Any

import pytest
from kafka.errors import InconsistentClusterIdError
from kafka.partitioner.default import murmur2

from integration.targets import BrokerTarget
from kafka_kip import ClientFactory, ConsistencyContext, ConsistencyContextStore

pytestmark = pytest.mark.kip1243

KEYS = [f'key-{i}' for i in range(40)]


def _partitions(keys: list[str], count: int) -> list[int]:
    return [(murmur2(key.encode()) & 0x7FFFFFFF) % count for key in keys]


@pytest.fixture
def factory(target: BrokerTarget) -> Any:
    """A ClientFactory over an empty store; ``factory.make(kind, *args, **config)`` builds a client for the target
    (closed afterwards)."""
    made: list[Any] = []
    factory = ClientFactory(ConsistencyContextStore.empty())

    def make(kind: str, *args: Any, **config: Any) -> Any:
        client = getattr(factory, kind)(*args, bootstrap_servers=target.bootstrap_servers,
                                        **{**target.client_config, **config})
        made.append(client)
        return client

    factory.make = make
    yield factory
    for client in reversed(made):
        client.close()


@pytest.mark.requires('create_topics')
def test_the_store_holds_the_token_exactly_where_kip_1243_is_advertised(target: BrokerTarget, topic: str,
                                                                         factory: Any) -> None:
    """After an admin client created a topic, the factory's store holds the target's cluster id and a token where
    the target advertises kip.1243, and is still unknown elsewhere."""
    admin = factory.make('admin')
    admin.create_topics({topic: {'num_partitions': 1, 'replication_factor': 1}})
    context = factory.store.read()
    if 'kip.1243' in target.capabilities:
        assert context.cluster_id == admin._manager.cluster.cluster_id and context.offset >= 0
    else:
        assert context.is_unknown()


@pytest.mark.requires('create_topics', 'create_partitions')
def test_a_factory_producer_sends_by_the_count_its_admin_just_gave_the_topic(target: BrokerTarget, topic: str,
                                                                             factory: Any) -> None:
    """A producer that knew the topic with 2 partitions sends 40 keyed records right after the factory's admin grew
    it to 4: every record goes where 4 partitions put its key (it waits for metadata that shows 4)."""
    admin = factory.make('admin')
    admin.create_topics({topic: {'num_partitions': 2, 'replication_factor': 1}})
    producer = factory.make('producer', linger_ms=0)
    assert producer.send(topic, key=b'first', value=b'v').get(timeout=30).partition == _partitions(['first'], 2)[0]
    admin.create_partitions({topic: 4})
    futures = [producer.send(topic, key=key.encode(), value=b'v') for key in KEYS]
    assert [f.get(timeout=30).partition for f in futures] == _partitions(KEYS, 4)


@pytest.mark.requires('create_topics')
def test_a_new_topic_is_used_at_once_by_the_factorys_clients(target: BrokerTarget, topic: str, factory: Any) -> None:
    """A topic the factory's admin created has all its partitions at once for the factory's consumer, and its
    producer's first record is acknowledged."""
    factory.make('admin').create_topics({topic: {'num_partitions': 3, 'replication_factor': 1}})
    consumer = factory.make('consumer', allow_auto_create_topics=False)
    assert consumer.partitions_for_topic(topic) == {0, 1, 2}
    producer = factory.make('producer')
    assert producer.send(topic, b'v', partition=2).get(timeout=30).offset == 0


def test_a_context_of_another_cluster_is_refused(target: BrokerTarget) -> None:
    """A store holding a context of another cluster: the admin client refuses the target at bootstrap, naming both
    cluster ids."""
    other = ConsistencyContext.of('another-cluster', 5)
    factory = ClientFactory(ConsistencyContextStore.of(other))
    with pytest.raises(InconsistentClusterIdError, match="but the consistency context store holds a context of "
                                                         "cluster 'another-cluster'") as caught:
        factory.admin(bootstrap_servers=target.bootstrap_servers, bootstrap_timeout_ms=30_000, **target.client_config)
    assert caught.value.expected_cluster_id == 'another-cluster'
    assert caught.value.cluster_id not in (None, 'another-cluster')
    assert factory.store.read() == other
