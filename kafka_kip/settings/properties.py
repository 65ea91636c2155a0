"""The one Java ``.properties`` grammar: the mirror's ``--config`` and ``kafka-kip broker --config-file``.

As ``java.util.Properties.load`` reads a line: blank lines and lines starting with ``#`` or ``!`` are
skipped, a line ending in ``\\`` continues on the next one (whose leading blanks are dropped), and the key
ends at the first ``=``, ``:`` or blank, around which blanks are dropped. Unlike Java, a line with a key and
no separator is refused naming its line (Java would read it as an empty value, which is never what a
mirror or broker setting means), and other backslash escapes are kept as written.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

_LINE = re.compile(r'(?P<key>[^=:\s]+)(?:\s*[=:]\s*|\s+)(?P<value>.*)', re.DOTALL)


def parse_properties(source: str | Iterable[str]) -> dict[str, str]:
    """``key=value`` / ``key: value`` / ``key value`` lines (a text, or its lines) as a dict of strings.

    ValueError naming the line of a line without a separator.
    """
    lines = source.splitlines() if isinstance(source, str) else source
    values: dict[str, str] = {}
    pending, first = '', 0
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not pending:
            first = number
            if not line or line[0] in '#!':
                continue
        line = pending + line
        if (len(line) - len(line.rstrip('\\'))) % 2:  # an odd number of trailing backslashes: continued
            pending = line[:-1]
            continue
        pending = ''
        key, value = _split(line, f'line {first}')
        values[key] = value
    if pending:
        key, value = _split(pending, f'line {first}')
        values[key] = value
    return values


def parse_assignment(text: str) -> tuple[str, str]:
    """One ``key=value`` (``kafka-kip broker --config``); ValueError naming the text otherwise."""
    return _split(text.strip(), '')


def _split(line: str, where: str) -> tuple[str, str]:
    found = _LINE.fullmatch(line)
    if found is None:
        raise ValueError(f'{where}: expected key=value, got {line!r}' if where else f'expected key=value, got {line!r}')
    return found.group('key'), found.group('value')
