"""Conformance matrix: the same client behaviours against every broker target.

Clients are used exactly as an existing kafka-python program uses them, through the drop-in
``import kafka_kip as kafka``. A behaviour a target cannot express is skipped with the reason
(``requires``); a target that answers wrongly is a strict xfail naming the bug (``target_bug``), and
each such test is kept small enough to be the minimal reproduction of that bug.
"""
from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, FindCoordinatorResponse

import kafka_kip as kafka
from integration.targets import BrokerTarget, encode_request, kafka_request, send_raw

TP = kafka.TopicPartition
# Tansu 0.6.0 holds a JoinGroup for about session_timeout_ms / 2, so groups use a short session.
GROUP_CONFIG = {'session_timeout_ms': 6000, 'heartbeat_interval_ms': 1000}
CONSUMER_CONFIG = {'auto_offset_reset': 'earliest', 'enable_auto_commit': False, 'fetch_max_wait_ms': 100}

MEMBER_ID_REQUIRED = 79
UNSUPPORTED_VERSION = 35
API_VERSIONS_KEY = 18
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14

TANSU_LATEST = ('ListOffsets LATEST answers the base offset of the last batch + 1, not the log end '
                'offset (1 instead of 3 after one batch of 3 records)')
TANSU_BY_TIME = ('ListOffsets by timestamp answers offset 0 with the broker clock as timestamp, '
                 'whatever the requested time and the record timestamps')
MOCK_BY_TIME = ('ListOffsets by timestamp is not implemented (answers offset -1, so offsets_for_times '
                'gives None)')


@pytest.fixture
def clients(target: BrokerTarget) -> Iterator[Callable[..., Any]]:
    """``make(cls, **config)`` builds a client for the target; every client is closed afterwards."""
    made: list[Any] = []

    def make(cls: type, **config: Any) -> Any:
        client = cls(bootstrap_servers=target.bootstrap_servers, **target.client_config, **config)
        made.append(client)
        return client

    yield make
    for client in reversed(made):
        client.close()


def consume(consumer: Any, count: int, timeout: float = 10.0) -> list[Any]:
    """Poll until ``count`` records arrived (or ``timeout``); returns them in arrival order."""
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            records.extend(batch)
    return records


def produce_one_batch(make: Callable[..., Any], tp: Any, values: list[bytes],
                      timestamps: list[int] | None = None) -> list[int]:
    """Produce ``values`` to ``tp`` as a single record batch; returns the offsets."""
    producer = make(kafka.KafkaProducer, linger_ms=60_000)
    futures = [producer.send(tp.topic, key=b'k%d' % i, value=value, partition=tp.partition,
                             timestamp_ms=None if timestamps is None else timestamps[i])
               for i, value in enumerate(values)]
    producer.flush()
    return [f.get(timeout=10).offset for f in futures]


# -- drop-in round trip -------------------------------------------------------------------------

def test_round_trip_keyed_records_with_group_commit(target: BrokerTarget, topic: str, clients: Any) -> None:
    target.create_topic(topic, partitions=2)
    producer = clients(kafka.KafkaProducer)
    sent = [producer.send(topic, key=b'key-%d' % i, value=b'value-%d' % i, partition=i % 2) for i in range(6)]
    producer.flush()
    assert [(m.partition, m.offset) for m in (f.get(timeout=10) for f in sent)] == \
        [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]

    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **GROUP_CONFIG, **CONSUMER_CONFIG)
    consumer.subscribe([topic])
    records = consume(consumer, 6)
    assert sorted((r.partition, r.offset, r.key, r.value) for r in records) == \
        [(0, 0, b'key-0', b'value-0'), (0, 1, b'key-2', b'value-2'), (0, 2, b'key-4', b'value-4'),
         (1, 0, b'key-1', b'value-1'), (1, 1, b'key-3', b'value-3'), (1, 2, b'key-5', b'value-5')]
    assert consumer.poll(timeout_ms=300) == {}
    consumer.commit()
    assert {p: consumer.committed(TP(topic, p)) for p in (0, 1)} == {0: 3, 1: 3}
    consumer.close()

    # A new member of the group resumes from the committed offsets (assign: no second rebalance).
    resumed = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    resumed.assign([TP(topic, 0), TP(topic, 1)])
    assert [resumed.position(TP(topic, p)) for p in (0, 1)] == [3, 3]
    producer.send(topic, key=b'key-6', value=b'value-6', partition=0).get(timeout=10)
    assert [(r.partition, r.offset, r.key) for r in consume(resumed, 1)] == [(0, 3, b'key-6')]


