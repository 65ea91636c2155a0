"""Hostile input at scale, each case with Apache Kafka's answer, the log and the other clients unharmed: many
topics in one request (CreateTopics, Metadata auto-creation, Metadata naming 100,000 topics), CreateTopics' partition
and record limits, the largest offset, one partition named 10,000 times in one Produce. The cases that measure memory
share one ``kafka-kip broker`` process (the ``broker`` fixture), another client asking it for Metadata meanwhile."""
from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.record import MemoryRecords

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
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.broker_process import BrokerProcess
from tests.support.clusters import cluster_with_topic_t

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


def answered_meanwhile(address, hostile_request, api_key: int, version: int, times: int = 1,
                       topic: str = 't') -> tuple[list, int]:
    """Send ``hostile_request`` ``times`` times on one connection, each once the one before it is answered, and,
    until the last is answered, Metadata for ``topic`` on another: ``(the hostile request's answers, how many
    Metadata answers for ``topic``, each without error, came before the last of them)``."""
    body = hostile_request.encode(version=version)

    def attack(hostile: WireClient) -> list:
        answers = [hostile.read_response(api_key, version)]
        for _ in range(times - 1):
            hostile.send(api_key, version, body)
            answers.append(hostile.read_response(api_key, version))
        return answers

    with ThreadPoolExecutor(1) as pool, WireClient(address, timeout=600) as hostile, WireClient(address) as other:
        hostile.send(api_key, version, body)  # the first before the other client asks anything
        answers = pool.submit(attack, hostile)
        served = 0
        while not answers.done():
            assert [(t.name, t.error_code) for t in other.request(metadata_request([topic])).topics] == [
                (topic, NONE)]
            served += 0 if answers.done() else 1
        return answers.result(), served


@pytest.fixture(scope='module')
def broker() -> Iterator[BrokerProcess]:
    """One ``kafka-kip broker`` process holding topic t, for the cases that measure its memory (each resets the
    peak first, :meth:`BrokerProcess.reset_peak_rss`) and make topics of their own."""
    with BrokerProcess() as process:
        with WireClient(process.address) as wire:
            assert wire.request(create_topics_request({'t': 1})).topics[0].error_code == NONE
        yield process


def fetched(address, topic: str, offset: int) -> tuple[object, list[tuple[int, bytes]]]:
    """Partition 0 of ``topic`` fetched from ``offset``: ``(its answer, [(offset, value), ...])``."""
    with WireClient(address) as wire:
        answer = wire.request(fetch_request(topic, 0, offset)).responses[0].partitions[0]
    records, values = MemoryRecords(bytes(answer.records or b'')), []
    while (batch := records.next_batch()) is not None:
        values += [(record.offset, record.value) for record in batch]
    return answer, values


def test_metadata_auto_creating_and_naming_many_topics_serves_another_client_meanwhile(broker):
    baseline = broker.reset_peak_rss()
    names = [f'auto-{i:06d}' for i in range(2000)]
    creating = metadata_request(names)
    creating.allow_auto_topic_creation = True  # any unauthenticated client, auto.create.topics.enable=true
    [created], served_creating = answered_meanwhile(broker.address, creating, ApiKey.Metadata, 12)
    # 100,000 names of topics that do not exist (the 2,000 among them do now)
    [named], served_naming = answered_meanwhile(broker.address, metadata_request(
        [f'auto-{i:06d}' for i in range(100_000)]), ApiKey.Metadata, 12)
    listed = metadata_of(broker.address, None)
    grown = broker.peak_rss_mib() - baseline
    assert [(t.name, t.error_code) for t in created.topics] == [(n, UNKNOWN_TOPIC_OR_PARTITION) for n in names]
    assert sorted(t.name for t in listed.topics if t.name.startswith('auto-')) == names
    assert [(t.error_code, len(t.partitions)) for t in named.topics] == (
        [(NONE, 1)] * 2000 + [(UNKNOWN_TOPIC_OR_PARTITION, 0)] * 98_000)
    assert served_creating > 0 and served_naming > 0  # the other client was answered while each was in progress
    assert grown < 100  # MiB: measured 57 (2,000 topics, then the 100,000-topic answer)


