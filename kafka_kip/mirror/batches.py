"""Record batches as bytes, for copying: walk a fetched blob, restamp producer fields, cut at gaps.

The mirror's fast path never decodes a record. A fetched data batch whose offsets are consecutive
(``records_count == last_offset_delta + 1``) goes to the target byte for byte, except for the
fields a writer owns: producer id, producer epoch and base sequence (the target producer's
idempotence), the transactional bit (the copy is not written in a transaction) and the CRC32C
that covers them. Only a batch with internal gaps (compacted), or one that must be cut at an
offset, is decoded and re-encoded (:func:`rebuild`), one new batch per run of consecutive offsets.

The v2 header layout and parser are :mod:`kafka_kip.protocol.record_batch`'s (one parser in the project).
"""
from __future__ import annotations

import heapq
import struct
import time
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafka_kip.protocol.constants import NO_PRODUCER_ID
from kafka_kip.protocol.record_batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LENGTH_OVERHEAD,
    TRANSACTIONAL_MASK,
    BatchHeader,
    parse_header,
    stamp_producer,
)

_BASE_OFFSET = struct.Struct('>q')
_MAX_BATCH = 2**31 - 1
_GZIP = 1
#: The headers of a placeholder record (checked mode aligning an empty target partition, then deleting them).
PLACEHOLDER_HEADERS = [('kafka-kip-mirror', b'placeholder')]


class UnsupportedRecordFormat(ValueError):
    """The source returned records in a message format older than v2 (magic 0/1)."""


class Piece(NamedTuple):
    """One batch ready for the target: offsets ``base_offset .. last_offset`` (consecutive)."""

    base_offset: int
    last_offset: int
    records: int
    data: bytes | bytearray
    leader_epoch: int


def iter_batches(blob: bytes | memoryview) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The complete batches of a fetched records blob, with their parsed headers.

    A trailing partial batch (the fetch size limit cut it) is left out, as Kafka clients do.
    """
    view = memoryview(blob)
    pos, end = 0, len(view)
    while end - pos >= HEADER_SIZE:
        header = parse_header(view, pos)
        size = header.length + LENGTH_OVERHEAD
        if header.magic != 2:
            raise UnsupportedRecordFormat(
                f'record batch at offset {header.base_offset} has magic {header.magic}; only v2 batches '
                '(Kafka 0.11+ message format) can be copied')
        if pos + size > end:
            return
        yield header, view[pos:pos + size]
        pos += size


def is_consecutive(header: BatchHeader) -> bool:
    """True if the batch holds every offset from its base to its last offset (nothing compacted away)."""
    return header.records_count == header.last_offset_delta + 1


def restamp(batch: bytes | memoryview, producer_id: int, producer_epoch: int, base_sequence: int, *,
            keep_offset: bool = True) -> bytearray:
    """A copy of ``batch`` with the target producer's id, epoch and base sequence and a new CRC.

    ``producer_id`` -1 (with epoch and sequence -1) writes a non-idempotent batch. The transactional
    bit is cleared: the copy is written outside any transaction. Without ``keep_offset`` the base offset
    is 0, as an ordinary produce must carry it (Apache Kafka refuses any other with INVALID_RECORD);
    produce-with-offsets (KIP-391) keeps it.
    """
    buf = bytearray(batch)
    if not keep_offset:
        _BASE_OFFSET.pack_into(buf, 0, 0)  # outside the CRC-covered region
    stamp_producer(buf, producer_id, producer_epoch, base_sequence)
    return buf


def rebuild(batch: bytes | memoryview, header: BatchHeader, low: int = 0, high: int | None = None) -> list[bytes]:
    """Re-encode the records of ``batch`` with ``low <= offset < high`` as batches of consecutive offsets.

    Each new batch keeps the source's compression codec, timestamps, keys, values and headers, has
    its base offset set to its first record's offset and carries no producer state (restamp it).
    """
    out: list[bytes] = []
    builder: DefaultRecordBatchBuilder | None = None
    base = expected = -1
    for record in DefaultRecordBatch(bytes(batch)):
        offset = record.offset
        if offset < low or (high is not None and offset >= high):
            continue
        if builder is None or offset != expected:
            if builder is not None:
                out.append(_finish(builder, base))
            builder = DefaultRecordBatchBuilder(2, header.attributes & COMPRESSION_MASK, False,
                                                NO_PRODUCER_ID, -1, -1, _MAX_BATCH)
            base = offset
        builder.append(offset - base, record.timestamp, record.key, record.value, record.headers)
        expected = offset + 1
    if builder is not None:
        out.append(_finish(builder, base))
    return out


def placeholders(count: int) -> bytes:
    """A gzip batch of ``count`` placeholder records: no key, no value, :data:`PLACEHOLDER_HEADERS`."""
    builder = DefaultRecordBatchBuilder(2, _GZIP, False, NO_PRODUCER_ID, -1, -1, _MAX_BATCH)
    now = int(time.time() * 1000)
    for delta in range(count):
        builder.append(delta, now, None, None, PLACEHOLDER_HEADERS)
    return bytes(builder.build())


def _finish(builder: DefaultRecordBatchBuilder, base_offset: int) -> bytes:
    data = builder.build()
    _BASE_OFFSET.pack_into(data, 0, base_offset)  # outside the CRC-covered region
    return bytes(data)


class AbortedTransactions:
    """Read-committed filtering of one fetched partition (Kafka's consumer algorithm).

    ``aborted`` is the fetch response's ``aborted_transactions`` as ``(producer_id, first_offset)``.
    Feed every batch in log order to :meth:`is_aborted`; it answers whether a data batch belongs to
    an aborted transaction.
    """

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        self._pending = [(first_offset, producer_id) for producer_id, first_offset in aborted]
        heapq.heapify(self._pending)
        self._open: set[int] = set()

    def is_aborted(self, header: BatchHeader, batch: bytes | memoryview) -> bool:
        """True if ``batch`` (a transactional data batch) was aborted; tracks abort markers too."""
        while self._pending and self._pending[0][0] <= header.last_offset:
            self._open.add(heapq.heappop(self._pending)[1])
        if not header.attributes & TRANSACTIONAL_MASK:
            return False
        if header.attributes & CONTROL_MASK:
            if header.producer_id in self._open and _is_abort_marker(batch):
                self._open.discard(header.producer_id)
            return False
        return header.producer_id in self._open


def _is_abort_marker(batch: bytes | memoryview) -> bool:
    for record in DefaultRecordBatch(bytes(batch)):
        return bool(record.abort)
    return False
