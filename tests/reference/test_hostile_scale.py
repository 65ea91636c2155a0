"""Hostile input at scale, each case with Apache Kafka's answer, the log and the other clients unharmed: many
topics in one request (CreateTopics, Metadata auto-creation, Metadata naming 100,000 topics), CreateTopics' record
limit, the largest offset, repeated partitions in one Produce."""
from __future__ import annotations

import socket
import struct
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.protocol.constants import (
    INVALID_RECORD,
    NONE,
    POLICY_VIOLATION,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_SASL_MECHANISM,
)
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import fetch_request, list_offsets_request, metadata_request, produce_request
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.sasl_mechanisms import SCRAM_SHA_256, scram_credential
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.broker_process import BrokerProcess
from tests.support.clusters import cluster_with_topic_t

TP = TopicPartition('t', 0)

CreateTopics = REQUESTS[ApiKey.CreateTopics]
Metadata = REQUESTS[ApiKey.Metadata]


def create_topics_request(topics: dict[str, int], validate_only: bool = False):
    return CreateTopics(version=7, timeout_ms=60_000, validate_only=validate_only, topics=[
        CreateTopics.CreatableTopic(name=name, num_partitions=count, replication_factor=1, assignments=[], configs=[])
        for name, count in topics.items()])


def metadata_of(address, topics: list[str] | None):
    request = Metadata(version=12, topics=None if topics is None else [Metadata.MetadataRequestTopic(name=name)
                                                                       for name in topics],
                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with WireClient(address) as wire:
        return wire.request(request)


cluster = cluster_with_topic_t(brokers=1, partitions=1, replication_factor=1)


def test_creating_2000_topics_in_one_request_serves_another_client_meanwhile(cluster):
    address = cluster.brokers()[0]
    wanted = {f'many-{i:04d}': 1 for i in range(2000)}
    with ThreadPoolExecutor(1) as pool, WireClient(address, timeout=240) as hostile:
        hostile.send(ApiKey.CreateTopics, 7, create_topics_request(wanted).encode(version=7))
        other = pool.submit(metadata_of, address, ['t']).result()
        created = hostile.read_response(ApiKey.CreateTopics, 7)
    assert [(t.name, t.error_code) for t in other.topics] == [('t', NONE)]
    assert [(t.name, t.error_code) for t in created.topics] == [(name, NONE) for name in wanted]
    listed = metadata_of(address, None)
    assert sorted(t.name for t in listed.topics) == sorted([*wanted, 't'])
    assert {len(t.partitions) for t in listed.topics} == {1}


def answered_meanwhile(address, hostile_request, api_key: int, version: int) -> tuple[object, int]:
    """Send ``hostile_request`` on one connection and, until its answer comes, Metadata for topic t on another:
    ``(the hostile request's answer, how many Metadata answers for t came before it)``."""
    with ThreadPoolExecutor(1) as pool, WireClient(address, timeout=600) as hostile, WireClient(address) as other:
        hostile.send(api_key, version, hostile_request.encode(version=version))
        answer = pool.submit(hostile.read_response, api_key, version)
        served = 0
        while not answer.done():
            assert [(t.name, t.error_code) for t in other.request(metadata_request(['t'])).topics] == [('t', NONE)]
            served += 0 if answer.done() else 1
        return answer.result(), served


def test_metadata_auto_creating_and_naming_many_topics_serves_another_client_meanwhile():
    with BrokerProcess() as broker:
        with WireClient(broker.address) as wire:
            assert wire.request(create_topics_request({'t': 1})).topics[0].error_code == NONE
        baseline = broker.peak_rss_mib()
        names = [f'auto-{i:06d}' for i in range(2000)]
        creating = metadata_request(names)
        creating.allow_auto_topic_creation = True  # any unauthenticated client, auto.create.topics.enable=true
        created, served_creating = answered_meanwhile(broker.address, creating, ApiKey.Metadata, 12)
        # 100,000 names of topics that do not exist (the 2,000 among them do now)
        named, served_naming = answered_meanwhile(broker.address, metadata_request(
            [f'auto-{i:06d}' for i in range(100_000)]), ApiKey.Metadata, 12)
        listed = metadata_of(broker.address, None)
        grown = broker.peak_rss_mib() - baseline
    assert [(t.name, t.error_code) for t in created.topics] == [(n, UNKNOWN_TOPIC_OR_PARTITION) for n in names]
    assert sorted(t.name for t in listed.topics) == sorted([*names, 't'])
    assert [(t.error_code, len(t.partitions)) for t in named.topics] == (
        [(NONE, 1)] * 2000 + [(UNKNOWN_TOPIC_OR_PARTITION, 0)] * 98_000)
    assert served_creating > 0 and served_naming > 0  # the other client was answered while each was in progress
    assert grown < 100  # MiB: measured 57 (2,000 topics, then the 100,000-topic answer)


def test_create_topics_over_10000_metadata_records_is_refused_whole_as_kafka_refuses_it(cluster):
    address = cluster.brokers()[0]
    # 10,000 partitions (Kafka's most per request), but a topic record and one per partition: 10,002 records, over
    # Kafka's MAX_RECORDS_PER_USER_OP
    with WireClient(address) as wire:
        refused = wire.request(create_topics_request({'big': 9_999, 'small': 1}))
        # 1 + 9,999 records is within it (validate_only: Kafka counts the records all the same)
        accepted = wire.request(create_topics_request({'big': 9_999}, validate_only=True))
    assert [(t.name, t.error_code, t.error_message) for t in refused.topics] == [
        (name, POLICY_VIOLATION, 'Unable to perform excessively large batch operation.') for name in ('big', 'small')]
    assert [(t.name, t.error_code, t.num_partitions) for t in accepted.topics] == [('big', NONE, 9_999)]
    assert sorted(t.name for t in metadata_of(address, None).topics) == ['t']


@pytest.fixture(params=['reference', 'apache-kafka'])
def bootstrap_address(request, reference_cluster_factory) -> tuple[str, int]:
    """The first broker of a 3-broker reference cluster or of the session's Apache Kafka 4.4."""
    if request.param == 'reference':
        cluster = reference_cluster_factory(3)
    else:
        cluster = request.getfixturevalue('apache_kafka')
    host, port = cluster.bootstrap_servers.split(',')[0].split(':')
    return host, int(port)


def test_create_topics_partition_and_record_limits_as_apache_kafka(bootstrap_address):
    """Kafka 4.4's controller refuses a CreateTopics naming more than 10,000 partitions, then one writing more than
    10,000 metadata records (a topic record, one per partition, one per config), whole, with POLICY_VIOLATION."""
    run = uuid.uuid4().hex[:8]
    partitions = 'Excessively large number of partitions per request.'
    records = 'Unable to perform excessively large batch operation.'
    cases = {  # validate_only: Kafka counts all the same
        'a 10,001-partition topic': ({'a': 10_001}, partitions),
        '10,000 + 1 partitions': ({'a': 10_000, 'b': 1}, partitions),
        '10,000 partitions, 10,001 records': ({'a': 10_000}, records),
        '5,001 topics of 1 partition': ({f't{i}': 1 for i in range(5001)}, records),
        '9,999 partitions and 3 configs': ({'a': 9_999}, records),
        '4,999 topics of 1 partition': ({f't{i}': 1 for i in range(4999)}, None),
        '9,998 partitions and 1 config': ({'a': 9_998}, None),
    }
    seen, expected = {}, {}
    with WireClient(bootstrap_address, timeout=120) as wire:
        for case, (topics, refusal) in cases.items():
            configs = {'9,999 partitions and 3 configs': 3, '9,998 partitions and 1 config': 1}.get(case, 0)
            request = create_topics_request({f'{name}-{run}': count for name, count in topics.items()},
                                            validate_only=True)
            for topic in request.topics:
                topic.configs = [CreateTopics.CreatableTopic.CreatableTopicConfig(name=name, value='1000')
                                 for name in ('retention.ms', 'segment.ms', 'delete.retention.ms')[:configs]]
            answer = wire.request(request)
            seen[case] = {(t.error_code, t.error_message) for t in answer.topics}
            expected[case] = {(POLICY_VIOLATION, refusal) if refusal else (NONE, None)}
        listed = {t.name for t in wire.request(Metadata(version=12, topics=None, allow_auto_topic_creation=False,
                                                        include_topic_authorized_operations=False)).topics}
    assert seen == expected
    assert not {name for name in listed if name.endswith(run)}


def answer_of(response):
    return response.responses[0].partition_responses[0]


def test_the_broker_refuses_a_batch_whose_log_end_offset_would_overflow_and_the_partition_stays_usable(cluster):
    address = cluster.brokers()[0]
    largest = 2**63 - 2  # the largest offset a record may take: the log end offset after it is 2**63 - 1
    with WireClient(address) as wire:
        over = answer_of(wire.request(produce_request('t', 0, build_batch([(None, b'x')], base_offset=largest + 1),
                                                      use_offset=True)))
        spanning = answer_of(wire.request(produce_request(
            't', 0, build_batch([(None, b'a'), (None, b'b')], base_offset=largest), use_offset=True)))
        assert cluster.log_end_offset(TP) == 0  # refused whole: the log is unchanged
        last = answer_of(wire.request(produce_request('t', 0, build_batch([(None, b'last')], base_offset=largest),
                                                      use_offset=True)))
        after = answer_of(wire.request(produce_request('t', 0, build_batch([(None, b'after')]))))
        listed = wire.request(list_offsets_request('t', 0, -1)).topics[0].partitions[0]
        fetched = wire.request(fetch_request('t', 0, largest)).responses[0].partitions[0]
    assert (over.error_code, over.base_offset, over.error_message) == (
        INVALID_RECORD, -1, f'Batch has an invalid offset range: [{2**63 - 1}, {2**63 - 1}]; a record offset must '
                            f'be in 0..{largest}')
    assert (spanning.error_code, spanning.base_offset) == (INVALID_RECORD, -1)
    assert (last.error_code, last.base_offset, last.log_end_offset) == (NONE, largest, 2**63 - 1)
    assert (after.error_code, after.base_offset) == (INVALID_RECORD, -1)  # the log is full, not wedged
    assert (listed.error_code, listed.offset) == (NONE, 2**63 - 1)
    assert (fetched.error_code, fetched.high_watermark) == (NONE, 2**63 - 1)
    assert [r.value for r in cluster.records(TP)] == [b'last']


def test_a_produce_naming_one_partition_many_times_appends_once_as_kafka(cluster):
    Produce = REQUESTS[ApiKey.Produce]
    data = Produce.TopicProduceData
    batches = [build_batch([(None, f'v{i}'.encode())]) for i in range(1000)]
    request = Produce(version=9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        data(name='t', partition_data=[data.PartitionProduceData(index=0, records=b) for b in batches[:500]]),
        data(name='t', partition_data=[data.PartitionProduceData(index=0, records=b) for b in batches[500:]])])
    with WireClient(cluster.brokers()[0]) as wire:
        answer = wire.request(request)
    assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in answer.responses] == [('t', [(0, NONE, 0)])]
    assert [r.value for r in cluster.records(TP)] == [b'v999']  # Kafka keeps the records named last


