"""State machines whose transitions are data: one table ``{state: the states it may go to}`` per machine.

:class:`Transitions` holds the table of one enum's states (every state has a row, even a final one with
none) and :meth:`Transitions.check` refuses a move the table does not allow with :class:`InvalidTransition`: a
bug of the code driving the machine, never a client's error. Used by the mirror's partition copies
(:mod:`kafka_kip.mirror.state`) and by the reference cluster's group and transaction coordinators.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

S = TypeVar('S', bound=enum.Enum)


class InvalidTransition(RuntimeError):
    """``subject`` was asked to move from ``current`` to ``wanted``, which its machine does not allow."""

    def __init__(self, subject: str, current: enum.Enum, wanted: enum.Enum) -> None:
        super().__init__(f'{subject}: no transition from {current.value} to {wanted.value}')
        self.subject, self.current, self.wanted = subject, current, wanted


class Transitions(Generic[S]):
    """The allowed transitions of one enum's states."""

    def __init__(self, table: Mapping[S, Iterable[S]]) -> None:
        self._table = {state: frozenset(targets) for state, targets in table.items()}
        kind = type(next(iter(self._table)))
        missing = [state.name for state in kind if state not in self._table]
        strangers = {target for targets in self._table.values() for target in targets} - set(kind)
        if missing or strangers or any(type(state) is not kind for state in self._table):
            raise ValueError(f'a {kind.__name__} transition table needs a row for every state and only '
                             f'{kind.__name__} members (missing rows: {missing}, others: {sorted(map(str, strangers))})')

    def __getitem__(self, state: S) -> frozenset[S]:
        """The states ``state`` may go to."""
        return self._table[state]

    def allows(self, current: S, wanted: S) -> bool:
        return wanted in self._table[current]

    def check(self, subject: str, current: S, wanted: S) -> S:
        """``wanted`` if ``current`` may go there; InvalidTransition naming ``subject`` otherwise."""
        if wanted not in self._table[current]:
            raise InvalidTransition(subject, current, wanted)
        return wanted
