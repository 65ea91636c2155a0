"""SASL OAUTHBEARER with Apache Kafka's unsecured JWS validation, with unmodified kafka-python and confluent-kafka
clients over SASL_PLAINTEXT and SASL_SSL; refused tokens and mechanisms answered as Apache Kafka 4.4 answers them,
side by side with it (its default unsecured validator on a SASL_PLAINTEXT listener)."""
from __future__ import annotations

import base64
import json
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer, TopicPartition
from kafka.net.sasl.oauth import AbstractTokenProvider
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import NONE, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip_reference.broker.oauthbearer import InvalidToken, unsecured_jws_subject
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.support.apache_kafka_clusters import shared_apache_kafka

ENABLED = {'sasl.enabled.mechanisms': 'PLAIN,SCRAM-SHA-256,OAUTHBEARER'}


def part(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip('=')


def unsecured_jws(claims: dict, alg: str = 'none') -> str:
    return f'{part({"alg": alg})}.{part(claims)}.'


class TokenProvider(AbstractTokenProvider):
    def token(self) -> str:
        return unsecured_jws({'sub': 'carol', 'iat': int(time.time()) - 5, 'exp': int(time.time()) + 3600})


def test_unmodified_clients_authenticate_with_unsecured_tokens(reference_cluster_factory):
    cluster = reference_cluster_factory(1, users={'alice': 'pw'}, broker_config=ENABLED)
    cluster.create_topic('t', 1, 1)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, security_protocol='SASL_PLAINTEXT',
                             sasl_mechanism='OAUTHBEARER', sasl_oauth_token_provider=TokenProvider())
    try:
        assert producer.send('t', b'kafka-python').get(timeout=30).offset == 0
    finally:
        producer.close()
    delivered = []
    confluent = Producer({'bootstrap.servers': cluster.bootstrap_servers, 'security.protocol': 'SASL_PLAINTEXT',
                          'sasl.mechanisms': 'OAUTHBEARER', 'enable.sasl.oauthbearer.unsecure.jwt': True,
                          'sasl.oauthbearer.config': 'principal=dave'})
    confluent.produce('t', b'confluent-kafka', on_delivery=lambda error, message: delivered.append(error))
    assert confluent.flush(30) == 0
    assert delivered == [None]
    assert [r.value for r in cluster.records(TopicPartition('t', 0))] == [b'kafka-python', b'confluent-kafka']


def test_unsecured_tokens_over_sasl_ssl(reference_cluster_factory):
    cluster = reference_cluster_factory(1, users={'alice': 'pw'}, tls=True, broker_config=ENABLED)
    cluster.create_topic('t', 1, 1)
    assert cluster.security_protocol == 'SASL_SSL'
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, security_protocol='SASL_SSL',
                             ssl_cafile=cluster.ssl_cafile, sasl_mechanism='OAUTHBEARER',
                             sasl_oauth_token_provider=TokenProvider())
    try:
        assert producer.send('t', b'over TLS').get(timeout=30).offset == 0
    finally:
        producer.close()
    delivered = []
    confluent = Producer({'bootstrap.servers': cluster.bootstrap_servers, 'security.protocol': 'SASL_SSL',
                          'ssl.ca.location': cluster.ssl_cafile, 'sasl.mechanisms': 'OAUTHBEARER',
                          'enable.sasl.oauthbearer.unsecure.jwt': True, 'sasl.oauthbearer.config': 'principal=dave'})
    confluent.produce('t', b'confluent over TLS', on_delivery=lambda error, message: delivered.append(error))
    assert confluent.flush(30) == 0
    assert delivered == [None]
    assert [r.value for r in cluster.records(TopicPartition('t', 0))] == [b'over TLS', b'confluent over TLS']


def authenticate(wire: WireClient, token: bytes):
    assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='OAUTHBEARER')).error_code == NONE
    return wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=token))