@pytest.mark.target_bug('tansu', 'OffsetFetch returns the committed metadata string as null')
def test_commit_metadata_round_trips(target: BrokerTarget, topic: str, clients: Any) -> None:
    target.create_topic(topic)
    tp = TP(topic, 0)
    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    consumer.commit({tp: kafka.OffsetAndMetadata(0, 'checkpoint-7', 0)})
    committed = consumer.committed(tp, metadata=True)
    assert (committed.offset, committed.metadata) == (0, 'checkpoint-7')


@pytest.mark.target_bug('librdkafka-mock', 'OffsetCommit stores committed_leader_epoch -1 as the current '
                        'leader epoch, so OffsetFetch answers 0 instead of -1')
def test_commit_without_leader_epoch_reads_back_without_one(target: BrokerTarget, topic: str,
                                                           clients: Any) -> None:
    target.create_topic(topic)
    tp = TP(topic, 0)
    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    consumer.commit({tp: kafka.OffsetAndMetadata(0, '', -1)})
    committed = consumer.committed(tp, metadata=True)
    assert (committed.offset, committed.leader_epoch) == (0, -1)


@pytest.mark.requires('create_topics')
def test_admin_creates_and_describes_topic(target: BrokerTarget, topic: str, clients: Any) -> None:
    admin = clients(kafka.KafkaAdminClient)
    admin.create_topics({topic: {'num_partitions': 3, 'replication_factor': 1}}, wait_for_metadata=True)
    assert topic in admin.list_topics()
    (described,) = admin.describe_topics([topic])
    assert (described['name'], described['error_code']) == (topic, 0)
    partitions = sorted((p['partition_index'], p['error_code'], p['leader_epoch'])
                        for p in described['partitions'])
    assert partitions == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]


@pytest.mark.requires('request_errors')
def test_producer_retries_injected_not_leader_errors_without_duplicates(target: BrokerTarget, topic: str,
                                                                        clients: Any) -> None:
    target.create_topic(topic)
    producer = clients(kafka.KafkaProducer, retry_backoff_ms=10)
    target.push_request_errors(0, [6, 6])  # NOT_LEADER_OR_FOLLOWER twice on the next Produce requests
    offsets = [producer.send(topic, value=b'v%d' % i, partition=0).get(timeout=10).offset for i in range(3)]
    assert offsets == [0, 1, 2]
    consumer = clients(kafka.KafkaConsumer, **CONSUMER_CONFIG)
    consumer.assign([TP(topic, 0)])
    assert [(r.offset, r.value) for r in consume(consumer, 3)] == [(0, b'v0'), (1, b'v1'), (2, b'v2')]
    assert consumer.poll(timeout_ms=300) == {}


# -- leader epochs (KIP-320 fields as stock clients see them) -------------------------------------

def test_new_topic_records_carry_leader_epoch_zero(target: BrokerTarget, topic: str, clients: Any) -> None:
    target.create_topic(topic)
    tp = TP(topic, 0)
    produce_one_batch(clients, tp, [b'a', b'b', b'c'])
    consumer = clients(kafka.KafkaConsumer, **CONSUMER_CONFIG)
    consumer.assign([tp])
    assert [(r.offset, r.leader_epoch) for r in consume(consumer, 3)] == [(0, 0), (1, 0), (2, 0)]


