"""kafka-python's structs plus the value types of the proposals.

Everything in :mod:`kafka.structs` is re-exported unchanged except ``OffsetAndMetadata``, which is replaced
by a subclass that also carries the commit ``timestamp`` (KIP-320) and the ``partition_epoch`` (KIP-232), and
``OffsetAndTimestamp``, replaced by a subclass that also carries the ``offset_epoch`` (KIP-232).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import kafka.structs as _stock
from kafka.structs import (
    ConsumerGroupMetadata,
    MemberState,
    TopicPartition,
    TopicPartitionReplica,
)

from kafka_kip.bounds import INT64_MAX, require_int, require_partition, require_record_offset
from kafka_kip.protocol.constants import NO_TIMESTAMP, UNKNOWN_EPOCH

__all__ = [
    'ConsumerGroupMetadata', 'MemberState', 'OffsetAndMetadata', 'OffsetAndOffsetEpoch',
    'OffsetAndTimestamp', 'ProducerRecordWithOffset', 'TopicPartition', 'TopicPartitionReplica',
]


class _WithExtras:
    """A kafka-python namedtuple plus keyword-only extra attributes (``_EXTRA_NAMES``, default -1 / None).

    It stays the namedtuple, so code that unpacks or indexes it keeps working. A tuple subclass cannot have
    non-empty slots, so the extras live in the instance dict. Equal to a plain tuple with the same fields;
    to another instance of the class only if the extras match too.
    """

    _EXTRA_NAMES: tuple[str, ...] = ()
    _EXTRA_DEFAULTS: tuple = ()

    def _set_extras(self, *values: object) -> None:
        object.__setattr__(self, '_extras', values)

    def _extra(self, index: int) -> Any:
        return self.__dict__.get('_extras', self._EXTRA_DEFAULTS)[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple):
            return NotImplemented
        if not tuple.__eq__(self, other):
            return False
        return not isinstance(other, type(self)) or all(
            self._extra(i) == other._extra(i) for i in range(len(self._EXTRA_NAMES)))

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        fields = [f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)]
        fields += [f'{name}={self._extra(i)!r}' for i, name in enumerate(self._EXTRA_NAMES)]
        return f"{type(self).__name__}({', '.join(fields)})"

    def __reduce__(self):
        extras = {name: self._extra(i) for i, name in enumerate(self._EXTRA_NAMES)}
        return (_rebuild, (type(self), tuple(self), extras))


def _rebuild(cls: type, fields: tuple, extras: dict[str, Any]) -> Any:
    return cls(*fields, **extras)


class OffsetAndMetadata(_WithExtras, _stock.OffsetAndMetadata):
    """kafka-python's ``OffsetAndMetadata(offset, metadata, leader_epoch)`` plus two keyword-only extras.

    ``timestamp``: timestamp (ms) of the last consumed record below ``offset`` (KIP-320 'closest' reset);
    ``partition_epoch``: the partition epoch the offset belongs to (KIP-232). Both default to -1 (unknown).
    See :class:`_WithExtras` for tuple behaviour and equality.
    """

    _EXTRA_NAMES = ('timestamp', 'partition_epoch')
    _EXTRA_DEFAULTS = (NO_TIMESTAMP, UNKNOWN_EPOCH)

    def __new__(cls, offset: int, metadata: str = '', leader_epoch: int | None = UNKNOWN_EPOCH, *,
                timestamp: int = NO_TIMESTAMP, partition_epoch: int = UNKNOWN_EPOCH) -> OffsetAndMetadata:
        self = super().__new__(cls, offset, metadata, leader_epoch)
        self._set_extras(timestamp, partition_epoch)
        return self

    @property
    def timestamp(self) -> int:
        return self._extra(0)

    @property
    def partition_epoch(self) -> int:
        return self._extra(1)

    @classmethod
    def from_stock(cls, stock: _stock.OffsetAndMetadata, *, timestamp: int = NO_TIMESTAMP,
                   partition_epoch: int = UNKNOWN_EPOCH) -> OffsetAndMetadata:
        """Wrap kafka-python's tuple (or return ``stock`` unchanged when it already is one of ours)."""
        if isinstance(stock, cls) and timestamp == NO_TIMESTAMP and partition_epoch == UNKNOWN_EPOCH:
            return stock
        return cls(stock.offset, stock.metadata, stock.leader_epoch,
                   timestamp=timestamp, partition_epoch=partition_epoch)

    def _replace(self, **changes) -> OffsetAndMetadata:
        fields = {'offset': self.offset, 'metadata': self.metadata, 'leader_epoch': self.leader_epoch,
                  'timestamp': self.timestamp, 'partition_epoch': self.partition_epoch}
        unknown = set(changes) - set(fields)
        if unknown:
            raise ValueError(f'OffsetAndMetadata has no field(s) {sorted(unknown)}; fields are {sorted(fields)}')
        fields.update(changes)
        return type(self)(fields['offset'], fields['metadata'], fields['leader_epoch'],
                          timestamp=fields['timestamp'], partition_epoch=fields['partition_epoch'])


