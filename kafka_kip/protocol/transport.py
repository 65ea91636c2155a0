"""kafka_kip's socket transports: kafka-python's, reading the socket in large pieces.

kafka-python's transports read a readable socket 4 KiB per ``recv()`` until it would block and join the pieces:
a bulk reader's fetch responses (MiBs each) cost thousands of system calls and one more copy of every byte. These
read up to :data:`RECV_BYTES` per call. A plain socket is read once per wake-up and the piece goes to the parser as
it is, without a join (the selector is level-triggered: bytes left in the socket wake it again at once). A TLS
socket decrypts one record per call and may hold decrypted bytes the kernel no longer shows, so it is read until
it would block, as kafka-python does.
"""
from __future__ import annotations

import logging
import ssl
from typing import Any

import kafka.errors as Errors
from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport

log = logging.getLogger(__name__)

#: Bytes asked of one ``recv()``: a few TCP windows, small enough that a short read does not waste memory.
RECV_BYTES = 256 << 10


class _LargeReads:
    """``_sock_recv`` as kafka-python's transports have it (the bytes received, and the error that ends the
    connection or None), reading :data:`RECV_BYTES` per call."""

    _sock: Any  # (kafka-python's transport sets it)
    #: what a socket raises when nothing more is to be read now
    _WOULD_BLOCK: tuple[type[BaseException], ...] = (BlockingIOError, InterruptedError)
    #: whether one read per wake-up is enough (plain sockets; not TLS, see the module docstring)
    _ONE_READ_PER_WAKEUP = True

    def _sock_recv(self) -> tuple[bytes, Exception | None]:
        pieces = []
        error = None
        while True:
            try:
                data = self._sock.recv(RECV_BYTES)
            except self._WOULD_BLOCK:
                break
            except BaseException as exc:  # as kafka-python: any other failure ends the connection
                log.exception('%s: Error receiving network data closing socket', self)
                error = Errors.KafkaConnectionError(exc)
                break
            if not data:
                log.error('%s: socket disconnected', self)
                error = Errors.KafkaConnectionError('socket disconnected')
                break
            pieces.append(data)
            if self._ONE_READ_PER_WAKEUP:
                break
        return (pieces[0] if len(pieces) == 1 else b''.join(pieces)), error


class KipTCPTransport(_LargeReads, KafkaTCPTransport):
    """kafka-python's plain-socket transport reading in large pieces (see the module docstring)."""


class KipSSLTransport(_LargeReads, KafkaSSLTransport):
    """kafka-python's TLS transport reading in large pieces, until the socket would block."""

    _WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
    _ONE_READ_PER_WAKEUP = False


__all__ = ['RECV_BYTES', 'KipSSLTransport', 'KipTCPTransport']