@pytest.mark.target_bug('tansu', 'OffsetFetch returns committed_leader_epoch -1 for a commit made with '
                        'epoch 0')
def test_commit_keeps_the_leader_epoch_of_the_consumed_position(target: BrokerTarget, topic: str,
                                                                clients: Any) -> None:
    target.create_topic(topic)
    tp = TP(topic, 0)
    produce_one_batch(clients, tp, [b'a', b'b', b'c'])
    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    assert len(consume(consumer, 3)) == 3
    consumer.commit()
    committed = consumer.committed(tp, metadata=True)
    assert (committed.offset, committed.leader_epoch) == (3, 0)


@pytest.mark.requires('leader_epoch_bumps')
def test_records_and_commits_follow_a_leader_epoch_bump(target: BrokerTarget, topic: str,
                                                        clients: Any) -> None:
    target.create_topic(topic)
    tp = TP(topic, 0)
    produce_one_batch(clients, tp, [b'a', b'b', b'c'])
    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    assert [r.leader_epoch for r in consume(consumer, 3)] == [0, 0, 0]

    assert target.bump_leader_epoch(tp) == 1
    producer = clients(kafka.KafkaProducer)
    # One at a time: the first send meets the old leader and is retried, and must not overtake the second.
    assert [producer.send(topic, value=v, partition=0).get(timeout=10).offset for v in (b'd', b'e')] == [3, 4]
    assert [(r.offset, r.value, r.leader_epoch) for r in consume(consumer, 2)] == [(3, b'd', 1), (4, b'e', 1)]
    consumer.commit()
    committed = consumer.committed(tp, metadata=True)
    assert (committed.offset, committed.leader_epoch) == (5, 1)


@pytest.mark.requires('leader_epoch_bumps')
@pytest.mark.target_bug('librdkafka-mock', 'OffsetCommit rejects a committed_leader_epoch older than the '
                        "current one with FENCED_LEADER_EPOCH (Kafka's coordinator stores it as given); "
                        'kafka-python retries until the commit times out',
                        raises=kafka.errors.KafkaTimeoutError)
def test_commit_with_an_older_leader_epoch_is_stored(target: BrokerTarget, topic: str, clients: Any) -> None:
    # A consumer that read up to offset 3 under epoch 0 commits that position after the leader changed.
    target.create_topic(topic)
    tp = TP(topic, 0)
    produce_one_batch(clients, tp, [b'a', b'b', b'c'])
    assert target.bump_leader_epoch(tp) == 1
    consumer = clients(kafka.KafkaConsumer, group_id=f'{topic}-g', **CONSUMER_CONFIG)
    consumer.assign([tp])
    consumer.commit({tp: kafka.OffsetAndMetadata(3, '', 0)}, timeout_ms=2000)
    committed = consumer.committed(tp, metadata=True)
    assert (committed.offset, committed.leader_epoch) == (3, 0)


# -- ListOffsets ----------------------------------------------------------------------------------

@pytest.mark.target_bug('tansu', TANSU_LATEST)
def test_list_offsets_earliest_and_latest(target: BrokerTarget, topic: str, clients: Any) -> None:
    target.create_topic(topic)
    tp = TP(topic, 0)
    assert produce_one_batch(clients, tp, [b'a', b'b', b'c']) == [0, 1, 2]
    consumer = clients(kafka.KafkaConsumer, **CONSUMER_CONFIG)
    assert (consumer.beginning_offsets([tp]), consumer.end_offsets([tp])) == ({tp: 0}, {tp: 3})


def _three_timestamped_records(target: BrokerTarget, topic: str, clients: Any) -> tuple[Any, Any, int]:
    target.create_topic(topic)
    tp = TP(topic, 0)
    base = int(time.time() * 1000) - 60_000
    produce_one_batch(clients, tp, [b'a', b'b', b'c'], timestamps=[base, base + 10, base + 20])
    return clients(kafka.KafkaConsumer, **CONSUMER_CONFIG), tp, base