def test_a_refused_token_is_answered_as_kafka_then_the_authentication_fails(reference_cluster_factory):
    cluster = reference_cluster_factory(1, users={'alice': 'pw'},
                                        broker_config={**ENABLED, 'connection.failed.authentication.delay.ms': 0})
    expired = unsecured_jws({'sub': 'eve', 'exp': int(time.time()) - 60})
    with WireClient(cluster.brokers()[0]) as wire:
        challenge = authenticate(wire, f'n,,\x01auth=Bearer {expired}\x01\x01'.encode())
        assert (challenge.error_code, bytes(challenge.auth_bytes)) == (NONE, b'{"status":"invalid_token"}')
        failed = wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=b'\x01'))
        assert (failed.error_code, failed.error_message) == (SASL_AUTHENTICATION_FAILED, '{"status":"invalid_token"}')
    default = reference_cluster_factory(1, users={'alice': 'pw'})  # off where sasl.enabled.mechanisms does not name it
    with WireClient(default.brokers()[0]) as wire:
        refused = wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='OAUTHBEARER'))
        assert refused.error_code == UNSUPPORTED_SASL_MECHANISM


@pytest.mark.parametrize(('token', 'reason'), [
    (unsecured_jws({'sub': 'x', 'exp': 4102444800}, alg='HS256'), 'the JWS alg must be "none"'),
    (unsecured_jws({'sub': 'x'}), 'no exp claim'),
    (unsecured_jws({'exp': 4102444800}), 'no sub claim'),
    (unsecured_jws({'sub': 'x', 'exp': 4102444800, 'iat': 4102444000}), 'issued in the future'),
    (unsecured_jws({'sub': 'x', 'exp': 4102444800}) + 'c2ln', 'empty signature'),
])
def test_kafkas_unsecured_validator_rules(token, reason):
    assert unsecured_jws_subject(unsecured_jws({'sub': 'x', 'exp': 4102444800}), int(time.time() * 1000)) == 'x'
    with pytest.raises(InvalidToken, match=reason):
        unsecured_jws_subject(token, int(time.time() * 1000))


# -- side by side with Apache Kafka 4.4 -------------------------------------------------------------------------

@pytest.fixture(params=['reference', 'apache-kafka'])
def oauthbearer_only(request, reference_cluster_factory) -> tuple[str, Callable[[str], Any]]:
    """``(SASL_PLAINTEXT bootstrap servers, create_topic(name))`` of a one-broker cluster whose SASL listener
    offers OAUTHBEARER alone: the reference cluster or Apache Kafka 4.4 (its default unsecured validator)."""
    if request.param == 'reference':
        cluster = reference_cluster_factory(1, users={'alice': 'pw'},
                                            broker_config={'sasl.enabled.mechanisms': 'OAUTHBEARER'})
        return cluster.bootstrap_servers, lambda name: cluster.create_topic(name, 1, 1)
    kafka = shared_apache_kafka(request, 'oauthbearer')
    return kafka.sasl_bootstrap_servers, lambda name: kafka.create_topic(name, 1, 1)


def sasl_exchange(address: tuple[str, int], mechanism: str, token: str | None) -> list:
    """The answers to SaslHandshake(``mechanism``), SaslAuthenticate with ``token`` (if given), and the client's
    ``\\x01`` after a challenge; 'closed' where the broker closed the connection."""
    answers: list = []
    with WireClient(address) as wire:
        try:
            shake = wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism=mechanism))
            answers.append(('handshake', shake.error_code, shake.mechanisms))
            if token is not None:
                first = wire.request(REQUESTS[ApiKey.SaslAuthenticate](
                    version=2, auth_bytes=f'n,,\x01auth=Bearer {token}\x01\x01'.encode()))
                answers.append(('token', first.error_code, first.error_message, bytes(first.auth_bytes)))
                if first.error_code == NONE and first.auth_bytes:
                    second = wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=b'\x01'))
                    answers.append(('\\x01', second.error_code, second.error_message))
            wire.read_frame()
        except TimeoutError:
            answers.append('open')
        except OSError:  # ConnectionError among them
            answers.append('closed')
    return answers


