"""Bounded work per request: decompression bombs, oversize and repeated fetches, oversize frames, idle connections.

The bombs run against ``kafka-kip broker`` in a child process so that its peak resident memory (VmHWM) can be
read: without the bound, a 1 GiB inflation takes the broker past 1 GiB. Each case asserts the error code, that
the log is unchanged, the broker's memory and that another client is served while the hostile one is at it.
"""
from __future__ import annotations

import socket
import struct
import time

import pytest
import zstandard
from kafka import codec
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import MESSAGE_TOO_LARGE, NONE, SASL_AUTHENTICATION_FAILED
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import fetch_request, list_offsets_request, produce_request
from kafka_kip_reference.broker.batches import build_batch, iter_records
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.hostile_batches import raw_batch, record
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.broker_process import BrokerProcess

MiB = 1 << 20
#: 7-byte records, walked one by one: a bomb of them is walked up to the limit, not refused at its first byte
TINY_RECORD = record(0, b'')
TINY_RECORDS_MIB = TINY_RECORD * (MiB // len(TINY_RECORD))
MANY = 2**31 - 1  # the record count a bomb declares: what it inflates to never reaches it


def create_topic(address, name: str) -> None:
    request_class = REQUESTS[ApiKey.CreateTopics]
    request = request_class(version=5, timeout_ms=10_000, validate_only=False, topics=[request_class.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])])
    with WireClient(address) as wire:
        assert wire.request(request).topics[0].error_code == NONE


def log_end(address, topic: str) -> int:
    with WireClient(address) as wire:
        return wire.request(list_offsets_request(topic, 0, -1)).topics[0].partitions[0].offset


def answer_of(response):
    return response.responses[0].partition_responses[0]


@pytest.fixture(scope='module')
def bounded():
    """A broker that decompresses at most 1 MiB of a batch, taking batches of up to 2 MiB."""
    broker = BrokerProcess(reference_max_uncompressed_batch_bytes=MiB, message_max_bytes=2 * MiB)
    try:
        create_topic(broker.address, 't')
        with WireClient(broker.address) as wire:  # warm up: the memory a produce and a fetch normally take
            for codec_id in range(5):
                assert answer_of(wire.request(produce_request('t', 0, build_batch(
                    [(None, b'x' * 1000)] * 500, compression=codec_id, timestamps=[now_ms()] * 500)))).error_code == 0
            wire.request(fetch_request('t', 0, 0))
        yield broker
    finally:
        broker.close()


def now_ms() -> int:
    return int(time.time() * 1000)


def gzip_bomb(gib: float) -> bytes:
    """Gzip members of 16 MiB of tiny records each, repeated: ~1 KiB per 1 MiB of records."""
    member = codec.gzip_encode(TINY_RECORDS_MIB * 16)
    return member * int(gib * 64)


def zstd_bomb(gib: float) -> bytes:
    frame = zstandard.ZstdCompressor(level=3).compress(TINY_RECORDS_MIB * 16)
    return frame * int(gib * 64)


def bomb_batch(compression: int, payload: bytes) -> bytes:
    return raw_batch([], count=MANY, attributes=compression, payload=payload, base_timestamp=now_ms())


BOMBS = {
    'gzip, 1 GiB in 1 MiB': lambda: bomb_batch(1, gzip_bomb(1)),
    'zstd, 1 GiB in 7 KiB': lambda: bomb_batch(4, zstd_bomb(1)),
    'lz4, 64 MiB in 270 KiB': lambda: bomb_batch(3, codec.lz4_encode(TINY_RECORDS_MIB * 64)),
    'snappy, 20 MiB in 1 MiB': lambda: bomb_batch(2, codec.snappy_encode(TINY_RECORDS_MIB * 20)),
    'snappy, one block declaring 1 GiB': lambda: bomb_batch(2, bytes([0x80, 0x80, 0x80, 0x80, 0x04]) + b'\0' * 64),
}


@pytest.mark.parametrize('name', BOMBS)
def test_a_decompression_bomb_is_refused_within_the_limit(bounded, name):
    batch = BOMBS[name]()
    assert len(batch) < 2 * MiB
    end = log_end(bounded.address, 't')
    baseline = bounded.peak_rss_mib()
    with WireClient(bounded.address) as hostile, WireClient(bounded.address) as other:
        hostile.send(ApiKey.Produce, 9, produce_request('t', 0, batch, acks=1).encode(version=9))
        served = answer_of(other.request(produce_request('t', 0, build_batch([(None, b'meanwhile')]), acks=1)))
        answer = answer_of(hostile.read_response(0, 9))
        again = answer_of(hostile.request(produce_request('t', 0, build_batch([(None, b'after')]), acks=1)))
    assert (answer.error_code, answer.base_offset) == (MESSAGE_TOO_LARGE, -1)
    assert '1048576 bytes' in answer.error_message  # the limit, named
    assert (served.error_code, again.error_code, log_end(bounded.address, 't')) == (NONE, NONE, end + 2)
    assert bounded.peak_rss_mib() - baseline < 16  # MiB; the records inflate to 64 MiB-1 GiB


