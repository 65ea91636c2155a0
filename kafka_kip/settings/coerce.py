"""The one set of coercers from text: booleans, integers, durations, regexes and choices.

Every error names where the value came from (``where``: ``option includeHeaders``, ``mm.properties:
sync.topic.configs``, ``--shutdown-timeout-ms``), the value as given and what is accepted, and is raised
as ``error`` (a :class:`SettingError` unless a caller has its own subclass, as Spark's ``OptionError``).
"""
from __future__ import annotations

import re

#: Spark's time strings (``Utils.timeStringAsMs``): a number with an optional unit, default ms.
_DURATION = re.compile(r'\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*', re.IGNORECASE)
_MS_PER_UNIT = {'us': 0.001, 'ms': 1, 's': 1000, 'm': 60_000, 'min': 60_000, 'h': 3_600_000, 'd': 86_400_000}


class SettingError(ValueError):
    """A setting's value is malformed, unknown or conflicts with another; the message names the setting."""


def to_bool(raw: object, where: str, error: type[ValueError] = SettingError) -> bool:
    """``true`` / ``false`` (any case, blanks around), or a bool."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ('true', 'false'):
        raise error(f'{where} must be true or false, got {raw!r}')
    return text == 'true'


def to_int(raw: object, where: str, minimum: int | None = None, error: type[ValueError] = SettingError) -> int:
    """An integer (of at least ``minimum``): ``'5000'``, ``' 3 '`` or an int."""
    what = ('an integer' if minimum is None else 'a positive integer' if minimum == 1
            else f'an integer >= {minimum}')
    try:
        value = raw if type(raw) is int else int(str(raw).strip())
    except ValueError:
        raise error(f'{where} must be {what}, got {raw!r}') from None
    if minimum is not None and value < minimum:
        raise error(f'{where} must be {what}, got {raw!r}')
    return value


def to_float(raw: object, where: str, error: type[ValueError] = SettingError) -> float:
    """A number: ``'1.5'``, ``'2'`` or a float/int."""
    try:
        return float(str(raw).strip()) if not isinstance(raw, (int, float)) else float(raw)
    except ValueError:
        raise error(f'{where} must be a number, got {raw!r}') from None


def to_duration_ms(raw: object, where: str, error: type[ValueError] = SettingError) -> int:
    """Milliseconds of a Spark time string: ``500ms``, ``30s``, ``15m``, ``1h`` (a number alone is ms)."""
    found = _DURATION.fullmatch(str(raw))
    if not found:
        raise error(f'{where} must be a duration like 15m, 30s or 500ms (a number alone is ms), got {raw!r}')
    return int(int(found.group(1)) * _MS_PER_UNIT[(found.group(2) or 'ms').lower()])


def to_regex(raw: object, where: str, error: type[ValueError] = SettingError) -> str:
    """A Python regular expression, compiled once to check it; returned as given."""
    text = str(raw)
    try:
        re.compile(text)
    except re.error as exc:
        raise error(f'{where}: invalid regular expression {text!r}: {exc}') from None
    return text
