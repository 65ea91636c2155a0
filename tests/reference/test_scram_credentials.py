"""SCRAM credentials managed at run time: DescribeUserScramCredentials / AlterUserScramCredentials with unmodified
clients (confluent-kafka's and kafka-python's admin calls) against the reference cluster and Apache Kafka 4.4 with the
same results, and the reference cluster's SCRAM authentication using the credentials at once."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaAdminClient
from kafka.admin import ScramMechanism as StockMechanism
from kafka.admin import UserScramCredentialDeletion as StockDeletion
from kafka.admin import UserScramCredentialUpsertion as StockUpsertion
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import NONE, SASL_AUTHENTICATION_FAILED
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient

ADMIN = {'admin': 'admin-secret'}
SHA_256, SHA_512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture(params=['reference', 'apache-kafka'])
def bootstrap(request, reference_cluster_factory) -> dict[str, str]:
    """confluent-kafka's connection settings: a reference cluster with SASL (its admin a SCRAM user), or Apache
    Kafka's shared cluster (PLAINTEXT)."""
    if request.param == 'reference':
        cluster = reference_cluster_factory(3, users=ADMIN)
        return {'bootstrap.servers': cluster.bootstrap_servers, 'security.protocol': 'SASL_PLAINTEXT',
                'sasl.mechanism': 'SCRAM-SHA-512', 'sasl.username': 'admin', 'sasl.password': ADMIN['admin']}
    return {'bootstrap.servers': request.getfixturevalue('apache_kafka').bootstrap_servers}


def altered(admin: AdminClient, *alterations) -> dict[str, str]:
    """``{user: 'OK' or the error's name}``."""
    outcome = {}
    for user, future in admin.alter_user_scram_credentials(list(alterations)).items():
        try:
            future.result(timeout=30)
            outcome[user] = 'OK'
        except KafkaException as exc:
            outcome[user] = exc.args[0].name()
    return outcome


def described(admin: AdminClient, users: list[str]) -> dict[str, object]:
    """``{user: [(mechanism, iterations)] or the error's name}``."""
    outcome: dict[str, object] = {}
    for user, future in admin.describe_user_scram_credentials(users).items():
        try:
            outcome[user] = sorted((ScramMechanism(info.mechanism).name, info.iterations)
                                   for info in future.result(timeout=30).scram_credential_infos)
        except KafkaException as exc:
            outcome[user] = exc.args[0].name()
    return outcome


def test_scram_credentials_as_apache_kafka_manages_them(bootstrap):
    carol, dave, erin = (f'{name}-{uuid.uuid4().hex[:6]}' for name in ('carol', 'dave', 'erin'))
    admin = AdminClient(bootstrap)
    assert altered(admin,
                   UserScramCredentialUpsertion(carol, ScramCredentialInfo(SHA_512, 8192), b'carol-pw'),
                   UserScramCredentialUpsertion(dave, ScramCredentialInfo(SHA_256, 4095), b'dave-pw'),
                   UserScramCredentialUpsertion(erin, ScramCredentialInfo(SHA_256, 16385), b'erin-pw'),
                   UserScramCredentialDeletion(f'nobody-{carol}', SHA_256)) == {
        carol: 'OK', dave: 'UNACCEPTABLE_CREDENTIAL', erin: 'UNACCEPTABLE_CREDENTIAL',
        f'nobody-{carol}': 'RESOURCE_NOT_FOUND'}
    wait_until(lambda: described(admin, [carol]) == {carol: [('SCRAM_SHA_512', 8192)]}, f'{carol} described')
    # a user altered twice in one request: DUPLICATE_RESOURCE, neither alteration applies
    assert altered(admin, UserScramCredentialUpsertion(carol, ScramCredentialInfo(SHA_256, 4096), b'x'),
                   UserScramCredentialUpsertion(carol, ScramCredentialInfo(SHA_512, 4096), b'y')) == {
        carol: 'DUPLICATE_RESOURCE'}
    assert altered(admin, UserScramCredentialUpsertion(carol, ScramCredentialInfo(SHA_256, 4096), b'carol-pw')) == {
        carol: 'OK'}
    wait_until(lambda: described(admin, [carol]) == {carol: [('SCRAM_SHA_256', 4096), ('SCRAM_SHA_512', 8192)]},
               f'{carol} with both mechanisms')
    assert described(admin, [dave]) == {dave: 'RESOURCE_NOT_FOUND'}

    stock = KafkaAdminClient(**_stock_settings(bootstrap))
    try:  # kafka-python's calls: the same answers
        # another broker may answer: Apache Kafka's brokers learn credentials from the metadata log, each in turn
        wait_until(lambda: _stock_described(stock, [carol]) == {carol: [(1, 4096), (2, 8192)]},
                   f'{carol} with both mechanisms, as kafka-python sees it')
        assert stock.alter_user_scram_credentials([StockDeletion(carol, StockMechanism.SCRAM_SHA_512)]) == {carol: None}
        wait_until(lambda: _stock_described(stock, [carol]) == {carol: [(1, 4096)]}, f'{carol} without SHA-512')
        assert _stock_described(stock, [dave]) == {
            dave: f'Attempt to describe a user credential that does not exist: {dave}'}
        stock.alter_user_scram_credentials([StockDeletion(carol, StockMechanism.SCRAM_SHA_256),
                                            StockUpsertion(erin, StockMechanism.SCRAM_SHA_512, 'erin-pw', 4096)])
        wait_until(lambda: described(admin, [carol, erin]) == {carol: 'RESOURCE_NOT_FOUND',
                                                               erin: [('SCRAM_SHA_512', 4096)]}, 'carol gone')
        altered(admin, UserScramCredentialDeletion(erin, SHA_512))
    finally:
        stock.close()


