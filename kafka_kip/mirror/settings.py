"""The copier's settings and the vocabulary of its modes and policies, shared by its parts."""
from __future__ import annotations

from dataclasses import dataclass

BROKER, CHECKED, OFF = 'broker', 'checked', 'off'
#: How target offsets relate to source offsets (see :mod:`kafka_kip.mirror.copy`).
OFFSET_MODES = (BROKER, CHECKED, OFF)
STOP, CLOSEST = 'stop', 'closest'
#: What a partition does when the source truncates below what was read.
TRUNCATION_POLICIES = (STOP, CLOSEST)


@dataclass(frozen=True)
class CopySettings:
    """How a :class:`~kafka_kip.mirror.copy.Copier` copies (its keyword arguments, checked)."""

    offset_mode: str = BROKER
    on_truncation: str = STOP
    idempotent: bool = True
    acks: int = -1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 50 * 2**20
    max_partition_fetch_bytes: int = 2**20
    buffer_bytes: int = 8 * 2**20
    max_in_flight: int = 5
    retry_backoff_ms: int = 100
    recovery_timeout_ms: int = 120_000

    def __post_init__(self) -> None:
        if self.offset_mode not in OFFSET_MODES:
            raise ValueError(f'offset_mode must be one of {OFFSET_MODES}, got {self.offset_mode!r}')
        if self.on_truncation not in TRUNCATION_POLICIES:
            raise ValueError(f'on_truncation must be one of {TRUNCATION_POLICIES}, got {self.on_truncation!r}')
        if not 1 <= self.max_in_flight <= 5:
            raise ValueError('max_in_flight must be 1..5 (idempotent producers allow at most 5)')

    @property
    def backoff(self) -> float:
        """Seconds between retries."""
        return self.retry_backoff_ms / 1000
