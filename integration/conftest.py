"""pytest wiring for the conformance matrix.

``target`` is a session-scoped fixture parametrized over :data:`integration.targets.TARGET_NAMES`:
each target starts once, serves every test that uses it and stops when pytest moves on. A target
that cannot run here skips its tests with the reason.

Markers (declared on a test, resolved against the running target):

- ``@pytest.mark.requires('cap', ...)``: skip unless the target has every capability.
- ``@pytest.mark.target_bug('target-name', 'reason', raises=AssertionError)``: on that target the test
  is expected to fail with ``raises`` (``xfail(strict=True)``), so a fixed target turns the run red
  until the marker is removed, and a test that breaks for another reason is not hidden.

When a test fails, the target's log (process output, internal errors) is attached to the report.
"""
from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from integration.targets import TARGET_NAMES, BrokerTarget, TargetUnavailable, open_target

_LOG_TAIL_CHARS = 20_000


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line('markers', 'requires(*capabilities): skip on targets that lack a capability')
    config.addinivalue_line('markers', 'target_bug(target, reason, raises=AssertionError): '
                                       'strict xfail on that target')


@pytest.fixture(scope='session', params=TARGET_NAMES)
def _running_target(request: pytest.FixtureRequest) -> Iterator[BrokerTarget]:
    try:
        target = open_target(request.param)
    except TargetUnavailable as exc:
        pytest.skip(f'{request.param}: {exc}')
    with target:
        yield target


@pytest.fixture
def target(_running_target: BrokerTarget, request: pytest.FixtureRequest) -> BrokerTarget:
    """The broker target under test, with the test's ``requires`` / ``target_bug`` markers applied."""
    for marker in request.node.iter_markers('requires'):
        missing = sorted(set(marker.args) - _running_target.capabilities)
        if missing:
            pytest.skip(f'{_running_target.name} cannot express this: lacks {", ".join(missing)}')
    for marker in request.node.iter_markers('target_bug'):
        name, reason = marker.args
        if name not in TARGET_NAMES:
            raise ValueError(f'target_bug names unknown target {name!r}')
        if name == _running_target.name:
            raises = marker.kwargs.get('raises', AssertionError)
            request.applymarker(pytest.mark.xfail(strict=True, raises=raises, reason=f'{name} bug: {reason}'))
    return _running_target


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses (derived from the test name)."""
    stem = re.sub(r'[^A-Za-z0-9._-]+', '-', request.node.name)[:150]
    return f'{stem}-{uuid.uuid4().hex[:8]}'


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    target = getattr(item, 'funcargs', {}).get('target')
    if report.failed and isinstance(target, BrokerTarget):
        text = target.logs()
        if text:
            report.sections.append((f'{target.name} log (tail)', text[-_LOG_TAIL_CHARS:]))
