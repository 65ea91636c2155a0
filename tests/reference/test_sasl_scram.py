"""SASL SCRAM-SHA-256 / SCRAM-SHA-512 on the reference cluster, for the same ``users`` as PLAIN.

Round trips with unmodified kafka-python and confluent-kafka clients, and the exchange on the wire with
kafka-python's own SCRAM client (an independent implementation): wrong passwords, unknown users, tampered
proofs, replayed and forged messages are refused with Kafka's error after the failed-authentication delay, the
connection is closed, and another client is served meanwhile.
"""
from __future__ import annotations

import kafka
import pytest
from kafka import KafkaProducer
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import ILLEGAL_SASL_STATE, NONE, SASL_AUTHENTICATION_FAILED
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import metadata_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.broker_process import BrokerProcess
from tests.support.round_trips import confluent_round_trip, python_round_trip

MECHANISMS = ['SCRAM-SHA-256', 'SCRAM-SHA-512']
USERS = {'alice': 'alice-secret', 'bob': 'bob-secret'}
INVALID = 'Authentication failed during authentication due to invalid credentials with SASL mechanism {}'


@pytest.fixture(scope='module')
def cluster():
    with ReferenceCluster(brokers=1, users=USERS,
                          broker_config={'connection.failed.authentication.delay.ms': 0}) as running:
        running.create_topic('t', 1, 1)
        yield running


def handshake(wire: WireClient, mechanism: str) -> None:
    answer = wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism=mechanism))
    assert (answer.error_code, answer.mechanisms) == (NONE, ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'])


def authenticate(wire: WireClient, token: bytes):
    return wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=token))


def refused(wire: WireClient, answer, mechanism: str, message: str | None = None) -> None:
    """``answer`` is SASL_AUTHENTICATION_FAILED (with Kafka's message) and the broker closed the connection."""
    assert (answer.error_code, answer.error_message) == (SASL_AUTHENTICATION_FAILED,
                                                         message or INVALID.format(mechanism))
    with pytest.raises(ConnectionError):
        wire.read_frame()


@pytest.mark.parametrize('mechanism', MECHANISMS)
def test_kafka_pythons_scram_client_authenticates_and_the_server_proves_itself(cluster, mechanism):
    client = ScramClient('alice', USERS['alice'], mechanism)
    with WireClient(cluster.brokers()[0]) as wire:
        handshake(wire, mechanism)
        first = authenticate(wire, client.first_message())
        assert first.error_code == NONE
        client.process_server_first_message(first.auth_bytes)
        final = authenticate(wire, client.final_message())
        assert final.error_code == NONE
        client.process_server_final_message(final.auth_bytes)  # raises unless the server's signature is right
        assert wire.request(metadata_request(['t'])).topics[0].error_code == NONE
        assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism=mechanism)).error_code == ILLEGAL_SASL_STATE


@pytest.mark.parametrize('mechanism', MECHANISMS)
def test_a_wrong_password_or_an_unknown_user_is_refused(cluster, mechanism):
    with WireClient(cluster.brokers()[0]) as wire:
        handshake(wire, mechanism)
        client = ScramClient('alice', 'guess', mechanism)
        client.process_server_first_message(authenticate(wire, client.first_message()).auth_bytes)
        refused(wire, authenticate(wire, client.final_message()), mechanism)
    with WireClient(cluster.brokers()[0]) as wire:
        handshake(wire, mechanism)
        refused(wire, authenticate(wire, ScramClient('mallory', 'x', mechanism).first_message()), mechanism)


@pytest.mark.parametrize('mechanism', MECHANISMS)
def test_a_replayed_or_tampered_final_message_is_refused(cluster, mechanism):
    client = ScramClient('bob', USERS['bob'], mechanism)
    first = client.first_message()
    with WireClient(cluster.brokers()[0]) as wire:
        handshake(wire, mechanism)
        client.process_server_first_message(authenticate(wire, first).auth_bytes)
        final = client.final_message()
        assert authenticate(wire, final).error_code == NONE
    with WireClient(cluster.brokers()[0]) as wire:  # both messages again on a new connection: a new server nonce
        handshake(wire, mechanism)
        assert authenticate(wire, first).error_code == NONE
        refused(wire, authenticate(wire, final), mechanism)
    for tamper in (lambda m: m[:-4] + b'AAA=',                       # another proof
                   lambda m: m.replace(b'c=biws', b'c=eSws'),        # another channel binding (y,,)
                   lambda m: m.replace(b',p=', b',x=1,p=') + b'==',  # an undecodable proof
                   lambda m: m.split(b',p=')[0]):                    # no proof at all
        fresh = ScramClient('bob', USERS['bob'], mechanism)
        with WireClient(cluster.brokers()[0]) as wire:
            handshake(wire, mechanism)
            fresh.process_server_first_message(authenticate(wire, fresh.first_message()).auth_bytes)
            refused(wire, authenticate(wire, tamper(fresh.final_message())), mechanism)


