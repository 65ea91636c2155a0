"""The words that choose behaviour, one vocabulary for the consumer, the producer, the mirror and Spark.

Each is an enum whose members are their words (``OffsetMode.BROKER == 'broker'``, printed and serialized as
``broker``), with one ``parse()`` that accepts every spelling in use (any case, blanks around) and raises
ValueError naming the setting, the value and the accepted spellings.

**Truncation policy** (:class:`TruncationPolicy`): what a reader does when the log it reads lost records at or
below what it read (KIP-320; the mirror's ``on_truncation``, ``kafka-kip mirror --on-truncation``, Spark's
``onTruncation``):

=========  ======================================================  ==========================================
policy     also spelt                                              meaning
=========  ======================================================  ==========================================
stop       ``fail`` (Spark's word), ``none`` (``auto_offset_reset``)  stop the partition, report what was lost
closest    (the consumer's ``auto_offset_reset='closest'`` too)    continue from the divergence point
=========  ======================================================  ==========================================

Every spelling is accepted everywhere; the consumer keeps Kafka's ``'none'`` as its canonical word for stop.

**Offset modes** (:class:`OffsetMode`, KIP-391): how written records get their offsets. ``broker``: at the
records' offsets, the broker judging them (it advertises ``kip.391``); ``checked``: at the records' offsets on a
stock broker, only when they are the log end offset; ``translated`` (also spelt ``off``): at the broker's
offsets, with an offset map (mirror only); ``auto``: per partition, the first of broker, checked, translated
that applies (mirror only). The producer's ``offset_mode`` takes :data:`PRODUCER_OFFSET_MODES`, the mirror's
:data:`OFFSET_MODES`.

**Isolation level** (:class:`IsolationLevel`): which records a reader sees: ``read_committed`` (not those of
aborted transactions) or ``read_uncommitted``; also spelt as Kafka's enum (``READ_COMMITTED``) or its wire
number (``1``, ``0``: :attr:`IsolationLevel.wire`).
"""
from __future__ import annotations

import enum
from typing import TypeVar

from kafka_kip.protocol import constants

_W = TypeVar('_W', bound='_Word')


class _Word(str, enum.Enum):
    """A member that is its word: equal to, hashed, printed, repr'd and serialized as the string (messages that
    quote a mode with ``!r`` read as they did when modes were strings)."""

    __str__ = str.__str__
    __format__ = str.__format__
    __repr__ = str.__repr__

    @classmethod
    def spellings(cls) -> dict[str, _Word]:
        """Every accepted spelling (lower case) and the member it names, each word followed by its aliases."""
        aliases = _ALIASES.get(cls.__name__, {})
        return {spelling: member for member in cls
                for spelling in (member.value, *(a for a, word in aliases.items() if word == member.value))}

    @classmethod
    def parse(cls: type[_W], value: object, where: str = '', accepted: tuple[_W, ...] | None = None) -> _W:
        """The member ``value`` spells (one of ``accepted``, default all); ValueError naming ``where`` (default:
        the keyword it is given as), the value and what is accepted."""
        where = where or _KEYWORDS[cls.__name__]
        member = cls.spellings().get(str(value).strip().lower()) if isinstance(value, (str, int)) else None
        if member is None or (accepted is not None and member not in accepted):
            raise ValueError(cls._refusal(where, value, accepted))
        return member  # type: ignore[return-value]

    @classmethod
    def _refusal(cls, where: str, value: object, accepted: tuple[_Word, ...] | None) -> str:
        return f'{where} must be one of {", ".join(repr(m.value) for m in accepted or cls)}, got {value!r}'


class TruncationPolicy(_Word):
    """What a partition does when the source truncates below what was read."""

    STOP = 'stop'
    CLOSEST = 'closest'

    @classmethod
    def _refusal(cls, where: str, value: object, accepted: tuple[_Word, ...] | None) -> str:
        return f'{where} must be one of {tuple(cls.spellings())}, got {value!r}'  # its aliases are its words too


class OffsetMode(_Word):
    """How target offsets relate to source offsets (``auto``: chosen per partition)."""

    AUTO = 'auto'
    BROKER = 'broker'
    CHECKED = 'checked'
    TRANSLATED = 'translated'