def test_the_default_limit_refuses_a_gigabyte_bomb_without_holding_it():
    broker = BrokerProcess(message_max_bytes=2 * MiB)  # reference.max.uncompressed.batch.bytes: 64 MiB
    try:
        create_topic(broker.address, 't')
        baseline = broker.peak_rss_mib()
        with WireClient(broker.address) as hostile:
            answer = answer_of(hostile.request(produce_request('t', 0, bomb_batch(1, gzip_bomb(1)), acks=1)))
        assert (answer.error_code, answer.error_message) == (
            MESSAGE_TOO_LARGE, 'the gzip records inflate to more than 67108864 bytes, the most this broker '
                               'decompresses of one batch')
        assert log_end(broker.address, 't') == 0
        assert broker.peak_rss_mib() - baseline < 32  # walked in 1 MiB pieces, never held whole
    finally:
        broker.close()


def test_a_frame_over_socket_request_max_bytes_closes_the_connection_unread():
    broker = BrokerProcess(socket_request_max_bytes=MiB)
    try:
        baseline = broker.peak_rss_mib()
        with socket.create_connection(broker.address, timeout=10) as sock:
            sock.sendall(struct.pack('>i', MiB + 1) + b'\0' * 1000)  # says 1 MiB + 1 follows
            assert sock.recv(4) == b''  # closed without reading the rest or answering
        with socket.create_connection(broker.address, timeout=10) as sock:
            sock.sendall(struct.pack('>i', 2**31 - 1))
            assert sock.recv(4) == b''
        create_topic(broker.address, 'after')  # and the broker serves the next client
        assert broker.peak_rss_mib() - baseline < 8
    finally:
        broker.close()


@pytest.mark.reference_cluster(brokers=1, broker_config={'fetch.max.bytes': 64 * 1024})
def test_fetch_answers_a_repeated_partition_once_within_fetch_max_bytes(reference_cluster):
    reference_cluster.create_topic('t', 1, 1)
    batch = build_batch([(None, b'y' * 1000)] * 16, timestamps=[now_ms()] * 16)  # 16 KiB a batch
    with WireClient(reference_cluster.brokers()[0]) as wire:
        for _ in range(64):
            assert answer_of(wire.request(produce_request('t', 0, batch, acks=1))).error_code == NONE
        request = fetch_request('t', 0, 0, max_bytes=2**31 - 1)
        wanted = request.topics[0].partitions[0]
        request.topics[0].partitions = [wanted] * 100
        request.topics += [request.topics[0]] * 2  # the topic named three times, too
        response = wire.request(request)
    assert [(t.topic, [p.partition_index for p in t.partitions]) for t in response.responses] == [('t', [0])]
    records = response.responses[0].partitions[0].records
    assert len(records) == 64 * 1024 // len(batch) * len(batch)  # within fetch.max.bytes, not 100 x 2 GiB
    assert reference_cluster.internal_errors == []


def test_a_fetch_naming_one_partition_100_times_costs_what_fetching_it_once_costs():
    """The issue's attack: a 3 KB Fetch naming one partition 100 times with the largest max_bytes (answered
    with 382 MiB before). Against Kafka's fetch.max.bytes (55 MiB) and a 4 MiB log."""
    with BrokerProcess() as broker:
        create_topic(broker.address, 't')
        batch = build_batch([(None, b'y' * 1000)] * 256, timestamps=[now_ms()] * 256)
        with WireClient(broker.address) as wire:
            for _ in range(16):
                assert answer_of(wire.request(produce_request('t', 0, batch, acks=1))).error_code == NONE
            once = wire.request(fetch_request('t', 0, 0, max_bytes=2**31 - 1)).responses[0].partitions[0].records
        assert len(once) == 16 * len(batch)  # the whole log, answered once: the peak memory this takes
        baseline = broker.peak_rss_mib()
        hostile_request = fetch_request('t', 0, 0, max_bytes=2**31 - 1)
        hostile_request.topics[0].partitions *= 100
        encoded = hostile_request.encode(version=12)
        assert len(encoded) < 4096
        with WireClient(broker.address) as hostile, WireClient(broker.address) as other:
            hostile.send(ApiKey.Fetch, 12, encoded)
            served = other.request(list_offsets_request('t', 0, -1)).topics[0].partitions[0]
            answer = hostile.read_response(1, 12)
        assert (served.error_code, served.offset) == (NONE, 16 * 256)  # served, and the log is as it was
        assert [(t.topic, [(p.partition_index, p.error_code, len(p.records)) for p in t.partitions])
                for t in answer.responses] == [('t', [(0, NONE, len(once))])]
        assert broker.peak_rss_mib() - baseline < 8  # MiB; answered 100 times, it would be 400 MiB


