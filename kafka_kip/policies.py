"""The words that choose behaviour, one vocabulary for the consumer, the producer, the mirror and Spark.

**Truncation policy**: what a reader does when the log it reads lost records at or below what it read
(KIP-320; the mirror's ``on_truncation``, ``kafka-kip mirror --on-truncation``, Spark's ``onTruncation``):

=========  ======================================================  ==========================================
policy     also spelt                                              meaning
=========  ======================================================  ==========================================
stop       ``fail`` (Spark's word), ``none`` (``auto_offset_reset``)  stop the partition, report what was lost
closest    (the consumer's ``auto_offset_reset='closest'`` too)    continue from the divergence point
=========  ======================================================  ==========================================

Every spelling is accepted everywhere; the consumer keeps Kafka's ``'none'`` as its canonical word for stop.

**Offset modes** (KIP-391): how written records get their offsets. ``broker``: at the records' offsets, the
broker judging them (it advertises ``kip.391``); ``checked``: at the records' offsets on a stock broker, only
when they are the log end offset; ``translated`` (also spelt ``off``): at the broker's offsets, with an offset
map (mirror only); ``auto``: per partition, the first of broker, checked, translated that applies (mirror only).
The producer's ``offset_mode`` takes :data:`PRODUCER_OFFSET_MODES`, the mirror's :data:`OFFSET_MODES`.
"""
from __future__ import annotations

STOP, CLOSEST = 'stop', 'closest'
#: What a partition does when the source truncates below what was read.
TRUNCATION_POLICIES = (STOP, CLOSEST)
#: Every accepted spelling and the policy it names: Spark's ``onTruncation`` says 'fail', the consumer's reset
#: policy 'none'.
TRUNCATION_SPELLINGS = {STOP: STOP, 'fail': STOP, 'none': STOP, CLOSEST: CLOSEST}

AUTO, BROKER, CHECKED, TRANSLATED = 'auto', 'broker', 'checked', 'translated'
OFF = 'off'  # the old spelling of 'translated'
#: The modes the producer's ``offset_mode`` accepts.
PRODUCER_OFFSET_MODES = (BROKER, CHECKED)
#: How target offsets relate to source offsets, per mirrored partition.
PARTITION_MODES = (BROKER, CHECKED, TRANSLATED)
#: What the mirror may be asked for: a partition mode, or ``auto`` (broker > checked > translated, per partition).
OFFSET_MODES = (AUTO, *PARTITION_MODES)


def parse_truncation_policy(value: object, option: str = 'on_truncation') -> str:
    """``value`` as one of :data:`TRUNCATION_POLICIES` (any of :data:`TRUNCATION_SPELLINGS`); ValueError naming
    ``option``, the value and the accepted spellings otherwise."""
    if not isinstance(value, str) or value not in TRUNCATION_SPELLINGS:
        raise ValueError(f'{option} must be one of {tuple(TRUNCATION_SPELLINGS)}, got {value!r}')
    return TRUNCATION_SPELLINGS[value]


def consumer_reset_policy(truncation_policy: str) -> str:
    """The consumer's ``auto_offset_reset`` that applies ``truncation_policy``: 'closest', or 'none' (raise)."""
    return CLOSEST if truncation_policy == CLOSEST else 'none'


def parse_offset_mode(value: object, accepted: tuple[str, ...] = OFFSET_MODES) -> str:
    """``value`` as one of ``accepted`` (``'off'`` is read as ``'translated'``); ValueError naming them."""
    mode = TRANSLATED if value == OFF else value
    if mode not in accepted:
        raise ValueError(f"offset_mode must be one of {', '.join(map(repr, accepted))}, got {value!r}")
    return mode
