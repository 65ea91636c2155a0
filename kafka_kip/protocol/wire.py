"""The one blocking Kafka wire client: one TCP (or TLS) connection, send one request object, get its response.

It speaks exactly what it is told (version, fields, raw frames), which is what readiness probes and
protocol-level tests of brokers need and what full clients hide::

    with WireClient(('localhost', 9092)) as wire:
        response = wire.request(MetadataRequest(version=12, topics=None))

A flexible request header can carry a KIP-1243 consistency state (``consistency=``); the state of the last
response header is ``last_consistency`` (None when it carried none). Response headers follow
:func:`~kafka_kip.protocol.headers.flexible_response_header` (ApiVersions' is always v0).
"""
from __future__ import annotations

import select
import socket
import ssl
import struct
from typing import Any

from kafka_kip.protocol import headers
from kafka_kip.protocol.headers import ConsistencyState
from kafka_kip.protocol.messages import REQUESTS, RESPONSES

_SIZE = struct.Struct('>i')
_HEADER = struct.Struct('>hhi')

__all__ = ['WireClient', 'parse_address']


def parse_address(address: Any) -> tuple[str, int]:
    """``(host, port)`` of ``'host:port'``, a ``(host, port)`` pair or anything with ``.host`` and ``.port``."""
    if isinstance(address, str):
        host, sep, port = address.rpartition(':')
        if not sep or not port.isdigit():
            raise ValueError(f'broker address {address!r}: expected host:port')
        return host, int(port)
    if hasattr(address, 'host'):
        return address.host, address.port
    host, port = address
    return host, port


class WireClient:
    """One connection to a broker (``address``: see :func:`parse_address`), over TLS with ``ssl_context`` (the
    broker's certificate checked against its host)."""

    def __init__(self, address: Any, client_id: str = 'wire-client', timeout: float = 10.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        host, port = parse_address(address)
        self._sock = socket.create_connection((host, port), timeout=timeout)
        if ssl_context is not None:
            try:
                self._sock = ssl_context.wrap_socket(self._sock, server_hostname=host)
            except BaseException:
                self._sock.close()
                raise
        self._client_id = client_id.encode()
        self._correlation_id = 0
        #: the KIP-1243 state of the last response header read (None: it carried none)
        self.last_consistency: ConsistencyState | None = None

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def request(self, request: Any, version: int | None = None, consistency: ConsistencyState | None = None,
                response_class: Any = None) -> Any:
        """Send ``request`` (at ``version`` or its own, with ``consistency`` in a flexible header) and return the
        response decoded as ``response_class`` (default: kafka_kip's class of its API)."""
        version = request.version if version is None else version
        self.send(request.API_KEY, version, request.encode(version=version), consistency)
        if not request.expect_response():
            return None
        return self.read_response(request.API_KEY, version, response_class)

    def send(self, api_key: int, version: int, body: bytes, consistency: ConsistencyState | None = None) -> None:
        """Send ``body`` under a request header of ``api_key``/``version`` (any version, even unknown)."""
        request_class = REQUESTS.get(api_key)
        flexible = request_class is not None and request_class.flexible_version_q(version)
        self._correlation_id += 1
        if consistency is not None and not flexible:
            raise ValueError(f'api {api_key} v{version} has no flexible header to carry a consistency state')
        tags = b'' if not flexible else b'\0' if consistency is None else headers.consistency_state_tags(*consistency)
        header = _HEADER.pack(api_key, version, self._correlation_id) + \
            struct.pack('>h', len(self._client_id)) + self._client_id + tags
        self.send_frame(header + body)

    def read_response(self, api_key: int, version: int, response_class: Any = None) -> Any:
        """Read one response frame and decode it as ``response_class`` (default ``RESPONSES[api_key]``) of
        ``version``."""
        data = self.read_frame()
        correlation_id = _SIZE.unpack_from(data)[0]
        if correlation_id != self._correlation_id:
            raise ValueError(f'correlation id {correlation_id}, expected {self._correlation_id}')
        pos = 4
        response_class = RESPONSES[api_key] if response_class is None else response_class
        self.last_consistency = None
        if headers.flexible_response_header(api_key, response_class.flexible_version_q(version)):
            self.last_consistency, pos = headers.read_header_tags(data, pos)  # tagged fields of ResponseHeader v1
        return response_class.decode(data[pos:], version=version)

    def send_frame(self, payload: bytes) -> None:
        """Send ``payload`` with its size prefix."""
        self._sock.sendall(_SIZE.pack(len(payload)) + payload)

    def pending(self) -> bool:
        """True if the broker has sent bytes not read yet (or closed the connection); never blocks."""
        pending = getattr(self._sock, 'pending', None)  # TLS: bytes already decrypted count too
        return bool(pending and pending()) or bool(select.select([self._sock], [], [], 0)[0])

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (no framing)."""
        self._sock.sendall(data)

    def read_frame(self) -> bytes:
        """Read one size-prefixed frame; raises ConnectionError if the broker closed the connection."""
        size = _SIZE.unpack(self._read_exactly(4))[0]
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        wanted = n
        while n:
            chunk = self._sock.recv(n)
            if not chunk:
                raise ConnectionError(f'connection closed by the broker after {wanted - n} of {wanted} bytes')
            chunks.append(chunk)
            n -= len(chunk)
        return b''.join(chunks)
