"""KIP-232 ``offset_epoch``: the opaque bytes that tie a stored offset to the partition it was read from.

Applications store them next to the offset (``consumer.position_and_offset_epoch(tp)``) and hand them back
to ``consumer.seek(tp, offset, offset_epoch=...)``; only this module interprets them.

Layout of version 1 (big-endian, 29 bytes)::

    version       int8     1
    leader_epoch  int32    epoch of the last consumed record below the offset, -1 if unknown
    partition_epoch int32  partition epoch (KIP-232 brokers) from the last fetch, -1 if unknown
    topic_id      16 bytes topic UUID (KIP-516), all zeros if unknown -- what stock brokers offer instead
    crc32         uint32   over the 25 bytes before it, so truncated or foreign bytes are refused

A new layout gets a new version byte; decoders refuse versions they do not know.
"""
from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass

VERSION = 1
_BODY = struct.Struct('>bii16s')
_CRC = struct.Struct('>I')
_SIZE = _BODY.size + _CRC.size
_NO_TOPIC_ID = bytes(16)


@dataclass(frozen=True)
class OffsetEpoch:
    """What an ``offset_epoch`` encodes: -1 / ``None`` mean unknown."""

    leader_epoch: int = -1
    partition_epoch: int = -1
    topic_id: uuid.UUID | None = None

    def to_bytes(self) -> bytes:
        """The versioned, checksummed encoding (see the module docstring)."""
        topic_id = _NO_TOPIC_ID if self.topic_id is None else self.topic_id.bytes
        body = _BODY.pack(VERSION, self.leader_epoch, self.partition_epoch, topic_id)
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes) -> OffsetEpoch:
        """Decode ``data``; ``ValueError`` naming the problem when it is not an offset_epoch we can read."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f'offset_epoch must be bytes, got {type(data).__name__}')
        data = bytes(data)
        if not data:
            raise ValueError('offset_epoch is empty')
        if data[0] != VERSION:
            raise ValueError(f'offset_epoch has version {data[0]}; this client reads version {VERSION}')
        if len(data) != _SIZE:
            raise ValueError(f'offset_epoch version {VERSION} is {_SIZE} bytes long, got {len(data)}')
        body, (crc,) = data[:_BODY.size], _CRC.unpack(data[_BODY.size:])
        if zlib.crc32(body) != crc:
            raise ValueError('offset_epoch checksum mismatch: the bytes were altered or are not an offset_epoch')
        _, leader_epoch, partition_epoch, topic_id = _BODY.unpack(body)
        if leader_epoch < -1 or partition_epoch < -1:
            raise ValueError(f'offset_epoch holds invalid epochs (leader {leader_epoch}, partition {partition_epoch})')
        return cls(leader_epoch, partition_epoch, None if topic_id == _NO_TOPIC_ID else uuid.UUID(bytes=topic_id))
