"""The numeric ranges of the Kafka protocol, checked where the public API takes a number.

A value the wire cannot carry (an offset of 2**63, a partition of 2**31) must be refused where the
application passes it, naming it; otherwise it surfaces later on a background thread, where the record's
future may never resolve.
"""
from __future__ import annotations

INT32_MAX = 2**31 - 1
INT64_MIN = -2**63
INT64_MAX = 2**63 - 1
#: The largest offset a record may take: the log end offset after it (one past it) must still be an int64.
MAX_RECORD_OFFSET = INT64_MAX - 1


def require_int(value: object, name: str, low: int, high: int) -> int:
    """``value`` if it is an int (not a bool) in ``low..high``.

    Raises TypeError (not an int) or ValueError (out of range) naming ``name``, the value and the range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f'{name} must be an int in {low}..{high}, got {value!r} ({type(value).__name__})')
    if not low <= value <= high:
        raise ValueError(f'{name} must be in {low}..{high}, got {value}')
    return value


def require_offset(value: object, name: str = 'offset') -> int:
    """An offset: 0..2**63-1."""
    return require_int(value, name, 0, INT64_MAX)


def require_record_offset(value: object, name: str = 'offset') -> int:
    """The offset a record is written at: 0..2**63-2 (the log end offset after it is at most 2**63-1)."""
    return require_int(value, name, 0, MAX_RECORD_OFFSET)


def require_partition(value: object, name: str = 'partition') -> int:
    """A partition number: 0..2**31-1."""
    return require_int(value, name, 0, INT32_MAX)


def require_leader_epoch(value: object, name: str = 'leader_epoch') -> int:
    """A leader epoch: -1 (unknown) or 0..2**31-1."""
    return require_int(value, name, -1, INT32_MAX)


__all__ = ['INT32_MAX', 'INT64_MIN', 'INT64_MAX', 'MAX_RECORD_OFFSET', 'require_int', 'require_offset',
           'require_record_offset', 'require_partition',
           'require_leader_epoch']
