"""kafka-python's structs plus the value types of the proposals.

Everything in :mod:`kafka.structs` is re-exported unchanged except ``OffsetAndMetadata``, which is replaced
by a subclass that also carries the commit ``timestamp`` (KIP-320) and the ``partition_epoch`` (KIP-232), and
``OffsetAndTimestamp``, replaced by a subclass that also carries the ``offset_epoch`` (KIP-232).
"""
from __future__ import annotations

from typing import NamedTuple

import kafka.structs as _stock
from kafka.structs import (
    ConsumerGroupMetadata,
    MemberState,
    TopicPartition,
    TopicPartitionReplica,
)

__all__ = [
    'ConsumerGroupMetadata', 'MemberState', 'OffsetAndMetadata', 'OffsetAndOffsetEpoch',
    'OffsetAndTimestamp', 'ProducerRecordWithOffset', 'TopicPartition', 'TopicPartitionReplica',
]

UNKNOWN = -1


class OffsetAndMetadata(_stock.OffsetAndMetadata):
    """kafka-python's ``OffsetAndMetadata(offset, metadata, leader_epoch)`` plus two keyword-only extras.

    ``timestamp``: timestamp (ms) of the last consumed record below ``offset`` (KIP-320 'closest' reset);
    ``partition_epoch``: the partition epoch the offset belongs to (KIP-232). Both default to -1 (unknown).

    It stays a 3-tuple, so code that unpacks or indexes kafka-python's tuple keeps working; the extras are
    attributes. Equality compares the tuple fields and the extras.
    """

    # No __slots__: a tuple subclass cannot have non-empty slots, so the extras live in the instance dict.

    def __new__(cls, offset: int, metadata: str = '', leader_epoch: int | None = UNKNOWN, *,
                timestamp: int = UNKNOWN, partition_epoch: int = UNKNOWN) -> OffsetAndMetadata:
        self = super().__new__(cls, offset, metadata, leader_epoch)
        object.__setattr__(self, '_extras', (timestamp, partition_epoch))
        return self

    @property
    def timestamp(self) -> int:
        return self.__dict__.get('_extras', (UNKNOWN, UNKNOWN))[0]

    @property
    def partition_epoch(self) -> int:
        return self.__dict__.get('_extras', (UNKNOWN, UNKNOWN))[1]

    @classmethod
    def from_stock(cls, stock: _stock.OffsetAndMetadata, *, timestamp: int = UNKNOWN,
                   partition_epoch: int = UNKNOWN) -> OffsetAndMetadata:
        """Wrap kafka-python's tuple (or return ``stock`` unchanged when it already is one of ours)."""
        if isinstance(stock, cls) and timestamp == UNKNOWN and partition_epoch == UNKNOWN:
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

    def __eq__(self, other: object) -> bool:
        if not tuple.__eq__(self, other):
            return False
        if isinstance(other, OffsetAndMetadata):
            return (self.timestamp, self.partition_epoch) == (other.timestamp, other.partition_epoch)
        return True

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return (f'OffsetAndMetadata(offset={self.offset!r}, metadata={self.metadata!r}, '
                f'leader_epoch={self.leader_epoch!r}, timestamp={self.timestamp!r}, '
                f'partition_epoch={self.partition_epoch!r})')

    def __reduce__(self):
        return (_rebuild_offset_and_metadata, (tuple(self), self.timestamp, self.partition_epoch))


def _rebuild_offset_and_metadata(fields: tuple, timestamp: int, partition_epoch: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(*fields, timestamp=timestamp, partition_epoch=partition_epoch)


class OffsetAndTimestamp(_stock.OffsetAndTimestamp):
    """kafka-python's ``OffsetAndTimestamp(offset, timestamp, leader_epoch)`` plus ``offset_epoch`` (KIP-232).

    ``offset_epoch``: the opaque bytes to hand to ``consumer.seek(tp, offset, offset_epoch=...)`` (the leader
    epoch of the record found, the partition's epoch and topic id), or ``None`` when the consumer could not
    tell them. It stays kafka-python's 3-tuple; the extra is an attribute, compared by ``==``.
    """

    def __new__(cls, offset: int, timestamp: int, leader_epoch: int | None = UNKNOWN, *,
                offset_epoch: bytes | None = None) -> OffsetAndTimestamp:
        self = super().__new__(cls, offset, timestamp, leader_epoch)
        object.__setattr__(self, '_offset_epoch', offset_epoch)
        return self

    @property
    def offset_epoch(self) -> bytes | None:
        return self.__dict__.get('_offset_epoch')

    def __eq__(self, other: object) -> bool:
        if not tuple.__eq__(self, other):
            return False
        return not isinstance(other, OffsetAndTimestamp) or self.offset_epoch == other.offset_epoch

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return (f'OffsetAndTimestamp(offset={self.offset!r}, timestamp={self.timestamp!r}, '
                f'leader_epoch={self.leader_epoch!r}, offset_epoch={self.offset_epoch!r})')

    def __reduce__(self):
        return (_rebuild_offset_and_timestamp, (tuple(self), self.offset_epoch))


def _rebuild_offset_and_timestamp(fields: tuple, offset_epoch: bytes | None) -> OffsetAndTimestamp:
    return OffsetAndTimestamp(*fields, offset_epoch=offset_epoch)


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

    ``partition`` is required and ``offset`` must be >= 0; both are checked when the record is built.
    """

    __slots__ = ()

    def __new__(cls, topic: str, partition: int | None = None, key: bytes | None = None,
                value: bytes | None = None, headers: list[tuple[str, bytes]] | None = None,
                timestamp_ms: int | None = None, offset: int | None = None) -> ProducerRecordWithOffset:
        if not isinstance(topic, str) or not topic:
            raise ValueError(f'ProducerRecordWithOffset needs a topic name (a non-empty str), got {topic!r}')
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise ValueError(f'ProducerRecordWithOffset needs an explicit partition (int >= 0), got {partition!r}:'
                             ' a record written at an offset must name the partition that offset belongs to')
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f'ProducerRecordWithOffset needs an offset (int >= 0), got {offset!r}')
        return super().__new__(cls, topic, partition, key, value, headers, timestamp_ms, offset)