class OffsetAndTimestamp(_WithExtras, _stock.OffsetAndTimestamp):
    """kafka-python's ``OffsetAndTimestamp(offset, timestamp, leader_epoch)`` plus ``offset_epoch`` (KIP-232).

    ``offset_epoch``: the opaque bytes to hand to ``consumer.seek(tp, offset, offset_epoch=...)`` (the leader
    epoch of the record found, the partition's epoch and topic id), or ``None`` when the consumer could not
    tell them. See :class:`_WithExtras` for tuple behaviour and equality.
    """

    _EXTRA_NAMES = ('offset_epoch',)
    _EXTRA_DEFAULTS = (None,)

    def __new__(cls, offset: int, timestamp: int, leader_epoch: int | None = UNKNOWN_EPOCH, *,
                offset_epoch: bytes | None = None) -> OffsetAndTimestamp:
        self = super().__new__(cls, offset, timestamp, leader_epoch)
        self._set_extras(offset_epoch)
        return self

    @property
    def offset_epoch(self) -> bytes | None:
        return self._extra(0)


class OffsetAndOffsetEpoch(NamedTuple):
    """A consumer position plus its opaque, versioned ``offset_epoch`` bytes (KIP-232).

    Store both in an external offset store; hand both back to ``consumer.seek(tp, offset,
    offset_epoch=...)``. The bytes are not meant to be interpreted by applications.
    """

    offset: int
    offset_epoch: bytes


class _ProducerRecordWithOffsetFields(NamedTuple):
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None
    timestamp_ms: int | None
    offset: int


class ProducerRecordWithOffset(_ProducerRecordWithOffsetFields):
    """A record to be written at a given offset (KIP-391), for replication that keeps offsets.

    Checked when the record is built, each failure naming the value and the accepted range: ``partition``
    is required (0..2**31-1), ``offset`` must be in 0..2**63-2 (the log end offset after it is an int64), ``timestamp_ms`` None or 0..2**63-1 (as
    Apache Kafka's ProducerRecord).
    """

    __slots__ = ()

    def __new__(cls, topic: str, partition: int | None = None, key: bytes | None = None,
                value: bytes | None = None, headers: list[tuple[str, bytes]] | None = None,
                timestamp_ms: int | None = None, offset: int | None = None) -> ProducerRecordWithOffset:
        if not isinstance(topic, str) or not topic:
            raise ValueError(f'ProducerRecordWithOffset needs a topic name (a non-empty str), got {topic!r}')
        if partition is None:
            raise ValueError('ProducerRecordWithOffset needs an explicit partition: a record written at an offset '
                             'must name the partition that offset belongs to')
        require_partition(partition, 'ProducerRecordWithOffset partition')
        require_record_offset(offset, 'ProducerRecordWithOffset offset')
        if timestamp_ms is not None:
            require_int(timestamp_ms, 'ProducerRecordWithOffset timestamp_ms', 0, INT64_MAX)
        return super().__new__(cls, topic, partition, key, value, headers, timestamp_ms, offset)