def _stock_settings(settings: dict[str, str]) -> dict[str, str]:
    converted = {'bootstrap_servers': settings['bootstrap.servers']}
    if 'sasl.username' in settings:
        converted.update(security_protocol='SASL_PLAINTEXT', sasl_mechanism='SCRAM-SHA-512',
                         sasl_plain_username=settings['sasl.username'], sasl_plain_password=settings['sasl.password'])
    return converted


def _stock_described(stock: KafkaAdminClient, users: list[str]) -> dict[str, object]:
    """kafka-python's answer: ``{user: [(mechanism type, iterations)] or the error message}``."""
    return {user: described['error'] or sorted((int(info['mechanism']), info['iterations'])
                                               for info in described['credential_infos'])
            for user, described in stock.describe_user_scram_credentials(users).items()}


def authenticates(cluster, user: str, password: str, mechanism: str) -> bool:
    with WireClient(cluster.brokers()[0]) as wire:
        assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism=mechanism)).error_code == NONE
        client = ScramClient(user, password, mechanism)
        first = wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=client.first_message()))
        if first.error_code == SASL_AUTHENTICATION_FAILED:
            return False
        client.process_server_first_message(first.auth_bytes)
        final = wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=client.final_message()))
        if final.error_code == SASL_AUTHENTICATION_FAILED:
            return False
        client.process_server_final_message(final.auth_bytes)  # the broker proves it holds the new credential
        return final.error_code == NONE


def test_the_reference_clusters_scram_authentication_uses_altered_credentials_at_once(reference_cluster_factory):
    cluster = reference_cluster_factory(1, users=ADMIN, broker_config={'connection.failed.authentication.delay.ms': 0})
    admin = AdminClient({'bootstrap.servers': cluster.bootstrap_servers, 'security.protocol': 'SASL_PLAINTEXT',
                         'sasl.mechanism': 'PLAIN', 'sasl.username': 'admin', 'sasl.password': ADMIN['admin']})
    assert not authenticates(cluster, 'carol', 'carol-pw', 'SCRAM-SHA-512')
    assert altered(admin, UserScramCredentialUpsertion('carol', ScramCredentialInfo(SHA_512, 4096), b'carol-pw')) == {
        'carol': 'OK'}
    assert authenticates(cluster, 'carol', 'carol-pw', 'SCRAM-SHA-512')
    assert not authenticates(cluster, 'carol', 'carol-pw', 'SCRAM-SHA-256')  # no credential of that mechanism
    assert altered(admin, UserScramCredentialUpsertion('carol', ScramCredentialInfo(SHA_512, 8192), b'new-pw')) == {
        'carol': 'OK'}
    assert (authenticates(cluster, 'carol', 'carol-pw', 'SCRAM-SHA-512'),
            authenticates(cluster, 'carol', 'new-pw', 'SCRAM-SHA-512')) == (False, True)
    assert altered(admin, UserScramCredentialDeletion('admin', SHA_256), UserScramCredentialDeletion('carol', SHA_512)) \
        == {'admin': 'OK', 'carol': 'OK'}
    assert not authenticates(cluster, 'carol', 'new-pw', 'SCRAM-SHA-512')
    assert not authenticates(cluster, 'admin', ADMIN['admin'], 'SCRAM-SHA-256')
    assert authenticates(cluster, 'admin', ADMIN['admin'], 'SCRAM-SHA-512')
    assert described(admin, ['admin']) == {'admin': [('SCRAM_SHA_512', 4096)]}  # PLAIN: the password still works
