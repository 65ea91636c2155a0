"""The conformance targets by name: :data:`TARGET_NAMES` and :func:`open_target`."""
from __future__ import annotations

from collections.abc import Callable

from integration.apache_kafka import open_apache_kafka
from integration.librdkafka_mock import LibrdkafkaMockTarget
from integration.reference import ReferenceTarget
from integration.tansu import TansuTarget
from integration.targets import BrokerTarget, TargetUnavailable

_OPENERS: dict[str, Callable[[], BrokerTarget]] = {
    'reference': ReferenceTarget,
    'tansu': TansuTarget,
    'librdkafka-mock': LibrdkafkaMockTarget,
    'apache-kafka': open_apache_kafka,
}
TARGET_NAMES: tuple[str, ...] = tuple(_OPENERS)

__all__ = ['TARGET_NAMES', 'TargetUnavailable', 'open_target']


def open_target(name: str) -> BrokerTarget:
    """Start the target called ``name``; raises :class:`TargetUnavailable` when it cannot run here."""
    try:
        opener = _OPENERS[name]
    except KeyError:
        raise ValueError(f'unknown target {name!r}; known: {", ".join(TARGET_NAMES)}') from None
    return opener()
