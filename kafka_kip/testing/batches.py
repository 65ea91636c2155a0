"""Record batches (magic v2) in the reference cluster: validate, rewrite, build (header: kafka_kip.protocol.record_batch).

The reference cluster stores batches exactly as producers sent them, except for the two fields a
broker assigns (base offset and partition leader epoch) and, for LogAppendTime topics, the max
timestamp. Both assigned fields lie before the CRC-covered region (attributes to end of batch), so
only a LogAppendTime rewrite needs a new CRC. Produce never decodes records: produce-with-offsets
walks the record framing (see :func:`validate_produced`); tools and ListOffsets decode them with
kafka-python's ``DefaultRecordBatch``.
"""
from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from crc32c import crc32c
from kafka import codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafka_kip.protocol.record_batch import (  # noqa: F401  (re-exported for the cluster's modules)
    AFTER_TIMESTAMPS,
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_FIELD,
    CRC_OFFSET,
    HEADER_SIZE,
    LENGTH_OVERHEAD,
    PREFIX,
    TIMESTAMP_FIELDS,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidBatch,
    parse_header,
)
from kafka_kip.testing.codes import CORRUPT_MESSAGE, INVALID_RECORD


def validate_produced(records: bytes, with_offsets: bool = False) -> BatchHeader:
    """Check a produced partition payload: exactly one v2 batch, intact CRC, sane counts.

    ``with_offsets`` (KIP-391 produce-with-offsets) also requires the record offset deltas to be
    ``0..n-1`` (decompressing a compressed batch once); its offset errors are CORRUPT_MESSAGE.
    """
    header = parse_header(records)
    if header.magic != 2:
        raise InvalidBatch(CORRUPT_MESSAGE, 'only record batch magic v2 is supported')
    if header.size < HEADER_SIZE or header.size > len(records):
        raise InvalidBatch(CORRUPT_MESSAGE, 'record batch length does not match the payload')
    if header.size < len(records):
        raise InvalidBatch(INVALID_RECORD, 'produce requests must contain exactly one record batch')
    if crc32c(memoryview(records)[ATTRIBUTES_OFFSET:]) != header.crc:
        raise InvalidBatch(CORRUPT_MESSAGE, 'record batch CRC mismatch')
    if header.attributes & CONTROL_MASK:
        raise InvalidBatch(INVALID_RECORD, 'clients may not produce control batches')
    compression = header.attributes & COMPRESSION_MASK
    if compression > 4:
        raise InvalidBatch(CORRUPT_MESSAGE, 'unknown compression codec')
    if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
        raise InvalidBatch(CORRUPT_MESSAGE if with_offsets else INVALID_RECORD,
                           'last_offset_delta must equal record count - 1')
    if with_offsets:
        if compression:
            _check_offset_deltas(_decompress(compression, memoryview(records)[HEADER_SIZE:]), 0,
                                header.records_count)
        else:
            _check_offset_deltas(records, HEADER_SIZE, header.records_count)
    return header


# kafka.codec's decoders read any buffer; its snappy path copies a payload that is not bytes twice, and
# the standard library's one-shot gzip (reading every member) takes a third less time than its GzipFile.
_DECOMPRESSORS = {1: ('gzip', gzip.decompress), 2: ('snappy', lambda data: codec.snappy_decode(bytes(data))),
                  3: ('lz4', codec.lz4_decode), 4: ('zstd', codec.zstd_decode)}
_VARINT_MAX_BYTES = 5  # Kafka's 32-bit varints: record length and offset delta
# Half the zigzag value of a length varint's first byte; an odd byte (a negative length) ends the
# record far before its header, so that the check of the header against the record end fails.
_HALF_LENGTH = tuple(-1 << 40 if byte & 1 else byte >> 1 for byte in range(256))


def _decompress(compression: int, data: memoryview) -> bytes:
    name, decode = _DECOMPRESSORS[compression]
    if decode is None:  # kafka.codec without its lz4 library
        raise InvalidBatch(CORRUPT_MESSAGE, f'cannot check the record offsets: {name} is not available')
    try:
        return decode(data)
    except Exception as exc:  # any failure to decompress client bytes is a corrupt batch
        raise InvalidBatch(CORRUPT_MESSAGE, f'cannot decompress the {name} records: {exc}') from exc


