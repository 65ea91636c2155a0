"""TLS for the reference cluster's listeners: a throwaway test CA and a server certificate, made with trustme.

``ReferenceCluster(tls=True)`` makes one :class:`TestCertificates`: a CA that exists only for this cluster, a
certificate for the brokers' host (``127.0.0.1`` and ``localhost``) signed by it, and the CA's PEM file that
clients trust (``cluster.ssl_cafile``). The listeners are then SSL (SASL_SSL with ``users``): clients connect with
``security_protocol='SSL'`` / ``'SASL_SSL'`` and ``ssl_cafile`` (kafka-python), ``ssl.ca.location``
(librdkafka). Hostname verification works: the certificate names the listeners' address.

:class:`KeystoreCertificates` takes the certificate from a Kafka keystore instead (``server.properties``'
``ssl.keystore.*``: :mod:`kafka_kip_reference.broker.listener_config`); clients then trust the CA that signed it.

Needs the ``trustme`` package (``pip install "kafka-python-kip[reference]"``); it is imported only when TLS is asked for.
"""
from __future__ import annotations

import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path


class TlsUnavailable(RuntimeError):
    """TLS was asked for but the package that makes the test certificates is not installed."""


class TestCertificates:
    """A test CA, a server certificate for ``host`` signed by it, and the CA's PEM file (in a temporary directory
    removed when the object is collected, or at exit)."""

    __test__ = False  # not a pytest test class

    def __init__(self, host: str = '127.0.0.1') -> None:
        try:
            import trustme
        except ImportError as exc:
            raise TlsUnavailable('ReferenceCluster(tls=True) needs the trustme package: '
                                 'pip install "kafka-python-kip[reference]" (or pip install trustme)') from exc
        self._ca = trustme.CA(organization_name='kafka-python-kip reference cluster test CA')
        names = list(dict.fromkeys([host, '127.0.0.1', 'localhost']))
        self._server = self._ca.issue_cert(*names)
        self._directory = tempfile.TemporaryDirectory(prefix='kafka-kip-tls-')
        self.cafile = str(Path(self._directory.name) / 'ca.pem')
        self._ca.cert_pem.write_to_path(self.cafile)

    def server_context(self) -> ssl.SSLContext:
        """The brokers' TLS context: TLS 1.2 or newer, no client certificates asked for (as Kafka's default
        ``ssl.client.auth=none``)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._server.configure_cert(context)
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts the test CA (for raw-socket tests)."""
        return ssl.create_default_context(cafile=self.cafile)


#: ``ssl.keystore.type`` values a keystore is read from (Kafka's: JKS, its default; PKCS12; PEM).
KEYSTORE_TYPES = ('JKS', 'PKCS12', 'PEM')


class KeystoreCertificates:
    """The listeners' certificate and key from a Kafka keystore (``ssl.keystore.location`` and friends).

    PKCS12 is read with ``cryptography``; JKS is first converted to PKCS12 by the JDK's ``keytool
    -importkeystore`` (Python reads no JKS); PEM is a file holding the private key and the certificate chain,
    as Kafka's PEM keystore. Clients bring their own CA (``cafile`` is None)."""

    cafile: str | None = None

    def __init__(self, location: str, password: str | None, store_type: str = 'JKS',
                 key_password: str | None = None) -> None:
        store_type = store_type.upper()
        if store_type not in KEYSTORE_TYPES:
            raise ValueError(f'ssl.keystore.type {store_type!r} is not supported; accepted: {", ".join(KEYSTORE_TYPES)}')
        if not Path(location).is_file():
            raise ValueError(f'ssl.keystore.location {location!r} is no file')
        self._directory = tempfile.TemporaryDirectory(prefix='kafka-kip-keystore-')
        if store_type == 'PEM':
            self._chain, self._key_password = location, key_password
            self._check()
            return
        if password is None:
            raise ValueError(f'ssl.keystore.password is needed to read the {store_type} keystore {location!r}')
        pkcs12 = location if store_type == 'PKCS12' else self._jks_to_pkcs12(location, password, key_password)
        self._chain, self._key_password = self._pkcs12_to_pem(pkcs12, password), None
        self._check()

    def _check(self) -> None:
        try:
            self.server_context()
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(f'cannot use the keystore\'s key and certificate: {exc}') from None

    def _jks_to_pkcs12(self, location: str, password: str, key_password: str | None) -> str:
        keytool = shutil.which('keytool')
        if keytool is None:
            raise ValueError(f'ssl.keystore.type JKS ({location!r}) needs the JDK\'s keytool on PATH to read it; '
                             'or give a PKCS12 or PEM keystore')
        if key_password not in (None, password):
            # keytool converts a whole store only when its keys share the store's password.
            raise ValueError(f'ssl.key.password differs from ssl.keystore.password for the JKS keystore {location!r}: '
                             'accepted only as equal; or give a PKCS12 or PEM keystore')
        target = str(Path(self._directory.name) / 'keystore.p12')
        result = subprocess.run([keytool, '-importkeystore', '-noprompt', '-srckeystore', location,
                                 '-srcstoretype', 'JKS', '-srcstorepass', password, '-destkeystore', target,
                                 '-deststoretype', 'PKCS12', '-deststorepass', password],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise ValueError(f'cannot read JKS keystore {location!r} (keytool: '
                             f'{(result.stdout + result.stderr).strip()})')
        return target

    def _pkcs12_to_pem(self, location: str, password: str) -> str:
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12
        try:
            key, certificate, chain = pkcs12.load_key_and_certificates(Path(location).read_bytes(), password.encode())
        except ValueError as exc:
            raise ValueError(f'cannot read PKCS12 keystore {location!r}: {exc}') from None
        if key is None or certificate is None:
            raise ValueError(f'keystore {location!r} holds no private key with its certificate')
        pem = Path(self._directory.name) / 'chain.pem'
        pem.touch(mode=0o600)
        pem.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
                        + b''.join(c.public_bytes(Encoding.PEM) for c in (certificate, *chain)))
        return str(pem)

    def server_context(self) -> ssl.SSLContext:
        """The brokers' TLS context (as :meth:`TestCertificates.server_context`) with the keystore's key."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self._chain, password=self._key_password)
        return context
