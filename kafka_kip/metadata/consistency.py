"""KIP-1243's ``ConsistencyContext``: a cluster id and the cluster metadata log offset a client has seen.

A broker that implements KIP-1243 reports in every flexible response header the offset of the cluster metadata
log its metadata image contains; a client sends the latest offset it has seen in its request headers, and a
broker whose image is older does not answer from it (it waits, or answers STALE_METADATA). The context is the
pair (cluster id, offset); :meth:`ConsistencyContext.later` orders two of them.

:meth:`ConsistencyContext.to_bytes` is the hand-off format between processes: versioned, and
:meth:`ConsistencyContext.from_bytes` refuses anything it cannot read with a ``ValueError`` saying why.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from kafka_kip.protocol.constants import (
    UNKNOWN_OFFSET,  # an unknown context's offset, the wire's default token
)

_MAGIC = b'KC'
_VERSION = 1
_HEAD = struct.Struct('>2sBqh')  # magic, format version, offset, cluster id length (-1: none)
_MAX_CLUSTER_ID_BYTES = 0x7FFF  # the wire's string length is an int16


@dataclass(frozen=True, slots=True)
class ConsistencyContext:
    """The metadata consistency context of one Kafka cluster: its ``cluster_id`` and a metadata ``offset``.

    Build one with :meth:`of` or :meth:`unknown`; immutable, hashable, picklable.
    """

    cluster_id: str | None
    offset: int

    _UNKNOWN: ClassVar[ConsistencyContext]

    @classmethod
    def of(cls, cluster_id: str, offset: int) -> ConsistencyContext:
        """The context of ``cluster_id`` at metadata ``offset``.

        Raises TypeError for a cluster id that is not a string (None included) or an offset that is not an int,
        ValueError for an empty cluster id, one longer than the wire carries, or a negative offset.
        """
        if not isinstance(cluster_id, str):
            raise TypeError(f'cluster_id must be a str, got {cluster_id!r}')
        if not cluster_id or len(cluster_id.encode('utf-8')) > _MAX_CLUSTER_ID_BYTES:
            raise ValueError(f'cluster_id must be 1..{_MAX_CLUSTER_ID_BYTES} UTF-8 bytes, got {cluster_id!r}')
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TypeError(f'offset must be an int, got {offset!r}')
        if not 0 <= offset < 2 ** 63:
            raise ValueError(f'offset must be in 0..2**63-1, got {offset}')
        return cls(cluster_id, offset)

    @classmethod
    def unknown(cls) -> ConsistencyContext:
        """The empty context: no cluster id, no offset (what a client starts with)."""
        return cls._UNKNOWN

    def is_unknown(self) -> bool:
        """True for the empty context."""
        return self.cluster_id is None

    def later(self, other: ConsistencyContext) -> ConsistencyContext:
        """The more recent of ``self`` and ``other`` (the one with the greater offset; ``self`` on a tie).

        An unknown context is older than any known one. ValueError if both are known and their cluster ids
        differ: offsets of two clusters cannot be compared.
        """
        if not isinstance(other, ConsistencyContext):
            raise TypeError(f'expected a ConsistencyContext, got {other!r}')
        if other.cluster_id is None:
            return self
        if self.cluster_id is None:
            return other
        if self.cluster_id != other.cluster_id:
            raise ValueError(f'consistency contexts of two clusters cannot be compared: '
                             f'{self.cluster_id!r} and {other.cluster_id!r}')
        return other if other.offset > self.offset else self

    def to_bytes(self) -> bytes:
        """The context as bytes for another process (:meth:`from_bytes` reads them)."""
        if self.cluster_id is None:
            return _HEAD.pack(_MAGIC, _VERSION, UNKNOWN_OFFSET, -1)
        cluster_id = self.cluster_id.encode('utf-8')
        return _HEAD.pack(_MAGIC, _VERSION, self.offset, len(cluster_id)) + cluster_id

    @classmethod
    def from_bytes(cls, blob: bytes | bytearray | memoryview) -> ConsistencyContext:
        """The context :meth:`to_bytes` wrote; TypeError for a non-bytes argument, ValueError naming what is
        wrong with bytes that are not such a context (another format, an unknown version, truncated, ...)."""
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise TypeError(f'a consistency context is read from bytes, got {type(blob).__name__}')
        data = bytes(blob)
        if len(data) < _HEAD.size or data[:2] != _MAGIC:
            raise ValueError(f'not a consistency context (it starts with {_MAGIC!r} and has at least '
                             f'{_HEAD.size} bytes): {data[:16]!r}')
        magic, version, offset, length = _HEAD.unpack_from(data)
        if version != _VERSION:
            raise ValueError(f'consistency context format version {version} is not known to this kafka_kip '
                             f'(it reads version {_VERSION})')
        if length == -1:
            if offset != UNKNOWN_OFFSET or len(data) != _HEAD.size:
                raise ValueError(f'malformed unknown consistency context: {data!r}')
            return cls._UNKNOWN
        if length < 1 or len(data) != _HEAD.size + length:
            raise ValueError(f'consistency context has {len(data) - _HEAD.size} cluster id bytes, its header '
                             f'says {length}')
        try:
            cluster_id = data[_HEAD.size:].decode('utf-8')
        except UnicodeDecodeError as exc:
            raise ValueError(f'consistency context cluster id is not UTF-8: {exc}') from None
        return cls.of(cluster_id, offset)

    def __str__(self) -> str:
        if self.cluster_id is None:
            return 'ConsistencyContext(unknown)'
        return f'ConsistencyContext(cluster_id={self.cluster_id!r}, offset={self.offset})'


ConsistencyContext._UNKNOWN = ConsistencyContext(None, UNKNOWN_OFFSET)

__all__ = ['ConsistencyContext', 'UNKNOWN_OFFSET']