def test_create_topics_over_its_partition_and_record_limits_is_refused_whole_as_kafka_refuses_it(broker):
    """The attack: 10 topics of 10,000 partitions in one CreateTopics, again and again (Kafka 4 refuses more than
    10,000 partitions per request); then 10,000 partitions with their topic records (10,002 metadata records, over
    Kafka's MAX_RECORDS_PER_USER_OP) and 5,001 topics of one partition. Nothing is created, little memory taken."""
    baseline = broker.reset_peak_rss()
    attack = create_topics_request({f'huge-{i}': 10_000 for i in range(10)})
    refused, served = answered_meanwhile(broker.address, attack, ApiKey.CreateTopics, 7, times=20)
    [records], _ = answered_meanwhile(broker.address, create_topics_request({'big': 9_999, 'small': 1}),
                                      ApiKey.CreateTopics, 7)
    topics, served_topics = answered_meanwhile(broker.address, create_topics_request(
        {f'one-{i}': 1 for i in range(5001)}), ApiKey.CreateTopics, 7, times=3)
    with WireClient(broker.address) as wire:
        # 1 + 9,999 records is within it (validate_only: Kafka counts the records all the same)
        accepted = wire.request(create_topics_request({'big': 9_999}, validate_only=True))
    grown = broker.peak_rss_mib() - baseline
    partitions = (POLICY_VIOLATION, 'Excessively large number of partitions per request.')
    too_many_records = (POLICY_VIOLATION, 'Unable to perform excessively large batch operation.')
    assert [[(t.name, t.error_code, t.error_message) for t in answer.topics] for answer in refused] == [
        [(f'huge-{i}', *partitions) for i in range(10)]] * 20
    assert [(t.name, t.error_code, t.error_message) for t in records.topics] == [
        (name, *too_many_records) for name in ('big', 'small')]
    assert [[(t.error_code, t.error_message) for t in answer.topics] for answer in topics] == [
        [too_many_records] * 5001] * 3
    assert [(t.name, t.error_code, t.num_partitions) for t in accepted.topics] == [('big', NONE, 9_999)]
    assert not [t.name for t in metadata_of(broker.address, None).topics
                if t.name.startswith(('huge-', 'big', 'small', 'one-'))]
    assert served > 0 and served_topics > 0  # the other client was answered between the refusals
    assert grown < 32  # MiB: measured 4 (the 10 x 10,000 partitions, accepted, took 562)


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
        '10 topics of 10,000 partitions': ({f'h{i}': 10_000 for i in range(10)}, partitions),  # the attack
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


def test_the_broker_refuses_a_batch_whose_log_end_offset_would_overflow_and_the_partition_stays_usable(broker):
    """KIP-391 batches at offsets a log cannot take, sent again and again: refused with INVALID_RECORD (the issue's
    attack stored one, and every later answer about the partition failed to encode)."""
    address = broker.address
    with WireClient(address) as wire:
        assert wire.request(create_topics_request({'overflow': 1})).topics[0].error_code == NONE
    baseline = broker.reset_peak_rss()
    largest = 2**63 - 2  # the largest offset a record may take: the log end offset after it is 2**63 - 1
    over, served_over = answered_meanwhile(address, produce_request(
        'overflow', 0, build_batch([(None, b'x')], base_offset=largest + 1), use_offset=True),
        ApiKey.Produce, 9, times=200, topic='overflow')
    spanning, served_spanning = answered_meanwhile(address, produce_request(
        'overflow', 0, build_batch([(None, b'a'), (None, b'b')], base_offset=largest), use_offset=True),
        ApiKey.Produce, 9, times=200, topic='overflow')
    with WireClient(address) as wire:
        unchanged = wire.request(list_offsets_request('overflow', 0, -1)).topics[0].partitions[0]
        last = answer_of(wire.request(produce_request(
            'overflow', 0, build_batch([(None, b'last')], base_offset=largest), use_offset=True)))
        after = answer_of(wire.request(produce_request('overflow', 0, build_batch([(None, b'after')]))))
        listed = wire.request(list_offsets_request('overflow', 0, -1)).topics[0].partitions[0]
    answer, records = fetched(address, 'overflow', largest)
    grown = broker.peak_rss_mib() - baseline
    assert {(a.error_code, a.base_offset, a.error_message) for a in map(answer_of, over)} == {(
        INVALID_RECORD, -1, f'Batch has an invalid offset range: [{2**63 - 1}, {2**63 - 1}]; a record offset must '
                            f'be in 0..{largest}')}
    assert {(a.error_code, a.base_offset) for a in map(answer_of, spanning)} == {(INVALID_RECORD, -1)}
    assert (len(over), len(spanning)) == (200, 200)
    assert (unchanged.error_code, unchanged.offset) == (NONE, 0)  # refused whole: the log is unchanged
    assert (last.error_code, last.base_offset, last.log_end_offset) == (NONE, largest, 2**63 - 1)
    assert (after.error_code, after.base_offset) == (INVALID_RECORD, -1)  # the log is full, not wedged
    assert (listed.error_code, listed.offset) == (NONE, 2**63 - 1)
    assert (answer.error_code, answer.high_watermark, records) == (NONE, 2**63 - 1, [(largest, b'last')])
    assert served_over > 0 and served_spanning > 0  # the other client was answered between the refusals
    assert grown < 16  # MiB: measured 1


