"""Client quotas: produce and fetch byte rates throttled by the reference cluster as by Apache Kafka 4.4 (the same
``throttle_time_ms`` for the same requests, the connection muted meanwhile, a throttled fetch answered empty), and
the precedence of user, client-id and default quotas. Altering and describing them with the Java AdminClient:
tests/reference/test_java_client.py."""
from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import INVALID_REQUEST, NONE, UNSUPPORTED_VERSION
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import fetch_request, produce_request
from kafka_kip_reference.broker.client_quotas import Alteration, ClientQuotas
from kafka_kip_reference.broker.model import ClusterError
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.support.record_batches import Batch, Record, build

QUOTA = 10240.0  # bytes per second
VALUE_BYTES = 120_000  # one record: over the quota's 10 windows (102,400 bytes), so its request is throttled
WINDOW_MS = 10_000  # quota.window.num (11) - 1 full one-second windows: the span the first rate is taken over


@pytest.fixture(params=['reference', 'apache-kafka'])
def bootstrap(request, reference_cluster_factory) -> str:
    """A reference cluster without the extensions (their fetch response fields would add bytes), or Apache Kafka."""
    if request.param == 'reference':
        return reference_cluster_factory(3, features=()).bootstrap_servers
    return request.getfixturevalue('apache_kafka').bootstrap_servers


def alter(wire: WireClient, client_id: str, key: str, value: float | None) -> int:
    request_class = REQUESTS[ApiKey.AlterClientQuotas]
    entry = request_class.EntryData
    answer = wire.request(request_class(version=1, validate_only=False, entries=[entry(
        entity=[entry.EntityData(entity_type='client-id', entity_name=client_id)],
        ops=[entry.OpData(key=key, value=value or 0.0, remove=value is None)])]))
    return answer.entries[0].error_code


def described(wire: WireClient, client_id: str) -> list:
    request_class = REQUESTS[ApiKey.DescribeClientQuotas]
    return wire.request(request_class(version=1, strict=True, components=[request_class.ComponentData(
        entity_type='client-id', match_type=0, match=client_id)])).entries


def expected_throttle_ms(size: int) -> int:
    """Kafka's throttle time for a first request of ``size`` bytes: the rate is taken over 10 s."""
    return int(size * 1000 / QUOTA - WINDOW_MS + 0.5)


