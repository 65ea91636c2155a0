"""Robustness: random and mutated frames never crash a reference broker or hang the cluster.

Every frame gets either a well-formed answer or a closed connection; afterwards the cluster has no
internal errors and still serves a real produce and consume.
"""
from __future__ import annotations

import itertools
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import (
    fetch_request,
    list_offsets_request,
    metadata_request,
    offset_for_leader_epoch_request,
    produce_request,
)
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.apis import HANDLERS
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.fixtures.wire_client import WireClient

FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope='module')
def cluster():
    with ReferenceCluster(brokers=2) as running:
        running.create_topic('t', 2, 2)
        yield running


def _framed(api_key: int, version: int, body: bytes, correlation_id: int = 7) -> bytes:
    flexible = REQUESTS[api_key].flexible_version_q(version)
    header = struct.pack('>hhih', api_key, version, correlation_id, 4) + b'fuzz' + (b'\0' if flexible else b'')
    return header + body


def _valid_frames() -> list[bytes]:
    batch = build_batch([(b'k', b'v'), (None, b'w')])
    requests = [metadata_request(['t']), metadata_request(None, version=1), produce_request('t', 0, batch, acks=1),
                produce_request('t', 1, batch, use_offset=True), fetch_request('t', 0, 0),
                fetch_request('t', 1, 0, version=15), list_offsets_request('t', 0, -1),
                offset_for_leader_epoch_request('t', 0, 0),
                REQUESTS[ApiKey.ApiVersions](version=3, client_software_name='f', client_software_version='1'),
                REQUESTS[ApiKey.InitProducerId](version=4, transactional_id=None, transaction_timeout_ms=1000, producer_id=-1,
                             producer_epoch=-1)]
    return [_framed(r.API_KEY, r.version, r.encode(version=r.version)) for r in requests]


VALID_FRAMES = _valid_frames()


def exchange(cluster, payload: bytes, *, framed: bool = True) -> bytes | None:
    """Send one frame; the broker's answer frame, or None when it closed the connection or kept quiet.

    A handler exception (a broker bug) fails the example, so hypothesis shrinks to its input.
    """
    try:
        return _exchange(cluster, payload, framed)
    finally:
        assert cluster.internal_errors == []


def _exchange(cluster, payload: bytes, framed: bool) -> bytes | None:
    address = cluster.brokers()[0]
    with socket.create_connection((address.host, address.port), timeout=0.5) as sock:
        sock.sendall(struct.pack('>i', len(payload)) + payload if framed else payload)
        try:
            head = sock.recv(4)
            if len(head) < 4:
                return None
            size = struct.unpack('>i', head)[0]
            data = b''
            while len(data) < size:
                chunk = sock.recv(size - len(data))
                if not chunk:
                    return None
                data += chunk
            return data
        except (TimeoutError, ConnectionError):
            return None  # e.g. a decodable Fetch that waits max_wait_ms, as Kafka would


@FUZZ
@given(st.binary(min_size=0, max_size=300))
def test_random_frames(cluster, payload):
    answer = exchange(cluster, payload)
    if answer is not None:
        assert answer[:4] == payload[4:8]  # any answer carries the request's correlation id


@FUZZ
@given(st.sampled_from(list(HANDLERS)), st.integers(0, 20), st.binary(max_size=200))
def test_random_bodies_for_every_advertised_api(cluster, api_key, version, body):
    exchange(cluster, _framed(api_key, version, body))


@FUZZ
@given(st.sampled_from(VALID_FRAMES), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)),
                                               min_size=1, max_size=6),
       st.integers(0, 10_000))
def test_mutated_valid_frames(cluster, frame, flips, cut):
    mutated = bytearray(frame)
    for position, value in flips:
        mutated[position % len(mutated)] = value
    exchange(cluster, bytes(mutated[:max(cut % (len(mutated) + 1), 8)]))


def test_bad_sizes_close_the_connection(cluster):
    for size in (-1, 3, 200 * 1024 * 1024):
        assert exchange(cluster, struct.pack('>i', size) + b'\0' * 16, framed=False) is None


def test_cluster_still_serves_after_fuzzing(cluster):
    with WireClient(cluster.brokers()[1]) as wire:  # a partial frame left open on another broker
        wire.send_raw(struct.pack('>i', 100) + b'\0\x03')
        cluster.create_topic('after-fuzz', 1, 2)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all')
        for i in range(10):
            producer.send('after-fuzz', value=f'v{i}'.encode())
        producer.flush()
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset='earliest',
                             consumer_timeout_ms=30_000)
    consumer.assign([TopicPartition('after-fuzz', 0)])
    values = [m.value for m in itertools.islice(consumer, 10)]
    consumer.close()
    assert values == [f'v{i}'.encode() for i in range(10)]
    assert cluster.internal_errors == []
