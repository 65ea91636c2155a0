"""Request-level fault hooks: ``ReferenceCluster.control(api_key, fn)`` answers, delays, drops or passes requests.

A control function sees every decoded request of its API (``api_key`` None: every API) that reaches its
broker (``broker_id`` None: any broker), after authentication and before the request's handler, and returns
what to do with it::

    def fn(request: ControlledRequest) -> Action | None

- ``None`` or :class:`Pass`: not acted on; the next control (or the handler) gets the request.
- :class:`Answer`: send this response instead of the handler's (build it with ``request.response(...)``).
- :class:`Delay`: hold the request (``seconds``, or until ``until`` is set), then pass it on. Requests of
  the same connection wait behind it, as on Kafka.
- :class:`Drop`: close the connection without answering (what a client sees when a broker dies mid-request).

A control acts once unless it was added with ``keep=True``; ``handle.fired`` counts the requests it acted on
and ``handle.remove()`` removes it. Controls run on the cluster's loop thread in the order they were added;
``fn`` may read the request and the cluster's state but must not block (use :class:`Delay`).
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka_kip.protocol.headers import ConsistencyState
from kafka_kip.protocol.messages import RESPONSES

#: How often a :class:`Delay` with ``until`` looks at its event.
_EVENT_POLL_SECONDS = 0.005


@dataclass(frozen=True)
class ControlledRequest:
    """A request as a control function sees it."""

    broker_id: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: Any
    consistency_state: ConsistencyState | None = None
    """The request header's KIP-1243 state (tag 0), None when it carries none."""

    def response(self, **fields: Any) -> Any:
        """A response object of this request's API and version (fields not given take their defaults)."""
        return RESPONSES[self.api_key](version=self.api_version, **fields)


@dataclass(frozen=True)
class Pass:
    """Leave the request to the next control or its handler."""


@dataclass(frozen=True)
class Answer:
    """Answer with ``response`` (of the request's API and version) instead of the handler."""

    response: Any


@dataclass(frozen=True)
class Delay:
    """Hold the request for ``seconds`` or until ``until`` is set (whichever comes first), then pass it on."""

    seconds: float | None = None
    until: threading.Event | None = None

    def __post_init__(self) -> None:
        if self.seconds is None and self.until is None:
            raise ValueError('Delay needs seconds, until, or both')
        if self.seconds is not None and self.seconds < 0:
            raise ValueError(f'Delay seconds must not be negative, got {self.seconds}')

    async def wait(self) -> None:
        if self.until is None:
            await asyncio.sleep(self.seconds)
            return
        deadline = None if self.seconds is None else asyncio.get_running_loop().time() + self.seconds
        while not self.until.is_set():
            if deadline is not None and asyncio.get_running_loop().time() >= deadline:
                return
            await asyncio.sleep(_EVENT_POLL_SECONDS)


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering."""


Action = Pass | Answer | Delay | Drop
ControlFn = Callable[[ControlledRequest], 'Action | None']


class ControlHandle:
    """A registered control: ``fired`` counts the requests it acted on; ``remove()`` takes it out."""

    def __init__(self, registry: Controls, api_key: int | None, fn: ControlFn, broker_id: int | None,
                 keep: bool) -> None:
        self.api_key = api_key
        self.broker_id = broker_id
        self.keep = keep
        self.fired = 0
        self._fn = fn
        self._registry = registry

    @property
    def active(self) -> bool:
        """True until the control is removed (by ``remove()`` or after acting once without ``keep``)."""
        return self in self._registry.handles()

    def remove(self) -> None:
        """Stop controlling requests (idempotent)."""
        self._registry.remove(self)

    def matches(self, broker_id: int, api_key: int) -> bool:
        return self.api_key in (None, api_key) and self.broker_id in (None, broker_id)

    def __call__(self, request: ControlledRequest) -> Action | None:
        return self._fn(request)

    def __repr__(self) -> str:
        return f'ControlHandle(api_key={self.api_key}, broker_id={self.broker_id}, keep={self.keep}, fired={self.fired})'


class ControlOutcome:
    """What the broker does with a controlled request: the ``response`` to send, or ``drop``, or neither
    (handle it normally)."""

    __slots__ = ('response', 'drop')

    def __init__(self, response: Any = None, drop: bool = False) -> None:
        self.response = response
        self.drop = drop


_HANDLE = ControlOutcome()


class Controls:
    """The controls of one cluster (added from any thread, applied on the cluster's loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handles: tuple[ControlHandle, ...] = ()

    def add(self, api_key: int | None, fn: ControlFn, broker_id: int | None, keep: bool) -> ControlHandle:
        if not callable(fn):
            raise TypeError(f'control function must be callable, got {fn!r}')
        handle = ControlHandle(self, api_key, fn, broker_id, keep)
        with self._lock:
            self._handles += (handle,)
        return handle

    def remove(self, handle: ControlHandle) -> None:
        with self._lock:
            self._handles = tuple(h for h in self._handles if h is not handle)

    def handles(self) -> tuple[ControlHandle, ...]:
        return self._handles

    def __bool__(self) -> bool:
        return bool(self._handles)

    async def apply(self, request: ControlledRequest) -> ControlOutcome:
        """Run the matching controls in order; the first Answer or Drop ends the chain."""
        for handle in self._handles:
            if not handle.matches(request.broker_id, request.api_key) or not handle.active:
                continue
            action = handle(request)
            if action is None or isinstance(action, Pass):
                continue
            if not isinstance(action, (Answer, Delay, Drop)):
                raise TypeError(f'control function returned {action!r}; expected Answer, Delay, Drop, Pass or None')
            handle.fired += 1
            if not handle.keep:
                handle.remove()
            if isinstance(action, Answer):
                return ControlOutcome(response=action.response)
            if isinstance(action, Drop):
                return ControlOutcome(drop=True)
            await action.wait()
        return _HANDLE