# -- before SASL authentication -----------------------------------------------------------------------------


def test_a_request_over_sasl_server_max_receive_size_before_authentication_closes_the_connection_unread():
    with BrokerProcess('--user', 'alice=secret') as broker:
        baseline = broker.peak_rss_mib()
        for _ in range(3):
            with socket.create_connection(broker.address, timeout=10) as sock:
                sock.sendall(struct.pack('>i', 100 << 20) + b'\0' * 65536)  # says 100 MiB follow
                assert sock.recv(4) == b''  # closed: nothing buffered, nothing answered
        with WireClient(broker.address) as wire:  # 512 KiB + 1 of SASL token: Kafka's limit, and so closed
            assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN')).error_code == NONE
            wire.send(ApiKey.SaslAuthenticate, 2, REQUESTS[ApiKey.SaslAuthenticate](
                version=2, auth_bytes=b'\0' * 524288).encode(version=2))
            with pytest.raises(ConnectionError):
                wire.read_frame()
        with WireClient(broker.address) as other:  # served, and once authenticated may send more
            assert other.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN')).error_code == NONE
            assert other.request(REQUESTS[ApiKey.SaslAuthenticate](
                version=2, auth_bytes=b'\0alice\0secret')).error_code == NONE
            created = other.request(create_topics_request({'x' * 249: 1}))
            assert created.topics[0].error_code == NONE
        assert broker.peak_rss_mib() - baseline < 16


def test_an_unsupported_sasl_mechanism_is_answered_then_the_connection_closed(reference_cluster_factory):
    cluster = reference_cluster_factory(1, users={'alice': 'secret'})
    with WireClient(cluster.brokers()[0]) as wire:
        answer = wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='GSSAPI'))
        assert (answer.error_code, answer.mechanisms) == (UNSUPPORTED_SASL_MECHANISM,
                                                          ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'])
        with pytest.raises(ConnectionError):
            wire.read_frame()


def test_scram_salts_are_per_user_not_per_password():
    alice, bob = (scram_credential(SCRAM_SHA_256, user, 'same password') for user in ('alice', 'bob'))
    assert alice.salt != bob.salt
    assert scram_credential(SCRAM_SHA_256, 'alice', 'same password') == alice  # stable for the user
