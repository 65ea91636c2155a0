"""Waiting for a condition, never for time: the one helper the tests and the conformance suite use.

A test on a loaded machine cannot know how long something takes, only what it waits for: poll a predicate
until it holds, and fail naming what never happened once a generous deadline passed.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar('T')

#: How often a condition is evaluated.
INTERVAL_S = 0.005


def wait_until(condition: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """Evaluate ``condition`` until it returns a true value, and return that value.

    Raises AssertionError naming ``what`` if it is still false after ``timeout`` seconds (a generous
    deadline: it only bounds how long a broken test hangs).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out after {timeout} s waiting for {what}')
        time.sleep(INTERVAL_S)


class Listener:
    """A listening socket nobody answers: ``address`` to hand to a client, ``connections()`` counts the
    connections it got (accepted and closed). Shows that something was refused before connecting."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(('127.0.0.1', 0))
        self._socket.listen(16)
        self._socket.setblocking(False)
        self._accepted = 0

    @property
    def address(self) -> str:
        host, port = self._socket.getsockname()
        return f'{host}:{port}'

    def connections(self) -> int:
        while True:
            try:
                connection, _ = self._socket.accept()
            except BlockingIOError:
                return self._accepted
            connection.close()
            self._accepted += 1

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


__all__ = ['INTERVAL_S', 'Listener', 'wait_until']
