"""An asyncio event loop whose clock moves only when every task waits for a timer.

Timer tests (session timeouts, rebalance delays) on the real clock depend on how fast a loaded machine runs
them. On :class:`VirtualTimeLoop` ``loop.time()`` starts at 0 and, when nothing is ready to run and no
socket has data, jumps straight to the next timer: ``asyncio.sleep(0.2)`` takes no real time, and a timeout
of 300 ms fires after exactly 300 virtual ms whatever the load. Sockets and thread wake-ups still work; with
no timer pending the loop waits for them in real time.
"""
from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar('T')


class _AdvancingSelector(selectors.DefaultSelector):
    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            return super().select(None)
        self._loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop on a virtual clock (see the module docstring)."""

    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(selector=_AdvancingSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward (the loop does it when it would otherwise wait for a timer)."""
        self._now += seconds


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a fresh :class:`VirtualTimeLoop`."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


__all__ = ['VirtualTimeLoop', 'run_virtual']
