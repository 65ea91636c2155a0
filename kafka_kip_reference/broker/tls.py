"""TLS for the reference cluster's listeners: a throwaway test CA and a server certificate, made with trustme.

``ReferenceCluster(tls=True)`` makes one :class:`TestCertificates`: a CA that exists only for this cluster, a
certificate for the brokers' host (``127.0.0.1`` and ``localhost``) signed by it, and the CA's PEM file that
clients trust (``cluster.ssl_cafile``). The listeners are then SSL (SASL_SSL with ``users``): clients connect with
``security_protocol='SSL'`` / ``'SASL_SSL'`` and ``ssl_cafile`` (kafka-python), ``ssl.ca.location``
(librdkafka). Hostname verification works: the certificate names the listeners' address.

Needs the ``trustme`` package (``pip install "kafka-python-kip[reference]"``); it is imported only when TLS is asked for.
"""
from __future__ import annotations

import ssl
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