class IsolationLevel(_Word):
    """Which source records are read: committed ones only, or aborted transactions' records too."""

    READ_COMMITTED = 'read_committed'
    READ_UNCOMMITTED = 'read_uncommitted'

    @property
    def wire(self) -> int:
        """The number Fetch and ListOffsets requests carry."""
        return constants.READ_COMMITTED if self is IsolationLevel.READ_COMMITTED else constants.READ_UNCOMMITTED


#: The keyword each vocabulary is given as (named in errors when the caller names nothing else).
_KEYWORDS = {'TruncationPolicy': 'on_truncation', 'OffsetMode': 'offset_mode', 'IsolationLevel': 'isolation_level'}
#: Other spellings in use, and the word each stands for: Spark's onTruncation says 'fail', the consumer's
#: reset policy 'none'; 'off' is the old name of 'translated'; Fetch and ListOffsets number the isolation levels.
_ALIASES = {
    'TruncationPolicy': {'fail': 'stop', 'none': 'stop'},
    'OffsetMode': {'off': 'translated'},
    'IsolationLevel': {str(constants.READ_COMMITTED): 'read_committed', str(constants.READ_UNCOMMITTED): 'read_uncommitted'},
}

STOP, CLOSEST = TruncationPolicy.STOP, TruncationPolicy.CLOSEST
#: What a partition does when the source truncates below what was read.
TRUNCATION_POLICIES = tuple(TruncationPolicy)
#: Every accepted spelling and the policy it names.
TRUNCATION_SPELLINGS = TruncationPolicy.spellings()

AUTO, BROKER, CHECKED, TRANSLATED = OffsetMode.AUTO, OffsetMode.BROKER, OffsetMode.CHECKED, OffsetMode.TRANSLATED
OFF = 'off'  # the old spelling of 'translated'
#: The modes the producer's ``offset_mode`` accepts.
PRODUCER_OFFSET_MODES = (BROKER, CHECKED)
#: How target offsets relate to source offsets, per mirrored partition.
PARTITION_MODES = (BROKER, CHECKED, TRANSLATED)
#: What the mirror may be asked for: a partition mode, or ``auto`` (broker > checked > translated, per partition).
OFFSET_MODES = (AUTO, *PARTITION_MODES)

READ_COMMITTED, READ_UNCOMMITTED = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED

#: The offset modes as a setting explains them (``kafka-kip mirror --offset-mode``, Spark's ``offsetMode``).
OFFSET_MODE_DOC = ('per partition: `auto` = `broker` (produce with offsets, `kip.391`) where the target supports '
                   'it, else `checked` (the same offsets on a stock target) while the source allows it, else '
                   '`translated` (target offsets mapped exactly, the map kept on the target); `off` is the old '
                   'name of `translated` (docs/KIP-391.md)')
#: The truncation policies as a setting explains them (``kafka-kip mirror --on-truncation``).
ON_TRUNCATION_DOC = ('when the source truncates below what was copied: `stop` the partition (also spelt `fail` or '
                     "`none`, as Spark's `onTruncation` and the consumer's reset policy) or `closest`: continue "
                     'from the truncation point')


def parse_truncation_policy(value: object, option: str = 'on_truncation') -> TruncationPolicy:
    """``value`` as a :class:`TruncationPolicy` (any of :data:`TRUNCATION_SPELLINGS`); ValueError naming
    ``option``, the value and the accepted spellings otherwise."""
    return TruncationPolicy.parse(value, option)


def consumer_reset_policy(truncation_policy: str) -> str:
    """The consumer's ``auto_offset_reset`` that applies ``truncation_policy``: 'closest', or 'none' (raise)."""
    return 'closest' if truncation_policy == CLOSEST else 'none'


def parse_offset_mode(value: object, accepted: tuple[str, ...] = OFFSET_MODES) -> OffsetMode:
    """``value`` as one of ``accepted`` (``'off'`` is read as ``'translated'``); ValueError naming them."""
    return OffsetMode.parse(value, 'offset_mode', tuple(OffsetMode(m) for m in accepted))