@pytest.mark.target_bug('tansu', TANSU_BY_TIME)
@pytest.mark.target_bug('librdkafka-mock', MOCK_BY_TIME)
def test_offsets_for_times_finds_first_record_at_or_after(target: BrokerTarget, topic: str,
                                                          clients: Any) -> None:
    consumer, tp, base = _three_timestamped_records(target, topic, clients)
    found = consumer.offsets_for_times({tp: base + 5})[tp]
    assert found is not None and (found.offset, found.timestamp) == (1, base + 10)
    found = consumer.offsets_for_times({tp: base - 1000})[tp]
    assert found is not None and (found.offset, found.timestamp) == (0, base)


@pytest.mark.target_bug('tansu', TANSU_BY_TIME)
def test_offsets_for_times_after_last_record_is_none(target: BrokerTarget, topic: str, clients: Any) -> None:
    consumer, tp, base = _three_timestamped_records(target, topic, clients)
    assert consumer.offsets_for_times({tp: base + 21}) == {tp: None}


# -- wire-level conformance (minimal reproductions of protocol bugs) -----------------------------

@pytest.mark.target_bug('tansu', 'answers an unknown ApiVersions version with error 0 in the v4 layout')
@pytest.mark.target_bug('librdkafka-mock', 'answers UNSUPPORTED_VERSION with a flexible-style body '
                        '(a 1-byte array count), which no client can decode as the v0 layout Kafka requires; '
                        "this is why kafka-python's default negotiation (ApiVersions v4 first) cannot "
                        'bootstrap')
def test_api_versions_unsupported_version_is_answered_in_v0_layout(target: BrokerTarget) -> None:
    # Kafka's rule (KIP-511): a broker answers an ApiVersions version it does not know with
    # UNSUPPORTED_VERSION in the v0 layout, listing its own ApiVersions range, so clients can retry.
    payload = bytearray(encode_request(ApiVersionsRequest(version=3, client_software_name='conformance',
                                                          client_software_version='1')))
    struct.pack_into('>h', payload, 2, 127)  # request_api_version in the request header
    frame = send_raw(target.bootstrap_servers.split(',')[0], bytes(payload))
    correlation_id, error_code, count = struct.unpack_from('>ihi', frame)
    assert (correlation_id, error_code) == (1, UNSUPPORTED_VERSION)
    assert len(frame) in (10 + 6 * count, 14 + 6 * count)  # v0 body, optionally followed by throttle_time_ms
    keys = {key: (low, high) for key, low, high in (struct.unpack_from('>hhh', frame, 10 + 6 * i)
                                                    for i in range(count))}
    assert keys[API_VERSIONS_KEY] == target.api_versions[API_VERSIONS_KEY]


def _coordinator(bootstrap: str, group: str) -> str:
    request = FindCoordinatorRequest(version=1, key=group, key_type=0)
    response = kafka_request(bootstrap.split(',')[0], request, FindCoordinatorResponse)
    assert response.error_code == 0
    return f'{response.host}:{response.port}'


