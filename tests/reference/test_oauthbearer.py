"""SASL OAUTHBEARER with Apache Kafka's unsecured JWS validation, with unmodified kafka-python and confluent-kafka
clients; refused tokens answered as Kafka's OAuthBearerSaslServer answers them."""
from __future__ import annotations

import base64
import json
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer, TopicPartition
from kafka.net.sasl.oauth import AbstractTokenProvider
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import NONE, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip_reference.broker.oauthbearer import InvalidToken, unsecured_jws_subject
from kafka_kip_reference.fixtures.wire_client import WireClient

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
