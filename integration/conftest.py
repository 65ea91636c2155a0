"""pytest wiring for the conformance matrix.

``target`` is a session-scoped fixture parametrized over :data:`integration.registry.TARGET_NAMES`:
each target starts once, serves every test that uses it and stops when pytest moves on. A target
that cannot run here skips its tests with the reason. The markers ``requires``, ``known_bug`` and
``target_only`` are described in :mod:`integration.markers`.

When a test fails, the target's log (process output, internal errors) is attached to the report.
"""
from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from integration.markers import MARKERS, TARGET_PARAM, known_issue
from integration.registry import TARGET_NAMES, open_target
from integration.targets import BrokerTarget, TargetUnavailable

_LOG_TAIL_CHARS = 20_000


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line('markers', line)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        issue = known_issue(item)
        if issue is not None:
            item.add_marker(pytest.mark.xfail(strict=True, raises=issue.raises, reason=issue.text))


@pytest.fixture(scope='session', params=TARGET_NAMES, name=TARGET_PARAM)
def running_target(request: pytest.FixtureRequest) -> Iterator[BrokerTarget]:
    try:
        target = open_target(request.param)
    except TargetUnavailable as exc:
        pytest.skip(f'{request.param}: {exc}')
    with target:
        yield target


@pytest.fixture
def target(_running_target: BrokerTarget, request: pytest.FixtureRequest) -> Iterator[BrokerTarget]:
    """The broker target under test; a test whose ``requires`` it cannot meet is skipped. Whatever a fault
    hook left behind (a failed test may leave brokers stopped) is undone afterwards."""
    for marker in request.node.iter_markers('requires'):
        missing = [cap for cap in marker.args if cap not in _running_target.capabilities]
        if missing:
            pytest.skip('; '.join(f'{_running_target.name} {_running_target.missing(cap)}' for cap in missing))
    yield _running_target
    _running_target.heal()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses (derived from the test name)."""
    stem = re.sub(r'[^A-Za-z0-9._-]+', '-', request.node.name)[:150]
    return f'{stem}-{uuid.uuid4().hex[:8]}'


@pytest.fixture
def clients(target: BrokerTarget) -> Iterator[Callable[..., Any]]:
    """``make(cls, **config)`` builds a client for the target; every client is closed afterwards."""
    made: list[Any] = []

    def make(cls: type, **config: Any) -> Any:
        client = cls(bootstrap_servers=target.bootstrap_servers, **{**target.client_config, **config})
        made.append(client)
        return client

    yield make
    for client in reversed(made):
        client.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    target = getattr(item, 'funcargs', {}).get('target')
    if report.failed and isinstance(target, BrokerTarget):
        text = target.logs()
        if text:
            report.sections.append((f'{target.name} log (tail)', text[-_LOG_TAIL_CHARS:]))