@pytest.mark.parametrize('first, message', [
    (b'p=tls-unique,,n=alice,r=abc', None),                       # channel binding: Kafka supports none
    (b'y,,n=alice,r=abc', None),
    (b'n,a=bob,n=alice,r=abc', 'Authentication failed: Client requested an authorization id that is different '
                                'from username'),
    (b'n,,n=alice,r=abc,tokenauth=true', 'Token Authentication failed: Invalid tokenId : alice'),
    (b'n,,n=al=ice,r=abc', None),                                  # '=' must be escaped as =3D
    (b'\xff\xfe', 'Authentication failed: the SCRAM message is not UTF-8'),
    (b'', None),
])
def test_malformed_client_first_messages_are_refused(cluster, first, message):
    with WireClient(cluster.brokers()[0]) as wire:
        handshake(wire, 'SCRAM-SHA-256')
        refused(wire, authenticate(wire, first), 'SCRAM-SHA-256', message)


def test_scram_over_a_sasl_handshake_v0_takes_bare_tokens(cluster):
    client = ScramClient('alice', USERS['alice'], 'SCRAM-SHA-512')
    with WireClient(cluster.brokers()[0]) as wire:
        assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=0, mechanism='SCRAM-SHA-512')).error_code == NONE
        wire.send_frame(client.first_message())
        client.process_server_first_message(wire.read_frame())
        wire.send_frame(client.final_message())
        client.process_server_final_message(wire.read_frame())
        assert wire.request(metadata_request(['t'])).topics[0].error_code == NONE


@pytest.mark.reference_cluster(brokers=1, users={'a,b=c': 'pw'})
def test_an_escaped_user_name_is_read_as_kafka_reads_it(reference_cluster):
    client = ScramClient('a=2Cb=3Dc', 'pw', 'SCRAM-SHA-256')  # the saslname of the user 'a,b=c'
    with WireClient(reference_cluster.brokers()[0]) as wire:
        handshake(wire, 'SCRAM-SHA-256')
        client.process_server_first_message(authenticate(wire, client.first_message()).auth_bytes)
        final = authenticate(wire, client.final_message())
        assert final.error_code == NONE
        client.process_server_final_message(final.auth_bytes)
    assert reference_cluster.internal_errors == []


@pytest.mark.parametrize('mechanism', MECHANISMS)
def test_unmodified_kafka_python_produces_and_consumes_with_scram(cluster, mechanism):
    python_round_trip(kafka, cluster.bootstrap_servers, 't', mechanism.encode(), security_protocol='SASL_PLAINTEXT',
                      sasl_mechanism=mechanism, sasl_plain_username='bob', sasl_plain_password=USERS['bob'])


@pytest.mark.parametrize('mechanism', MECHANISMS)
def test_unmodified_confluent_kafka_produces_and_consumes_with_scram(cluster, mechanism):
    confluent_kafka = pytest.importorskip('confluent_kafka')
    config = {'bootstrap.servers': cluster.bootstrap_servers, 'security.protocol': 'SASL_PLAINTEXT',
              'sasl.mechanism': mechanism, 'sasl.username': 'alice', 'sasl.password': USERS['alice']}
    confluent_round_trip(confluent_kafka, config, 't', b'from librdkafka', f'scram-{mechanism}')


def test_kafka_kip_broker_takes_the_users_on_its_command_line():
    with BrokerProcess('--user', 'carol=c4rol', '--user', 'dave=d') as broker:
        security = dict(security_protocol='SASL_PLAINTEXT', sasl_mechanism='SCRAM-SHA-512',
                        sasl_plain_username='carol', sasl_plain_password='c4rol')
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **security)
        assert producer.send('cli-topic', value=b'v', partition=0).get(timeout=10).offset == 0
        producer.close()
        with WireClient(broker.address) as wire:
            handshake(wire, 'SCRAM-SHA-256')
            client = ScramClient('dave', 'wrong', 'SCRAM-SHA-256')
            client.process_server_first_message(authenticate(wire, client.first_message()).auth_bytes)
            refused(wire, authenticate(wire, client.final_message()), 'SCRAM-SHA-256')
