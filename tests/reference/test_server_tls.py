"""TLS from Kafka's ``server.properties`` keys: ``listeners=SSL://...`` with ``ssl.keystore.*`` (JKS made by the
JDK's keytool, as kafka-python's own suite makes it; PKCS12), and the errors that name a bad key or value."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import kafka
import pytest

from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.cli import run_broker
from kafka_kip_reference.broker.tls import KeystoreCertificates
from tests.reference.broker_process import BrokerProcess
from tests.support.round_trips import python_round_trip

pytestmark = pytest.mark.skipif(shutil.which('keytool') is None, reason="needs the JDK's keytool")
PASSWORD = 'foobar'


def _keystore(directory: Path, store_type: str) -> tuple[Path, Path]:
    """A self-signed keystore of ``store_type`` for localhost / 127.0.0.1 and its certificate's PEM file."""
    store = directory / f'server.{store_type.lower()}'
    subprocess.run(['keytool', '-genkeypair', '-keystore', str(store), '-storetype', store_type, '-alias', 'localhost',
                    '-keyalg', 'RSA', '-validity', '1', '-storepass', PASSWORD, '-keypass', PASSWORD,
                    '-dname', 'CN=localhost', '-ext', 'SAN=dns:localhost,ip:127.0.0.1'], check=True, capture_output=True)
    cafile = directory / f'{store_type.lower()}.pem'
    subprocess.run(['keytool', '-exportcert', '-rfc', '-keystore', str(store), '-alias', 'localhost',
                    '-storepass', PASSWORD, '-file', str(cafile)], check=True, capture_output=True)
    return store, cafile


@pytest.fixture(scope='module')
def jks(tmp_path_factory):
    return _keystore(tmp_path_factory.mktemp('jks'), 'JKS')


def test_a_broker_from_server_properties_with_a_jks_keystore_serves_ssl(jks, tmp_path):
    store, cafile = jks
    properties = tmp_path / 'server.properties'
    properties.write_text(f'listeners=SSL://localhost:0\nssl.keystore.location={store}\n'
                          f'ssl.keystore.password={PASSWORD}\nssl.key.password={PASSWORD}\n'
                          f'ssl.truststore.location={store}\nssl.truststore.password={PASSWORD}\n')
    with BrokerProcess('--config-file', str(properties)) as broker:
        assert broker.address[0] == 'localhost'
        assert python_round_trip(kafka, broker.bootstrap_servers, 't', b'over TLS', security_protocol='SSL',
                                 ssl_cafile=str(cafile)) == 0


def test_a_pkcs12_keystore_serves_ssl_with_the_hostname_verified(tmp_path):
    store, cafile = _keystore(tmp_path, 'PKCS12')
    with ReferenceCluster(brokers=1, tls=KeystoreCertificates(str(store), PASSWORD, 'PKCS12')) as cluster:
        assert (cluster.security_protocol, cluster.ssl_cafile) == ('SSL', None)
        assert python_round_trip(kafka, cluster.bootstrap_servers, 't', b'p12', security_protocol='SSL',
                                 ssl_cafile=str(cafile)) == 0


@pytest.mark.parametrize('config, message', [
    ({'listeners': 'SASL_SSL://localhost:0'},
     "listeners 'SASL_SSL://localhost:0': listener 'SASL_SSL' is not supported; accepted: PLAINTEXT, SSL"),
    ({'listeners': 'SSL://localhost:0,PLAINTEXT://localhost:0'},
     "listeners 'SSL://localhost:0,PLAINTEXT://localhost:0': the reference cluster takes one listener, "
     'PLAINTEXT://HOST:PORT or SSL://HOST:PORT'),
    ({'listeners': 'SSL://localhost:0'}, 'listeners names an SSL listener but ssl.keystore.location is not set'),
    ({'ssl.keystore.location': '/nowhere'}, 'ssl.keystore.location given without listeners=SSL://HOST:PORT'),
    ({'listeners': 'SSL://localhost:0', 'ssl.keystore.location': 'STORE', 'ssl.keystore.type': 'BKS'},
     "ssl.keystore.type 'BKS' is not supported; accepted: JKS, PKCS12, PEM"),
    ({'listeners': 'SSL://localhost:0', 'ssl.keystore.location': 'STORE', 'ssl.keystore.password': PASSWORD,
      'ssl.key.password': 'other'},
     "ssl.key.password differs from ssl.keystore.password for the JKS keystore 'STORE': accepted only as equal; "
     'or give a PKCS12 or PEM keystore'),
])
def test_unsupported_listener_keys_are_refused_naming_them(jks, capsys, config, message):
    config = {key: value.replace('STORE', str(jks[0])) for key, value in config.items()}
    assert run_broker(brokers=1, broker_config=config) == 2
    assert capsys.readouterr().err == f'kafka-kip broker: {message.replace("STORE", str(jks[0]))}\n'


def test_a_wrong_keystore_password_is_refused_naming_the_keystore(jks):
    with pytest.raises(ValueError, match=rf"^cannot read JKS keystore '{jks[0]}' \(keytool: .*password"):
        KeystoreCertificates(str(jks[0]), 'wrong', 'JKS')


def test_a_pem_keystore_with_an_encrypted_key_serves_ssl(tmp_path):
    trustme = pytest.importorskip('trustme')
    from cryptography.hazmat.primitives import serialization
    ca = trustme.CA()
    server = ca.issue_cert('localhost', '127.0.0.1')
    key = serialization.load_pem_private_key(server.private_key_pem.bytes(), password=None)
    keystore = tmp_path / 'server.pem'
    keystore.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.BestAvailableEncryption(PASSWORD.encode()))
                         + b''.join(blob.bytes() for blob in server.cert_chain_pems))
    ca.cert_pem.write_to_path(str(tmp_path / 'ca.pem'))
    with pytest.raises(ValueError, match=r"^cannot use the keystore's key and certificate: "):
        KeystoreCertificates(str(keystore), None, 'PEM', 'wrong')
    with ReferenceCluster(brokers=1, tls=KeystoreCertificates(str(keystore), None, 'PEM', PASSWORD)) as cluster:
        assert python_round_trip(kafka, cluster.bootstrap_servers, 't', b'pem', security_protocol='SSL',
                                 ssl_cafile=str(tmp_path / 'ca.pem')) == 0
