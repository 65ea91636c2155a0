"""``auto_offset_reset``: the accepted policies and KIP-320's table of where each one resets to.

The table of the proposal, one row per policy (the "precisely known truncation offset" column is not a
reset: every policy seeks to the truncation offset, which kafka-python's validation already does)::

    policy    initialization    out of range (too low)   unknown truncation offset
    latest    log end offset    log end offset           log end offset
    earliest  log start offset  log start offset         log start offset
    closest   log start offset  log start offset         by timestamp of the last consumed/committed
                                                         record, else log end offset
    none      raise             raise                    raise

A reset strategy is what kafka-python's ``TopicPartitionState.reset_strategy`` holds and sends in
ListOffsets: ``OffsetResetStrategy.EARLIEST`` (-2), ``LATEST`` (-1), or a timestamp in ms (>= 0).

KIP-1327 adds a second policy, ``auto_offset_reset_new_partitions`` (Java's ``auto.offset.reset.new.partitions``),
for the initialization of a partition the group's topic gained after the group knew it (which partitions those
are: :mod:`kafka_kip.consumer.new_partitions`); every other cell stays ``auto_offset_reset``'s::

    auto_offset_reset_new_partitions   initialization of a new partition
    earliest (kafka_kip's default)     log start offset
    latest                             log end offset
    none                               raise NoOffsetForPartitionError
    None (Java's default)              as auto_offset_reset

The default differs from Java's on purpose: this project promises that no record is lost, and a ``latest`` group
that starts a partition created after it joined at the log end loses every record written to it before the
group noticed it (KIP-1327's motivation). Such a partition holds nothing the group was not already subscribed
to, so starting it at its log start re-reads nothing the application chose to skip. None restores Java's.
"""
from __future__ import annotations

import enum

from kafka.errors import KafkaConfigurationError
from kafka.protocol.consumer import OffsetResetStrategy

from kafka_kip.policies import CLOSEST, STOP, TRUNCATION_SPELLINGS

#: The values ``auto_offset_reset`` accepts. Also accepted: kafka-python's deprecated 'smallest' / 'largest', and
#: the other spellings of the stop truncation policy ('stop', 'fail': see :mod:`kafka_kip.policies`) for 'none'.
POLICIES = ('earliest', 'latest', CLOSEST, 'none')
_ALIASES = {'smallest': 'earliest', 'largest': 'latest',
            **{spelling: 'none' for spelling, policy in TRUNCATION_SPELLINGS.items() if policy == STOP}}


class ResetCause(enum.Enum):
    """Why a partition needs a reset (the columns of the table)."""

    INITIALIZATION = 'initialization'
    OUT_OF_RANGE_TOO_LOW = 'out of range (too low)'
    UNKNOWN_TRUNCATION = 'unknown truncation offset'


_BY_TIMESTAMP = object()
_TABLE = {
    'latest': {ResetCause.INITIALIZATION: OffsetResetStrategy.LATEST,
               ResetCause.OUT_OF_RANGE_TOO_LOW: OffsetResetStrategy.LATEST,
               ResetCause.UNKNOWN_TRUNCATION: OffsetResetStrategy.LATEST},
    'earliest': {ResetCause.INITIALIZATION: OffsetResetStrategy.EARLIEST,
                 ResetCause.OUT_OF_RANGE_TOO_LOW: OffsetResetStrategy.EARLIEST,
                 ResetCause.UNKNOWN_TRUNCATION: OffsetResetStrategy.EARLIEST},
    'closest': {ResetCause.INITIALIZATION: OffsetResetStrategy.EARLIEST,
                ResetCause.OUT_OF_RANGE_TOO_LOW: OffsetResetStrategy.EARLIEST,
                ResetCause.UNKNOWN_TRUNCATION: _BY_TIMESTAMP},
}


#: The values ``auto_offset_reset_new_partitions`` accepts (None: as ``auto_offset_reset``), and its default.
NEW_PARTITIONS_POLICIES = ('earliest', 'latest', 'none')
DEFAULT_NEW_PARTITIONS_POLICY = 'earliest'


def parse_policy(value: object) -> str:
    """The canonical policy name for ``value``; ``KafkaConfigurationError`` naming it and the accepted ones."""
    if isinstance(value, str) and value.lower() in POLICIES + tuple(_ALIASES):
        return _ALIASES.get(value.lower(), value.lower())
    accepted = ', '.join(repr(policy) for policy in POLICIES)
    raise KafkaConfigurationError(f'auto_offset_reset={value!r} is not a reset policy; accepted values: {accepted}')


def parse_new_partitions_policy(value: object) -> str | None:
    """The canonical ``auto_offset_reset_new_partitions`` for ``value`` (None stays None: as
    ``auto_offset_reset``); ``KafkaConfigurationError`` naming it and the accepted ones."""
    if value is None:
        return None
    if isinstance(value, str) and value.lower() in NEW_PARTITIONS_POLICIES:
        return value.lower()
    accepted = ', '.join(repr(policy) for policy in (*NEW_PARTITIONS_POLICIES, None))
    raise KafkaConfigurationError(
        f'auto_offset_reset_new_partitions={value!r} is not a reset policy for new partitions; accepted values: '
        f'{accepted}')


def new_partition_policy(reset_policy: str, new_partitions_policy: str | None) -> str:
    """The policy that initializes a partition created after the group knew its topic (KIP-1327)."""
    return reset_policy if new_partitions_policy is None else new_partitions_policy


def reset_strategy(policy: str, cause: ResetCause, timestamp: int = -1) -> int:
    """The reset strategy for ``policy`` in the situation ``cause``.

    ``timestamp`` is the timestamp (ms) of the most recently consumed or committed record, -1 if unknown;
    only 'closest' after an unknown truncation uses it. Policy 'none' has no strategy (``ValueError``).
    """
    if policy not in _TABLE:
        raise ValueError(f'policy {policy!r} does not reset offsets')
    strategy = _TABLE[policy][cause]
    if strategy is not _BY_TIMESTAMP:
        return strategy
    if timestamp < 0:
        return OffsetResetStrategy.LATEST
    # ListOffsets by timestamp 0 is the first record with a timestamp >= 0: the log start offset.
    return timestamp or OffsetResetStrategy.EARLIEST


def is_timestamp(strategy: int) -> bool:
    """True if ``strategy`` is a reset by timestamp (not EARLIEST / LATEST / NONE)."""
    return strategy > 0
