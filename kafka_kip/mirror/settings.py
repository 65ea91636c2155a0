"""The copier's settings, shared by its parts (the words of its modes and policies: :mod:`kafka_kip.policies`;
the mirror's settings as the user gives them: :data:`kafka_kip.mirror.config.MIRROR_SETTINGS`)."""
from __future__ import annotations

from dataclasses import dataclass

from kafka_kip.policies import (
    BROKER,
    READ_COMMITTED,
    STOP,
    IsolationLevel,
    parse_offset_mode,
    parse_truncation_policy,
)


@dataclass(frozen=True)
class CopySettings:
    """How a :class:`~kafka_kip.mirror.copy.Copier` copies (its keyword arguments, checked).

    ``max_alignment_records``: checked mode may move an empty target partition up to the source's first
    offset by writing that many placeholder records at most, deleted at once (see docs/KIP-391.md).
    """

    offset_mode: str = BROKER
    on_truncation: str = STOP
    isolation_level: str = READ_COMMITTED
    idempotent: bool = True
    acks: int = -1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 50 * 2**20
    max_partition_fetch_bytes: int = 2**20
    buffer_bytes: int = 8 * 2**20
    max_in_flight: int = 5
    retry_backoff_ms: int = 100
    recovery_timeout_ms: int = 120_000
    max_alignment_records: int = 1_000_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "offset_mode", parse_offset_mode(self.offset_mode))
        object.__setattr__(self, 'on_truncation', parse_truncation_policy(self.on_truncation))
        object.__setattr__(self, 'isolation_level', IsolationLevel.parse(self.isolation_level))
        if not 1 <= self.max_in_flight <= 5:
            raise ValueError('max_in_flight must be 1..5 (idempotent producers allow at most 5)')
        if self.max_alignment_records < 0:
            raise ValueError(f'max_alignment_records must be >= 0, got {self.max_alignment_records}')

    @property
    def backoff(self) -> float:
        """Seconds between retries."""
        return self.retry_backoff_ms / 1000

    @property
    def read_committed(self) -> bool:
        return self.isolation_level is IsolationLevel.READ_COMMITTED
