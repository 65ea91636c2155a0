"""The mechanism most overrides share: a kafka-python function run with some module globals rebound.

kafka-python builds its collaborators inline, by module-global name (``Fetcher(...)`` in
``KafkaConsumer.__init__``, ``KafkaConnection(...)`` in ``KafkaConnectionManager.get_connection``), with
no factory argument to pass another class. :func:`rebound` returns kafka-python's own code object, unchanged,
as a new function whose globals resolve just those names to kafka_kip's subclasses: no code is copied and
kafka-python's modules (and every stock client in the process) are left as they are.
"""
from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from typing import Any

from kafka.version import __version__ as KAFKA_PYTHON_VERSION


class KafkaPythonChanged(ImportError):
    """The installed kafka-python no longer has a hook kafka_kip relies on; kafka_kip must be adapted."""


def require_names(function: Callable[..., Any], names: Iterable[str], relies_on: str) -> None:
    """The tripwire: raise :class:`KafkaPythonChanged` unless ``function``'s code uses every name in ``names``.

    ``names`` are globals or attribute names the code must still look up; ``relies_on`` says in a few
    words what kafka_kip relies on (it goes into the message).
    """
    missing = set(names) - set(function.__code__.co_names)
    if missing:
        raise KafkaPythonChanged(
            f'kafka-python {KAFKA_PYTHON_VERSION}: {function.__qualname__} no longer uses {sorted(missing)}, '
            f'but kafka_kip relies on it {relies_on}; kafka_kip must be adapted to this kafka-python version')


def require_behaviour(check: Callable[[], str | None], changed: str) -> None:
    """The behavioural tripwire: raise :class:`KafkaPythonChanged` unless ``check`` passes.

    ``check`` runs a small case through kafka-python's own code and returns what it found wrong, or None;
    whatever it raises counts as found wrong too. ``changed`` says what kafka-python would then no longer do
    (it goes into the message, followed by the problem).
    """
    try:
        problem = check()
    except Exception as exc:  # whatever broke: kafka-python no longer does what kafka_kip relies on
        problem = f'{type(exc).__name__}: {exc}'
    if problem is not None:
        raise KafkaPythonChanged(f'kafka-python {KAFKA_PYTHON_VERSION}: {changed} ({problem}); kafka_kip must be '
                                 'adapted')


def rebound(function: Callable[..., Any], **names: Any) -> Callable[..., Any]:
    """``function``'s own code with each global in ``names`` resolved to the given object instead.

    The globals are a snapshot of ``function``'s module taken now, plus ``names``. Raises
    :class:`KafkaPythonChanged` when the code no longer looks one of the names up, so a silent fallback to
    kafka-python's class cannot happen.
    """
    require_names(function, names, 'to build ' + ', '.join(sorted(names)))
    rebuilt = types.FunctionType(function.__code__, dict(function.__globals__, **names), function.__name__,
                                 function.__defaults__, function.__closure__)
    rebuilt.__kwdefaults__ = function.__kwdefaults__
    rebuilt.__qualname__ = function.__qualname__
    rebuilt.__doc__ = function.__doc__
    return rebuilt


__all__ = ['KAFKA_PYTHON_VERSION', 'KafkaPythonChanged', 'rebound', 'require_behaviour', 'require_names']