def _check_offset_deltas(data: bytes, pos: int, count: int) -> None:
    """Require ``data[pos:]`` to be exactly ``count`` records whose offset deltas are ``0..count-1``.

    Raises InvalidBatch(CORRUPT_MESSAGE) naming the first bad record. Per record it reads the length
    and offset delta and skips the attributes and timestamp delta between them, without building
    objects; a record's key, value and headers are not looked at (as plain produce does not).
    """
    # The hot loop decodes 1- and 2-byte varints inline with integer arithmetic and a table (the
    # operations CPython specializes; bit operations are slower) and compares offset deltas in their
    # zigzag form: 0..n-1 is 0, 2, .., 2n-2. A bad record is decoded again to say what is wrong.
    end = len(data)
    half = _HALF_LENGTH
    zigzag = 0
    try:
        for zigzag in range(0, 2 * count, 2):
            first = data[pos]
            if first < 0x80:
                record_end = pos + 1 + half[first]
                at = pos + 2
            elif (second := data[pos + 1]) < 0x80:
                record_end = pos + 2 + half[first] - 64 + second * 64
                at = pos + 3
            else:
                size, at = _read_varint(data, pos)
                record_end = -1 if size & 1 else at + (size >> 1)
                at += 1
            while data[at] > 0x7F:  # at the timestamp delta, after the attributes byte
                at += 1
            delta = data[at + 1]
            if delta < 0x80:
                at += 2
            elif (second := data[at + 2]) < 0x80:
                delta += second * 128 - 128
                at += 3
            else:
                delta, at = _read_varint(data, at + 1)
            if delta != zigzag or at > record_end:
                _bad_record(data, pos, zigzag >> 1)
            pos = record_end
    except IndexError:  # pos is where the record being read starts
        index = zigzag >> 1
        if pos == end:
            raise InvalidBatch(CORRUPT_MESSAGE, f'the batch ends after {index} of its {count} records') from None
        raise InvalidBatch(CORRUPT_MESSAGE, f'record {index - (pos > end)} runs past the end of the batch') from None
    if pos < end:
        raise InvalidBatch(CORRUPT_MESSAGE, f'{end - pos} bytes follow the last of the {count} records')
    if pos > end:
        raise InvalidBatch(CORRUPT_MESSAGE, f'record {count - 1} runs past the end of the batch')


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned (zigzag) value of the varint at ``pos`` and the position after it."""
    value = 0
    for shift in range(0, 7 * _VARINT_MAX_BYTES, 7):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    raise InvalidBatch(CORRUPT_MESSAGE, f'varint longer than {_VARINT_MAX_BYTES} bytes in the records')


def _bad_record(data: bytes, pos: int, index: int) -> None:
    """Raise what is wrong with the record at ``pos``, read the way the scan of the batch read it."""
    size, at = _read_varint(data, pos)
    if size & 1:
        raise InvalidBatch(CORRUPT_MESSAGE, f'record {index} has a negative length')
    record_end = at + (size >> 1)
    at += 1
    while data[at] > 0x7F:
        at += 1
    delta, at = _read_varint(data, at + 1)
    if at > record_end:
        raise InvalidBatch(CORRUPT_MESSAGE, f'record {index} is shorter than its header')
    raise InvalidBatch(CORRUPT_MESSAGE, f'record offsets within the batch are not consecutive: record {index} '
                                        f'has offset delta {(delta >> 1) ^ -(delta & 1)}')


def rewrite(records: bytes, base_offset: int, leader_epoch: int, log_append_time: int | None = None) -> bytes:
    """Return the batch with broker-assigned base offset and leader epoch (and LogAppendTime)."""
    view = memoryview(records)
    prefix = PREFIX.pack(base_offset, len(records) - LENGTH_OVERHEAD, leader_epoch)
    if log_append_time is None:
        return b''.join((prefix, view[16:]))
    attributes, last_offset_delta, base_timestamp, _ = TIMESTAMP_FIELDS.unpack_from(records, ATTRIBUTES_OFFSET)
    fields = TIMESTAMP_FIELDS.pack(attributes | TIMESTAMP_TYPE_MASK, last_offset_delta, base_timestamp,
                                    log_append_time)
    crc = crc32c(view[AFTER_TIMESTAMPS:], crc32c(fields))  # the CRC of the new fields, then of the rest
    return b''.join((prefix, view[16:CRC_OFFSET], CRC_FIELD.pack(crc), fields, view[AFTER_TIMESTAMPS:]))


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
                base_sequence: int = -1, transactional: bool = False) -> bytes:
    """A v2 batch of ``(key, value)`` records as a producer sends it (tests and tools).

    ``base_offset`` is what a KIP-391 producer puts there (the first record's offset); the record
    offset deltas default to ``0..n-1`` and timestamps to ``1000, 1001, ...``.
    """
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=2**31 - 1)
    for i, (key, value) in enumerate(records):
        builder.append(offset_deltas[i] if offset_deltas else i,
                       timestamp=timestamps[i] if timestamps else 1000 + i, key=key, value=value, headers=[])
    batch = builder.build()
    struct.pack_into('>q', batch, 0, base_offset)
    return bytes(batch)


#: Control record types (Kafka's ``ControlRecordType``): the key of a transaction marker.
ABORT_MARKER, COMMIT_MARKER = 0, 1
_CONTROL_KEY = struct.Struct('>hh')  # version, type
_MARKER_VALUE = struct.Struct('>hi')  # version, coordinator epoch


def build_control_batch(commit: bool, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        timestamp: int) -> bytes:
    """A transaction marker as a coordinator writes it: a transactional control batch of one record."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
                                        producer_epoch=producer_epoch, base_sequence=-1, batch_size=2**31 - 1)
    builder.append(0, timestamp=timestamp, key=_CONTROL_KEY.pack(0, COMMIT_MARKER if commit else ABORT_MARKER),
                   value=_MARKER_VALUE.pack(0, coordinator_epoch), headers=[])
    batch = builder.build()
    attributes = struct.unpack_from('>h', batch, ATTRIBUTES_OFFSET)[0] | CONTROL_MASK
    struct.pack_into('>h', batch, ATTRIBUTES_OFFSET, attributes)
    CRC_FIELD.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def marker_commits(batch: bytes, header: BatchHeader) -> bool | None:
    """For a control batch: True for a commit marker, False for an abort marker; None for any other batch."""
    if not header.attributes & CONTROL_MASK:
        return None
    key = next(iter_records(batch)).key
    return key is not None and len(key) >= _CONTROL_KEY.size and _CONTROL_KEY.unpack_from(key)[1] == COMMIT_MARKER
