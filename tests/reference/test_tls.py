"""TLS listeners: ``ReferenceCluster(tls=True)`` with a test CA; SSL, and SASL_SSL with ``users``.

Round trips with unmodified kafka-python, kafka_kip and confluent-kafka clients (hostnames verified against the
certificate), SCRAM and PLAIN over TLS, and what an attacker tries: plaintext on a TLS port, a client that does
not trust the CA, a handshake never finished. The broker drops each of them and serves the others meanwhile.
"""
from __future__ import annotations

import socket
import ssl

import kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

import kafka_kip
from kafka_kip.protocol.constants import NONE
from kafka_kip.protocol.requests import metadata_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.broker_process import BrokerProcess
from tests.support.consuming import read_to_end
from tests.support.round_trips import confluent_round_trip, python_round_trip

USERS = {'alice': 'alice-secret'}
TP = TopicPartition('t', 0)


@pytest.fixture(scope='module')
def ssl_cluster():
    with ReferenceCluster(brokers=2, tls=True) as cluster:
        cluster.create_topic('t', 1, 2)
        yield cluster


@pytest.fixture(scope='module')
def sasl_ssl_cluster():
    with ReferenceCluster(brokers=1, tls=True, users=USERS) as cluster:
        cluster.create_topic('t', 1, 1)
        yield cluster


def test_the_cluster_says_how_to_connect(reference_cluster_factory, ssl_cluster, sasl_ssl_cluster):
    assert (ssl_cluster.security_protocol, sasl_ssl_cluster.security_protocol) == ('SSL', 'SASL_SSL')
    with open(ssl_cluster.ssl_cafile) as pem:
        assert pem.read().startswith('-----BEGIN CERTIFICATE-----')
    assert ssl_cluster.ssl_cafile != sasl_ssl_cluster.ssl_cafile  # a CA per cluster
    plain = reference_cluster_factory(brokers=1)
    assert (plain.security_protocol, plain.ssl_cafile) == ('PLAINTEXT', None)


@pytest.mark.parametrize('client_module', [pytest.param(kafka, id='kafka-python'),
                                           pytest.param(kafka_kip, id='kafka_kip')])
def test_kafka_python_and_kafka_kip_clients_over_ssl(ssl_cluster, client_module):
    python_round_trip(client_module, ssl_cluster.bootstrap_servers, 't', b'over tls', security_protocol='SSL', ssl_cafile=ssl_cluster.ssl_cafile)


