"""Waiting for a condition, never for time: the one helper the tests and the conformance suite use.

A test on a loaded machine cannot know how long something takes, only what it waits for: poll a predicate
until it holds, and fail naming what never happened once a generous deadline passed.
"""
from __future__ import annotations

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


__all__ = ['INTERVAL_S', 'wait_until']
