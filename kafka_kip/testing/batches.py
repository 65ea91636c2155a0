"""Record batch (magic v2) headers as bytes: parse, validate, rewrite.

The reference cluster stores batches exactly as producers sent them, except for the two fields a
broker assigns (base offset and partition leader epoch) and, for LogAppendTime topics, the max
timestamp. Both assigned fields lie before the CRC-covered region (attributes to end of batch), so
only a LogAppendTime rewrite needs a new CRC. Records are decoded (with kafka-python's
``DefaultRecordBatch``) only where a rule needs them.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafka_kip.testing.codes import CORRUPT_MESSAGE, INVALID_RECORD

# base_offset, length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
# base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count
_HEADER = struct.Struct('>qiibIhiqqqhii')
HEADER_SIZE = _HEADER.size  # 61
_PREFIX = struct.Struct('>qii')  # base_offset, length, partition_leader_epoch
_LENGTH_OVERHEAD = 12  # base_offset + length fields, not counted in `length`
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35

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
        return self.length + _LENGTH_OVERHEAD


def parse_header(batch: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header of the batch starting at ``pos``; raises InvalidBatch if truncated."""
    if len(batch) - pos < HEADER_SIZE:
        raise InvalidBatch(CORRUPT_MESSAGE, 'record batch shorter than its header')
    return BatchHeader._make(_HEADER.unpack_from(batch, pos))


def validate_produced(records: bytes, with_offsets: bool = False) -> BatchHeader:
    """Check a produced partition payload: exactly one v2 batch, intact CRC, sane counts.

    ``with_offsets`` (KIP-391 produce-with-offsets) also requires the record offset deltas to be
    ``0..n-1``, decoding the records; its offset errors are CORRUPT_MESSAGE.
    """
    header = parse_header(records)
    if header.magic != 2:
        raise InvalidBatch(CORRUPT_MESSAGE, 'only record batch magic v2 is supported')
    if header.size < HEADER_SIZE or header.size > len(records):
        raise InvalidBatch(CORRUPT_MESSAGE, 'record batch length does not match the payload')
    if header.size < len(records):
        raise InvalidBatch(INVALID_RECORD, 'produce requests must contain exactly one record batch')
    if crc32c(memoryview(records)[_ATTRIBUTES_OFFSET:]) != header.crc:
        raise InvalidBatch(CORRUPT_MESSAGE, 'record batch CRC mismatch')
    if header.attributes & CONTROL_MASK:
        raise InvalidBatch(INVALID_RECORD, 'clients may not produce control batches')
    if header.attributes & COMPRESSION_MASK > 4:
        raise InvalidBatch(CORRUPT_MESSAGE, 'unknown compression codec')
    if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
        raise InvalidBatch(CORRUPT_MESSAGE if with_offsets else INVALID_RECORD,
                           'last_offset_delta must equal record count - 1')
    if with_offsets:
        _check_consecutive_offsets(records, header)
    return header


def _check_consecutive_offsets(records: bytes, header: BatchHeader) -> None:
    try:
        deltas = [record.offset - header.base_offset for record in DefaultRecordBatch(records)]
    except Exception as exc:  # any decoding failure of client bytes is a corrupt batch
        raise InvalidBatch(CORRUPT_MESSAGE, f'undecodable records: {exc}') from exc
    if deltas != list(range(header.records_count)):
        raise InvalidBatch(CORRUPT_MESSAGE, 'record offsets within the batch are not consecutive')


def rewrite(records: bytes, base_offset: int, leader_epoch: int, log_append_time: int | None = None) -> bytes:
    """Return the batch with broker-assigned base offset and leader epoch (and LogAppendTime)."""
    if log_append_time is None:
        length = len(records) - _LENGTH_OVERHEAD
        return b''.join((_PREFIX.pack(base_offset, length, leader_epoch), memoryview(records)[16:]))
    buf = bytearray(records)
    _PREFIX.pack_into(buf, 0, base_offset, len(records) - _LENGTH_OVERHEAD, leader_epoch)
    attributes = struct.unpack_from('>h', buf, _ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_MASK
    struct.pack_into('>h', buf, _ATTRIBUTES_OFFSET, attributes)
    struct.pack_into('>q', buf, _MAX_TIMESTAMP_OFFSET, log_append_time)
    struct.pack_into('>I', buf, _CRC_OFFSET, crc32c(memoryview(buf)[_ATTRIBUTES_OFFSET:]))
    return bytes(buf)


class Record(NamedTuple):
    """One decoded record."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def iter_records(batch: bytes) -> Iterator[Record]:
    """Decode the records of one stored batch (decompressing if needed)."""
    for record in DefaultRecordBatch(batch):
        yield Record(record.offset, record.timestamp, record.key, record.value, list(record.headers))


def build_batch(records: Sequence[tuple[bytes | None, bytes | None]], *, base_offset: int = 0,
                timestamps: Sequence[int] | None = None, offset_deltas: Sequence[int] | None = None,
                compression: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1) -> bytes:
    """A v2 batch of ``(key, value)`` records as a producer sends it (tests and tools).

    ``base_offset`` is what a KIP-391 producer puts there (the first record's offset); the record
    offset deltas default to ``0..n-1`` and timestamps to ``1000, 1001, ...``.
    """
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=2**31 - 1)
    for i, (key, value) in enumerate(records):
        builder.append(offset_deltas[i] if offset_deltas else i,
                       timestamp=timestamps[i] if timestamps else 1000 + i, key=key, value=value, headers=[])
    batch = builder.build()
    struct.pack_into('>q', batch, 0, base_offset)
    return bytes(batch)