@pytest.mark.parametrize('mechanism', ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'])
def test_kafka_python_over_sasl_ssl(sasl_ssl_cluster, mechanism):
    python_round_trip(kafka, sasl_ssl_cluster.bootstrap_servers, 't', mechanism.encode(), security_protocol='SASL_SSL',
               ssl_cafile=sasl_ssl_cluster.ssl_cafile, sasl_mechanism=mechanism, sasl_plain_username='alice',
               sasl_plain_password=USERS['alice'])


@pytest.mark.parametrize('protocol, mechanism', [('SSL', None), ('SASL_SSL', 'SCRAM-SHA-256'),
                                                 ('SASL_SSL', 'SCRAM-SHA-512'), ('SASL_SSL', 'PLAIN')])
def test_confluent_kafka_over_tls(ssl_cluster, sasl_ssl_cluster, protocol, mechanism):
    confluent_kafka = pytest.importorskip('confluent_kafka')
    cluster = sasl_ssl_cluster if mechanism else ssl_cluster
    config = {'bootstrap.servers': cluster.bootstrap_servers, 'security.protocol': protocol,
              'ssl.ca.location': cluster.ssl_cafile}  # librdkafka verifies the broker's address (https)
    if mechanism:
        config.update({'sasl.mechanism': mechanism, 'sasl.username': 'alice', 'sasl.password': USERS['alice']})
    confluent_round_trip(confluent_kafka, config, 't', b'librdkafka over tls', f'tls-{protocol}-{mechanism}')


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the broker sends until it closes the connection."""
    data = b''
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_plaintext_on_a_tls_port_and_untrusting_clients_are_dropped_others_served(ssl_cluster):
    address = ssl_cluster.brokers()[0]
    trusted = ssl.create_default_context(cafile=ssl_cluster.ssl_cafile)
    with socket.create_connection((address.host, address.port), timeout=15) as plaintext:
        plaintext.sendall(bytes(metadata_request(['t']).encode(version=12))[:12] + b'\0' * 16)  # Kafka, not TLS
        answer = read_until_closed(plaintext)
    assert answer == b'' or answer[0] == 0x15  # at most a TLS alert record, never a Kafka answer; then closed
    with pytest.raises(ssl.SSLCertVerificationError):  # a client that does not trust the test CA
        WireClient(address, ssl_context=ssl.create_default_context())
    with WireClient(address, ssl_context=trusted) as wire:  # served
        assert wire.request(metadata_request(['t'])).topics[0].error_code == NONE
    assert ssl_cluster.internal_errors == []


@pytest.mark.reference_cluster(brokers=1, tls=True, broker_config={'connections.max.idle.ms': 300})
def test_a_handshake_never_finished_is_dropped_after_the_idle_time(reference_cluster):
    address = reference_cluster.brokers()[0]
    with socket.create_connection((address.host, address.port), timeout=30) as silent:
        assert silent.recv(1) == b''  # no ClientHello ever: the broker gives up on the handshake
    with WireClient(address, ssl_context=ssl.create_default_context(cafile=reference_cluster.ssl_cafile)) as wire:
        assert wire.request(metadata_request(None)).brokers[0].node_id == 0
    wait_until(lambda: not reference_cluster._brokers[0]._connections, 'no connection left', 10)


def test_kafka_kip_broker_tls_flag_prints_the_ca_file():
    with BrokerProcess('--tls', '--user', 'alice=alice-secret', lines=2) as broker:
        key, _, cafile = broker.lines[1].partition('=')
        assert key == 'ssl_cafile'
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, security_protocol='SASL_SSL',
                                 ssl_cafile=cafile, sasl_mechanism='SCRAM-SHA-256', sasl_plain_username='alice',
                                 sasl_plain_password='alice-secret')
        assert producer.send('cli-tls', value=b'v', partition=0).get(timeout=15).offset == 0
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, security_protocol='SASL_SSL',
                                 ssl_cafile=cafile, sasl_mechanism='PLAIN', sasl_plain_username='alice',
                                 sasl_plain_password='alice-secret', consumer_timeout_ms=15_000,
                                 auto_offset_reset='earliest')
        consumer.assign([TopicPartition('cli-tls', 0)])
        assert next(iter(consumer)).value == b'v'
        consumer.close()


def test_kafka_kip_reads_fetch_responses_of_many_tls_records_whole(ssl_cluster):
    """kafka_kip's TLS transport reads until the socket would block (a TLS socket may hold decrypted bytes the
    kernel no longer shows): 4 MB of records in fetch responses of MiBs arrive every one, in order."""
    tls = {'security_protocol': 'SSL', 'ssl_cafile': ssl_cluster.ssl_cafile}
    ssl_cluster.create_topic('big', 1, 2)
    values = [bytes([i % 256]) * 10_000 for i in range(400)]
    producer = kafka_kip.KafkaProducer(bootstrap_servers=ssl_cluster.bootstrap_servers, **tls)
    for value in values:
        producer.send('big', value, partition=0)
    producer.flush(timeout=30)
    producer.close()
    consumer = kafka_kip.KafkaConsumer(bootstrap_servers=ssl_cluster.bootstrap_servers, auto_offset_reset='earliest',
                                       max_partition_fetch_bytes=4 << 20, **tls)
    tp = TopicPartition('big', 0)
    consumer.assign([tp])
    try:
        records = read_to_end(consumer, [tp])
    finally:
        consumer.close()
    assert [(r.offset, r.value) for r in records] == list(enumerate(values))