def test_produce_and_fetch_byte_rates_are_throttled_as_apache_kafka_throttles_them(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topic, producer_id, consumer_id = (f'{kind}-{uuid.uuid4().hex[:8]}' for kind in ('quota', 'prod', 'cons'))
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        leader = {}

        def led() -> bool:
            partitions = admin.describe_topics([topic])[0]['partitions']
            leader['id'] = partitions[0]['leader_id'] if partitions else -1
            return leader['id'] >= 0
        wait_until(led, f'a leader of {topic}')
        address = {b['broker_id']: (b['host'], b['port']) for b in admin.describe_cluster()['brokers']}[leader['id']]
        with WireClient(address) as wire:
            assert alter(wire, producer_id, 'producer_byte_rate', QUOTA) == NONE
            assert alter(wire, consumer_id, 'consumer_byte_rate', QUOTA) == NONE
            wait_until(lambda: described(wire, producer_id) and described(wire, consumer_id), 'the quotas known')

        # stamped now: Kafka's retention check deletes a record stamped 1970 (older than retention.ms) between fetches
        now_ms = int(time.time() * 1000)
        produce = produce_request(topic, 0, build(Batch([Record(now_ms, None, b'x' * VALUE_BYTES)])), acks=1, version=9)
        # Kafka counts the request's header and body: api key, version, correlation id, client id, tag section
        request_bytes = 2 + 2 + 4 + 2 + len(producer_id) + 1 + len(produce.encode(version=9))
        with WireClient(address, client_id=producer_id, timeout=30) as wire:
            answer = wire.request(produce)
            answered = time.monotonic()
            assert (answer.responses[0].partition_responses[0].error_code, answer.throttle_time_ms) == \
                (NONE, expected_throttle_ms(request_bytes))
            wire.request(REQUESTS[ApiKey.ApiVersions](version=0))  # read only once the connection is unmuted
            assert time.monotonic() - answered >= answer.throttle_time_ms / 2000

        with WireClient(address) as wire:  # what the consumer's fetch would answer, counted by Kafka's sizeOf
            def with_the_record():  # a loaded Apache Kafka answered one fetch right after the produce empty
                answer = wire.request(fetch_request(topic, 0, 0, version=12))
                return answer if answer.responses[0].partitions[0].records else None
            full = wait_until(with_the_record, f'the record of {topic} fetchable')
        fetch_bytes = 4 + len(full.encode())
        with WireClient(address, client_id=consumer_id, timeout=30) as wire:
            throttled = wire.request(fetch_request(topic, 0, 0, version=12))
            again = wire.request(fetch_request(topic, 0, 0, version=12))  # read once the connection is unmuted
        assert (throttled.error_code, throttled.throttle_time_ms, throttled.responses) == \
            (NONE, expected_throttle_ms(fetch_bytes), [])
        # the empty answer's bytes were not counted: the same fetch, later, is throttled less (not twice as long)
        assert (again.responses, 0 < again.throttle_time_ms < throttled.throttle_time_ms) == ([], True)
        with WireClient(address) as wire:
            assert alter(wire, producer_id, 'producer_byte_rate', None) == NONE
            assert alter(wire, consumer_id, 'consumer_byte_rate', None) == NONE
    finally:
        admin.delete_topics([topic])
        admin.close()


def quotas(*entities: tuple[dict, dict]) -> ClientQuotas:
    store = ClientQuotas()
    assert [error for _, error, _ in store.alter([Alteration(entity, list(values.items()))
                                                  for entity, values in entities], validate_only=False)] \
        == [NONE] * len(entities)
    return store


def test_the_most_specific_quota_applies_and_names_whose_bytes_are_counted_together():
    store = quotas(({'user': 'alice', 'client-id': 'app'}, {'producer_byte_rate': 1.0}),
                   ({'user': 'alice', 'client-id': None}, {'producer_byte_rate': 2.0}),
                   ({'user': 'alice'}, {'producer_byte_rate': 3.0, 'consumer_byte_rate': 30.0}),
                   ({'user': None, 'client-id': 'app'}, {'producer_byte_rate': 4.0}),
                   ({'user': None}, {'producer_byte_rate': 6.0}),
                   ({'client-id': 'app'}, {'producer_byte_rate': 7.0}),
                   ({'client-id': None}, {'producer_byte_rate': 8.0, 'consumer_byte_rate': 80.0}))
    limit = store.byte_rate_limit
    assert limit('producer_byte_rate', 'alice', 'app') == (1.0, ('alice', 'app'))
    assert limit('producer_byte_rate', 'alice', 'other') == (2.0, ('alice', 'other'))  # alice's default client
    assert limit('consumer_byte_rate', 'alice', 'other') == (30.0, ('alice', ''))  # all alice's clients together
    assert limit('producer_byte_rate', 'bob', 'app') == (4.0, ('bob', 'app'))
    assert limit('producer_byte_rate', 'bob', 'other') == (6.0, ('bob', ''))
    assert limit('consumer_byte_rate', 'bob', 'other') == (80.0, ('', 'other'))  # every user of the client id
    assert store.alter([Alteration({'user': None}, [('producer_byte_rate', None)])], validate_only=False)[0][1] == NONE
    assert limit('producer_byte_rate', 'bob', 'other') == (8.0, ('', 'other'))
    assert ClientQuotas().byte_rate_limit('producer_byte_rate', 'bob', 'other') is None


def test_alterations_and_filters_kafka_refuses():
    store = quotas(({'client-id': 'app'}, {'producer_byte_rate': 1024.0}))
    refused = store.alter([
        Alteration({'client-id': 'a'}, [('producer_byte_rate', 1.0), ('producer_byte_rate', 2.0)]),
        Alteration({'group': 'g'}, [('producer_byte_rate', 1.0)]),
        Alteration({'ip': 'not an address'}, [('connection_creation_rate', 1.0)]),
        Alteration({'ip': '10.0.0.1'}, [('connection_creation_rate', 1e12)]),
        Alteration({'client-id': 'b'}, [('consumer_byte_rate', float('inf'))]),
        Alteration({'client-id': 'app'}, [('producer_byte_rate', None)]),
        Alteration({'client-id': 'app'}, [('consumer_byte_rate', 1.0)])], validate_only=False)
    assert refused == [
        ({'client-id': 'a'}, INVALID_REQUEST, 'Ignoring duplicate entity ClientQuotaEntity(entries={client-id=a})'),
        ({'group': 'g'}, INVALID_REQUEST, 'Unhandled client quota entity type: group'),
        ({'ip': 'not an address'}, INVALID_REQUEST, 'not an address is not a valid IP or resolvable host.'),
        ({'ip': '10.0.0.1'}, INVALID_REQUEST, 'Proposed value for connection_creation_rate is too large for an INT.'),
        ({'client-id': 'b'}, INVALID_REQUEST, 'Quota consumer_byte_rate must be a finite number'),
        # an entity named twice keeps its first alteration and is answered as refused
        ({'client-id': 'app'}, INVALID_REQUEST,
         'Ignoring duplicate entity ClientQuotaEntity(entries={client-id=app})')]
    assert store.describe([], strict=False) == []
    for components, error in ((['', 0, 'x'], INVALID_REQUEST), (['user', 3, None], INVALID_REQUEST),
                              (['user', 0, None], INVALID_REQUEST), (['user', 1, 'x'], INVALID_REQUEST),
                              (['group', 2, None], UNSUPPORTED_VERSION)):
        with pytest.raises(ClusterError) as refusal:
            store.describe([tuple(components)], strict=False)
        assert refusal.value.error_code == error