def group_handshake(bootstrap: str, group: str, versions: dict[int, int]) -> tuple[int, int, bytes, int, int]:
    """One member joins ``group``, syncs as leader, heartbeats and leaves, at ``versions`` per API key.

    Returns ``(join error, sync error, assignment, heartbeat error, leave error)``.
    """
    address = _coordinator(bootstrap, group)
    protocols = [JoinGroupRequest.JoinGroupRequestProtocol(name='range', metadata=b'subscription')]

    def join(member_id: str) -> Any:
        return kafka_request(address, JoinGroupRequest(
            version=versions[JOIN_GROUP], group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=6000,
            member_id=member_id, group_instance_id=None, protocol_type='consumer', reason=None,
            protocols=protocols), JoinGroupResponse, timeout=10.0)

    joined = join('')
    if joined.error_code == MEMBER_ID_REQUIRED:  # KIP-394: join again with the id the broker handed out
        joined = join(joined.member_id)
    member, generation = joined.member_id, joined.generation_id
    synced = kafka_request(address, SyncGroupRequest(
        version=versions[SYNC_GROUP], group_id=group, generation_id=generation, member_id=member,
        group_instance_id=None, protocol_type='consumer', protocol_name='range',
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b'assigned')]),
        SyncGroupResponse)
    beat = kafka_request(address, HeartbeatRequest(
        version=versions[HEARTBEAT], group_id=group, generation_id=generation, member_id=member,
        group_instance_id=None), HeartbeatResponse)
    left = kafka_request(address, LeaveGroupRequest(
        version=versions[LEAVE_GROUP], group_id=group, member_id=member,
        members=[LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None, reason=None)]),
        LeaveGroupResponse)
    return joined.error_code, synced.error_code, synced.assignment, beat.error_code, left.error_code


_GROUP_REQUESTS = {JOIN_GROUP: JoinGroupRequest, SYNC_GROUP: SyncGroupRequest, HEARTBEAT: HeartbeatRequest,
                   LEAVE_GROUP: LeaveGroupRequest}


@pytest.mark.requires('groups')
def test_group_handshake_at_newest_advertised_versions(target: BrokerTarget, topic: str) -> None:
    versions = {key: min(target.api_versions[key][1], cls.max_version)
                for key, cls in _GROUP_REQUESTS.items()}
    assert group_handshake(target.bootstrap_servers, f'{topic}-g', versions) == (0, 0, b'assigned', 0, 0)


_MOCK_WORKING_GROUP_VERSIONS = {JOIN_GROUP: 5, SYNC_GROUP: 3, HEARTBEAT: 3, LEAVE_GROUP: 2}


def _mock_bug(reason: str, raises: type[Exception]) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, raises=raises, reason=f'librdkafka-mock bug: {reason}')


@pytest.mark.parametrize('api_key, version', [
    pytest.param(JOIN_GROUP, 6, marks=_mock_bug('JoinGroup v6 (first flexible version) is mis-parsed; '
                                                'the mock closes the connection without answering',
                                                ConnectionError)),
    pytest.param(SYNC_GROUP, 4, marks=_mock_bug('SyncGroup v4 is read past its end (PROTOUFLOW) and the '
                                                'connection is closed', ConnectionError)),
    pytest.param(LEAVE_GROUP, 3, marks=_mock_bug('LeaveGroup v3 is answered without the members array',
                                                 struct.error)),
    pytest.param(LEAVE_GROUP, 4, marks=_mock_bug('LeaveGroup v4 is answered in a layout that does not decode',
                                                 IndexError)),
    pytest.param(HEARTBEAT, 4),  # the flexible Heartbeat works: capping it is not needed
], ids=['JoinGroup-v6', 'SyncGroup-v4', 'LeaveGroup-v3', 'LeaveGroup-v4', 'Heartbeat-v4'])
def test_librdkafka_mock_flexible_group_versions(api_key: int, version: int) -> None:
    # An uncapped mock cluster: LibrdkafkaMockTarget caps exactly these APIs because of this test.
    from integration.librdkafka_mock import MockCluster

    try:
        mock = MockCluster(brokers=1)
    except (FileNotFoundError, OSError) as exc:
        pytest.skip(f'librdkafka mock cluster unavailable: {exc}')
    with mock:
        mock.set_initial_rebalance_delay(0)
        versions = {**_MOCK_WORKING_GROUP_VERSIONS, api_key: version}
        assert group_handshake(mock.bootstrap_servers, 'g', versions) == (0, 0, b'assigned', 0, 0)