def test_oauthbearer_as_apache_kafka_answers_it(oauthbearer_only):
    bootstrap, create_topic = oauthbearer_only
    host, port = bootstrap.split(',')[0].split(':')
    address = (host, int(port))
    create_topic('oauth')
    producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol='SASL_PLAINTEXT',
                             sasl_mechanism='OAUTHBEARER', sasl_oauth_token_provider=TokenProvider())
    try:
        written = [producer.send('oauth', b'kafka-python').get(timeout=30).offset]
    finally:
        producer.close()
    confluent = Producer({'bootstrap.servers': bootstrap, 'security.protocol': 'SASL_PLAINTEXT',
                          'sasl.mechanisms': 'OAUTHBEARER', 'enable.sasl.oauthbearer.unsecure.jwt': True,
                          'sasl.oauthbearer.config': 'principal=dave'})
    confluent.produce('oauth', b'confluent-kafka', on_delivery=lambda error, message: written.append(
        (error, message.offset())))
    assert confluent.flush(30) == 0
    now = int(time.time())
    tokens = {
        'expired': unsecured_jws({'sub': 'eve', 'exp': now - 60}),
        'alg HS256': unsecured_jws({'sub': 'eve', 'exp': now + 3600}, alg='HS256'),
        'no exp': unsecured_jws({'sub': 'eve'}),
        'no sub': unsecured_jws({'exp': now + 3600}),
        'issued in the future': unsecured_jws({'sub': 'eve', 'exp': now + 7200, 'iat': now + 3600}),
        'signed': unsecured_jws({'sub': 'eve', 'exp': now + 3600}) + 'c2ln',
        'not a JWS': 'not-a-token',
    }
    refused = {reason: sasl_exchange(address, 'OAUTHBEARER', token) for reason, token in tokens.items()}
    other_mechanism = sasl_exchange(address, 'PLAIN', None)
    assert written == [0, (None, 1)]
    # every refused token: the server's challenge, then SASL_AUTHENTICATION_FAILED and the connection closed
    invalid = b'{"status":"invalid_token"}'
    assert refused == {reason: [('handshake', NONE, ['OAUTHBEARER']), ('token', NONE, '', invalid),
                                ('\\x01', SASL_AUTHENTICATION_FAILED, invalid.decode()), 'closed']
                       for reason in tokens}
    assert other_mechanism == [('handshake', UNSUPPORTED_SASL_MECHANISM, ['OAUTHBEARER']), 'closed']


def test_requests_before_authentication_are_bounded_as_apache_kafka_bounds_them(oauthbearer_only):
    """``sasl.server.max.receive.size`` (512 KiB): a larger request before authentication closes the connection
    unread; a token within it is answered."""
    bootstrap, _ = oauthbearer_only
    host, port = bootstrap.split(',')[0].split(':')
    address = (host, int(port))
    seen = []
    with socket.create_connection(address, timeout=30) as sock:
        try:
            sock.sendall(struct.pack('>i', 100 << 20) + b'\0' * 65536)  # says 100 MiB follow
            seen.append(('100 MiB declared', sock.recv(4)))
        except ConnectionResetError:  # closed while the bytes were still coming
            seen.append(('100 MiB declared', b''))
    for size in (500_000, 524_288):  # the token alone; the request adds its header
        answers = sasl_exchange(address, 'OAUTHBEARER', 'x' * size)
        seen.append((size, [a if isinstance(a, str) else a[:2] for a in answers]))
    assert seen == [('100 MiB declared', b''),
                    (500_000, [('handshake', NONE), ('token', NONE), ('\\x01', SASL_AUTHENTICATION_FAILED), 'closed']),
                    (524_288, [('handshake', NONE), 'closed'])]
