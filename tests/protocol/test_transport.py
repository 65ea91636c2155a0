"""kafka_kip's transports read a socket in large pieces and hand over exactly the bytes sent, in order.

Real sockets (a connected pair), no network: the payload is larger than one read, so it arrives over several
``_sock_recv`` calls; a closed peer ends the connection with kafka-python's error after the last bytes.
"""
from __future__ import annotations

import socket
import threading

import pytest
from kafka.errors import KafkaConnectionError

from kafka_kip.protocol.transport import RECV_BYTES, KipTCPTransport
from kafka_kip_reference.fixtures.conditions import wait_until

PAYLOAD = bytes(range(256)) * (5 * RECV_BYTES // 256 + 17)  # five reads and a bit


@pytest.fixture
def socket_pair():
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()


def _read(transport: KipTCPTransport, expected: int) -> tuple[list[bytes], list[Exception | None]]:
    pieces, errors = [], []

    def more() -> bool:
        data, error = transport._sock_recv()
        if data:
            pieces.append(data)
        errors.append(error)
        return sum(map(len, pieces)) >= expected or error is not None

    wait_until(more, timeout=30, what=f'{expected} bytes read')
    return pieces, errors


def test_a_payload_larger_than_a_read_arrives_whole_in_order_each_read_at_most_recv_bytes(socket_pair):
    ours, theirs = socket_pair
    sender = threading.Thread(target=theirs.sendall, args=(PAYLOAD,))
    sender.start()
    pieces, errors = _read(KipTCPTransport(None, ours), len(PAYLOAD))
    sender.join()
    assert b''.join(pieces) == PAYLOAD
    assert max(map(len, pieces)) <= RECV_BYTES
    assert set(errors) == {None}


def test_nothing_to_read_is_no_bytes_and_no_error(socket_pair):
    ours, _theirs = socket_pair
    assert KipTCPTransport(None, ours)._sock_recv() == (b'', None)


def test_a_closed_peer_ends_the_connection_after_the_bytes_it_sent(socket_pair):
    ours, theirs = socket_pair
    theirs.sendall(b'last words')
    theirs.close()
    pieces, errors = _read(KipTCPTransport(None, ours), len(b'last words') + 1)
    assert b''.join(pieces) == b'last words'
    assert isinstance(errors[-1], KafkaConnectionError)
    assert str(errors[-1]) == 'KafkaConnectionError: socket disconnected'
