"""The record batch (magic v2) header as bytes: layout, attribute flags and a parser.

One parser for the project: the reference cluster (which stores batches as producers sent them) and the
mirror (which copies batches as bytes, rewriting only producer fields and the CRC) both read headers here.
The CRC32C covers ``attributes`` to the end of the batch, so the base offset and the partition leader
epoch can be rewritten without touching it.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from crc32c import crc32c
from kafka.errors import CorruptRecordError

# base_offset, length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
# base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count
HEADER = struct.Struct('>qiibIhiqqqhii')
HEADER_SIZE = HEADER.size  # 61
PREFIX = struct.Struct('>qii')  # base_offset, length, partition_leader_epoch
LENGTH_OVERHEAD = 12  # base_offset + length fields, not counted in `length`
CRC_OFFSET = 17
CRC_FIELD = struct.Struct('>I')
ATTRIBUTES_OFFSET = 21
# attributes, last_offset_delta, base_timestamp, max_timestamp: what a LogAppendTime rewrite changes
TIMESTAMP_FIELDS = struct.Struct('>hiqq')
AFTER_TIMESTAMPS = ATTRIBUTES_OFFSET + TIMESTAMP_FIELDS.size  # 43

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20


class InvalidBatch(ValueError):
    """A batch violates the format; ``error_code`` is the Kafka error to answer with."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 record batch."""

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        return self.length + LENGTH_OVERHEAD


def parse_header(batch: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header of the batch starting at ``pos``; raises InvalidBatch if truncated."""
    if len(batch) - pos < HEADER_SIZE:
        raise InvalidBatch(CorruptRecordError.errno, 'record batch shorter than its header')
    return BatchHeader._make(HEADER.unpack_from(batch, pos))


_ATTRIBUTES = struct.Struct('>h')
_PRODUCER = struct.Struct('>qhi')  # producer_id, producer_epoch, base_sequence (right after the timestamps)


def stamp_producer(batch: bytearray, producer_id: int, producer_epoch: int, base_sequence: int,
                   transactional: bool = False) -> None:
    """Write a writer's fields into ``batch`` in place: producer id, epoch, base sequence and the transactional
    bit; then the CRC32C that covers them."""
    attributes = _ATTRIBUTES.unpack_from(batch, ATTRIBUTES_OFFSET)[0]
    attributes = attributes | TRANSACTIONAL_MASK if transactional else attributes & ~TRANSACTIONAL_MASK
    _ATTRIBUTES.pack_into(batch, ATTRIBUTES_OFFSET, attributes)
    _PRODUCER.pack_into(batch, AFTER_TIMESTAMPS, producer_id, producer_epoch, base_sequence)
    CRC_FIELD.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
