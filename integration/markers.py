"""The conformance markers and how they resolve against a test item's target.

- ``@pytest.mark.requires('cap', ...)``: skip unless the target has every capability; the skip reason is the
  target's own account of what it lacks (:meth:`integration.targets.BrokerTarget.missing`).
- ``@pytest.mark.known_bug(target, culprit, reason, raises=AssertionError, kind='bug')``: on ``target`` the
  test is expected to fail with ``raises`` (``xfail(strict=True)``), so a fix turns the run red until the
  marker is removed, and a test that breaks for another reason is not hidden. ``culprit`` is whose bug it
  is (a target name, ``'kafka-python'`` or ``'kafka_kip'``); ``kind`` is ``'bug'`` or ``'limitation'``.
- ``@pytest.mark.target_only(target)``: a test that is not parametrized over targets but reproduces one
  target's behaviour (it shows in that target's column of the report).
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from integration.registry import TARGET_NAMES

#: The session fixture parametrized over the targets (its param is the target name).
TARGET_PARAM = '_running_target'
CULPRITS = TARGET_NAMES + ('kafka-python', 'kafka_kip')
KINDS = ('bug', 'limitation')

MARKERS = (
    'requires(*capabilities): skip on targets that lack a capability',
    'known_bug(target, culprit, reason, raises=AssertionError, kind="bug"): strict xfail on that target',
    'target_only(target): a test of one target that is not parametrized over targets',
)


@dataclass(frozen=True)
class KnownIssue:
    """A known_bug marker that applies to the item's target."""

    culprit: str
    kind: str
    reason: str
    raises: type[BaseException]

    @property
    def text(self) -> str:
        return f'{self.culprit} {self.kind}: {self.reason}'


def item_target(item: pytest.Item) -> str | None:
    """The target an item runs against (its target parameter, or its ``target_only`` marker)."""
    callspec = getattr(item, 'callspec', None)
    if callspec is not None and TARGET_PARAM in callspec.params:
        return callspec.params[TARGET_PARAM]
    marker = item.get_closest_marker('target_only')
    return None if marker is None else marker.args[0]


def item_variant(item: pytest.Item) -> str:
    """The item's parameter id without the target part ('' for an item with no other parameters)."""
    name = item.name
    if '[' not in name:
        return ''
    ids = name[name.index('[') + 1:-1]
    target = item_target(item)
    if target is not None and getattr(item, 'callspec', None) is not None and TARGET_PARAM in item.callspec.params:
        ids = ids.replace(target, '', 1).replace('--', '-').strip('-')
    return ids


def known_issue(item: pytest.Item) -> KnownIssue | None:
    """The known_bug marker of ``item`` for its target, if any; ``ValueError`` for a malformed marker."""
    target = item_target(item)
    for marker in item.iter_markers('known_bug'):
        name, culprit, reason = marker.args
        kind = marker.kwargs.get('kind', 'bug')
        if name not in TARGET_NAMES or culprit not in CULPRITS or kind not in KINDS:
            raise ValueError(f'{item.nodeid}: bad known_bug marker {marker.args} {marker.kwargs}')
        if name == target:
            return KnownIssue(culprit, kind, reason, marker.kwargs.get('raises', AssertionError))
    return None