@pytest.mark.reference_cluster(brokers=1)
def test_a_repeated_partition_is_fetched_at_its_last_position(reference_cluster):
    reference_cluster.create_topic('t', 2, 1)
    with WireClient(reference_cluster.brokers()[0]) as wire:
        for value in (b'a', b'b', b'c'):
            wire.request(produce_request('t', 0, build_batch([(None, value)], timestamps=[now_ms()])))
        request = fetch_request('t', 0, 0)
        partition_class = type(request.topics[0].partitions[0])
        later = partition_class(partition=0, current_leader_epoch=-1, fetch_offset=2, last_fetched_epoch=-1,
                                log_start_offset=-1, partition_max_bytes=MiB)
        other = partition_class(partition=1, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                log_start_offset=-1, partition_max_bytes=MiB)
        request.topics[0].partitions += [other, later]
        response = wire.request(request)
    [topic] = response.responses
    assert [p.partition_index for p in topic.partitions] == [0, 1]  # first places kept
    assert [r.value for r in iter_records(topic.partitions[0].records)] == [b'c']  # the last position wins


@pytest.mark.reference_cluster(brokers=1, broker_config={'connections.max.idle.ms': 300})
def test_an_idle_connection_is_closed_and_a_waiting_fetch_is_not(reference_cluster):
    reference_cluster.create_topic('t', 1, 1)
    address = reference_cluster.brokers()[0]
    with socket.create_connection((address.host, address.port), timeout=30) as idle, \
            socket.create_connection((address.host, address.port), timeout=30) as trickling, \
            WireClient(address) as waiting:
        trickling.sendall(struct.pack('>i', 100) + b'\0\x03')  # a request that never completes
        # a fetch that waits 1.5 s for data, five times the idle limit: in progress, so not idle
        waiting.send(ApiKey.Fetch, 12, fetch_request('t', 0, 0, max_wait_ms=1500, min_bytes=1).encode(version=12))
        assert idle.recv(4) == b''  # blocks until the broker closes it
        assert trickling.recv(4) == b''
        fetched = waiting.read_response(1, 12)
        assert (fetched.error_code, fetched.responses[0].partitions[0].records) == (NONE, b'')
    wait_until(lambda: len(reference_cluster._brokers[0]._connections) == 0, 'the broker dropped every connection', 10)


@pytest.mark.reference_cluster(brokers=1)
def test_limits_are_kafkas_defaults(reference_cluster):
    config = reference_cluster.broker_config
    assert [config.int(name) for name in ('socket.request.max.bytes', 'fetch.max.bytes',
                                          'connections.max.idle.ms', 'connection.failed.authentication.delay.ms',
                                          'reference.max.uncompressed.batch.bytes')] == [
        100 * MiB, 55 * MiB, 600_000, 100, 64 * MiB]


def send_failing_login(wire: WireClient, mechanism: str) -> None:
    """A SASL exchange of ``mechanism`` with a wrong password, up to its failing token, which is sent unread."""
    assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism=mechanism)).error_code == NONE
    if mechanism == 'PLAIN':
        token = b'\0alice\0wrong'
    else:
        client = ScramClient('alice', 'wrong', mechanism)
        client.process_server_first_message(wire.request(REQUESTS[ApiKey.SaslAuthenticate](
            version=2, auth_bytes=client.first_message())).auth_bytes)
        token = client.final_message()
    wire.send(ApiKey.SaslAuthenticate, 2, REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=token).encode(version=2))


@pytest.mark.parametrize('mechanism', ['PLAIN', 'SCRAM-SHA-256'])
def test_a_failed_authentication_is_answered_after_the_delay_while_others_are_served(reference_cluster_factory, mechanism):
    config = {'connection.failed.authentication.delay.ms': 3000}
    cluster = reference_cluster_factory(brokers=1, users={'alice': 'right'}, broker_config=config)
    cluster.create_topic('t', 1, 1)
    address = cluster.brokers()[0]
    with WireClient(address) as guessing, WireClient(address) as other:
        send_failing_login(guessing, mechanism)
        assert other.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN')).error_code == NONE
        assert other.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=b'\0alice\0right')).error_code == NONE
        assert answer_of(other.request(produce_request('t', 0, build_batch([(None, b'served')])))).error_code == 0
        assert not guessing.pending()  # the failure is not answered yet
        failed = guessing.read_response(36, 2)
        assert failed.error_code == SASL_AUTHENTICATION_FAILED
        with pytest.raises(ConnectionError):  # then the connection is closed
            guessing.read_frame()
