"""Record batches (magic v2) in the reference cluster: rewrite, decode, build (header: kafka_kip.protocol.record_batch).

The reference cluster stores batches exactly as producers sent them, except for the two fields a
broker assigns (base offset and partition leader epoch) and, for LogAppendTime topics, the max
timestamp. Both assigned fields lie before the CRC-covered region (attributes to end of batch), so
only a LogAppendTime rewrite needs a new CRC. Produce never decodes records: it walks them
(:mod:`kafka_kip_reference.broker.record_validation`); tools and ListOffsets decode them with kafka-python's
``DefaultRecordBatch``.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from crc32c import crc32c
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


def marker_coordinator_epoch(batch: bytes) -> int:
    """The coordinator epoch a control batch's marker carries (-1 if its value is too short)."""
    value = next(iter_records(batch)).value
    return _MARKER_VALUE.unpack_from(value)[1] if value is not None and len(value) >= _MARKER_VALUE.size else -1


def marker_commits(batch: bytes, header: BatchHeader) -> bool | None:
    """For a control batch: True for a commit marker, False for an abort marker; None for any other batch."""
    if not header.attributes & CONTROL_MASK:
        return None
    key = next(iter_records(batch)).key
    return key is not None and len(key) >= _CONTROL_KEY.size and _CONTROL_KEY.unpack_from(key)[1] == COMMIT_MARKER