def repeated_partition_produce(topic: str, times: int) -> object:
    """A Produce naming partition 0 of ``topic`` ``times`` times (in two entries for the topic), record ``v<i>``
    in the ``i``-th."""
    Produce = REQUESTS[ApiKey.Produce]
    data = Produce.TopicProduceData
    batches = [build_batch([(None, f'v{i}'.encode())]) for i in range(times)]
    half = times // 2
    return Produce(version=9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=b) for b in batches[:half]]),
        data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=b) for b in batches[half:]])])


def test_a_produce_naming_one_partition_10000_times_appends_once_as_kafka(broker):
    with WireClient(broker.address) as wire:
        assert wire.request(create_topics_request({'repeated': 1})).topics[0].error_code == NONE
    baseline = broker.reset_peak_rss()
    answers, served = answered_meanwhile(broker.address, repeated_partition_produce('repeated', 10_000),
                                         ApiKey.Produce, 9, times=5, topic='repeated')
    _, records = fetched(broker.address, 'repeated', 0)
    grown = broker.peak_rss_mib() - baseline
    assert [[(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
             for t in answer.responses] for answer in answers] == [[('repeated', [(0, NONE, i)])] for i in range(5)]
    assert records == [(i, b'v9999') for i in range(5)]  # once per Produce, the records named last (Kafka's)
    assert served > 0  # the other client was answered between the Produce requests
    assert grown < 32  # MiB: measured 6 (five 789 KB requests)


def test_a_produce_naming_one_partition_10000_times_appends_once_as_apache_kafka(bootstrap_address):
    topic = f'repeated-{uuid.uuid4().hex[:8]}'
    with WireClient(bootstrap_address) as wire:
        assert wire.request(create_topics_request({topic: 1})).topics[0].error_code == NONE

    def leader() -> tuple[str, int] | None:
        answer = metadata_of(bootstrap_address, [topic])
        [partition] = answer.topics[0].partitions or [None]
        addresses = {b.node_id: (b.host, b.port) for b in answer.brokers}
        return addresses.get(partition.leader_id) if partition is not None and not partition.error_code else None
    address = wait_until(leader, f'a leader of {topic}')
    request = repeated_partition_produce(topic, 10_000)
    with WireClient(address) as wire:
        def appended() -> object | None:
            """The Produce's answer once it appends (a broker that has not yet learnt it leads the new partition
            refuses it whole: asked again)."""
            answer = wire.request(request)
            return answer if answer_of(answer).error_code == NONE else None
        answer = wait_until(appended, f'the Produce to {topic} appended')
    assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in answer.responses] == [(topic, [(0, NONE, 0)])]
    assert fetched(address, topic, 0)[1] == [(0, b'v9999')]


# -- before SASL authentication -----------------------------------------------------------------------------


def closed_unanswered(sock: socket.socket, data: bytes) -> bool:
    """Send ``data``: True if the broker closed the connection without answering a byte (its close may break the
    send, and a close with our bytes unread reaches us as a reset)."""
    try:
        sock.sendall(data)
        return sock.recv(4) == b''
    except (BrokenPipeError, ConnectionResetError):
        return True


def test_a_request_over_sasl_server_max_receive_size_before_authentication_closes_the_connection_unread():
    with BrokerProcess('--user', 'alice=secret') as broker:
        baseline = broker.peak_rss_mib()
        for _ in range(3):
            with socket.create_connection(broker.address, timeout=10) as sock:
                assert closed_unanswered(sock, struct.pack('>i', 100 << 20) + b'\0' * 65536)  # says 100 MiB follow
        with WireClient(broker.address) as wire:  # 512 KiB + 1 of SASL token: Kafka's limit, and so closed
            assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN')).error_code == NONE
            # the broker closes once it has read the size: while the token is still being sent (a broken pipe or a
            # reset), or after (the end of the stream)
            with pytest.raises(ConnectionError):
                wire.send(ApiKey.SaslAuthenticate, 2, REQUESTS[ApiKey.SaslAuthenticate](
                    version=2, auth_bytes=b'\0' * 524288).encode(version=2))
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
