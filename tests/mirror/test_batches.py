"""Byte-level batch handling of the mirror: walking fetched blobs, restamping, cutting at gaps."""
from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafka_kip.mirror.batches import (
    AbortedTransactions,
    UnsupportedRecordFormat,
    is_consecutive,
    iter_batches,
    rebuild,
    restamp,
)
from kafka_kip.protocol.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, parse_header

LZ4 = 3


def batch(base_offset: int, deltas: list[int], *, compression: int = 0, producer: tuple[int, int, int] = (-1, -1, -1),
          transactional: bool = False, timestamp: int = 1_700_000_000_000, padding: int = 0) -> bytes:
    """A v2 batch whose records sit at ``base_offset + delta`` (gaps = compacted records)."""
    builder = DefaultRecordBatchBuilder(2, compression, transactional, *producer, 2**30)
    for delta in deltas:
        builder.append(delta, timestamp + delta, b'key-%d' % delta, b'value-%d' % (base_offset + delta) + b'.' * padding,
                       [('h', b'%d' % delta)])
    data = builder.build()
    data[0:8] = base_offset.to_bytes(8, 'big')
    return bytes(data)


def control_batch(base_offset: int, producer_id: int, abort: bool) -> bytes:
    """A transaction marker (control batch) as a broker writes it."""
    builder = DefaultRecordBatchBuilder(2, 0, True, producer_id, 0, -1, 2**30)
    builder.append(0, 1, struct.pack('>hh', 0, 0 if abort else 1), b'\x00\x00\x00\x00\x00\x00', [])
    data = builder.build()
    data[0:8] = base_offset.to_bytes(8, 'big')
    struct.pack_into('>h', data, 21, struct.unpack_from('>h', data, 21)[0] | CONTROL_MASK)
    struct.pack_into('>I', data, 17, crc32c(memoryview(data)[21:]))
    return bytes(data)


def records(data: bytes) -> list[tuple[int, int, bytes, bytes, list]]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in DefaultRecordBatch(data)]


def test_iter_batches_yields_complete_batches_and_drops_a_cut_tail() -> None:
    first, second = batch(0, [0, 1, 2]), batch(3, [0, 1])
    blob = first + second[:-7]  # a fetch size limit cut the second batch
    found = [(header.base_offset, header.records_count, bytes(view)) for header, view in iter_batches(blob)]
    assert found == [(0, 3, first)]
    assert [h.base_offset for h, _ in iter_batches(first + second)] == [0, 3]
    assert list(iter_batches(b'')) == []


def test_iter_batches_refuses_old_message_formats() -> None:
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=2**20)
    builder.append(0, timestamp=1, key=b'k', value=b'v')
    old = bytes(builder.build()) + b'\x00' * 61  # long enough to parse as a v2 header
    with pytest.raises(UnsupportedRecordFormat, match='magic 1'):
        list(iter_batches(old))


def test_consecutive_means_no_record_was_compacted_away() -> None:
    assert is_consecutive(parse_header(batch(10, [0, 1, 2, 3])))
    assert not is_consecutive(parse_header(batch(10, [0, 1, 3])))
    assert not is_consecutive(parse_header(batch(10, [1, 2, 3])))  # the first record was removed


def test_restamp_rewrites_only_producer_fields_and_crc() -> None:
    source = batch(500, [0, 1, 2], compression=LZ4, producer=(77, 3, 9), transactional=True)
    copy = restamp(memoryview(source), 1001, 0, 42)
    header, original = parse_header(copy), parse_header(source)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1001, 0, 42)
    assert header.attributes == original.attributes & ~TRANSACTIONAL_MASK
    assert header._replace(crc=0, attributes=0, producer_id=0, producer_epoch=0, base_sequence=0) == \
        original._replace(crc=0, attributes=0, producer_id=0, producer_epoch=0, base_sequence=0)
    assert header.crc == crc32c(bytes(copy[21:])) != original.crc
    assert DefaultRecordBatch(bytes(copy)).validate_crc()
    assert records(bytes(copy)) == records(source)
    assert parse_header(source).producer_id == 77  # the source bytes are untouched

    plain = parse_header(restamp(source, -1, -1, -1))
    assert (plain.producer_id, plain.producer_epoch, plain.base_sequence) == (-1, -1, -1)


def test_rebuild_cuts_a_compacted_batch_into_consecutive_batches() -> None:
    source = batch(100, [0, 1, 2, 5, 6, 9], compression=LZ4, padding=300)
    pieces = rebuild(source, parse_header(source))
    headers = [parse_header(piece) for piece in pieces]
    assert [(h.base_offset, h.last_offset, h.records_count) for h in headers] == [(100, 102, 3), (105, 106, 2),
                                                                                 (109, 109, 1)]
    assert all(is_consecutive(h) and h.attributes & 0x07 == LZ4 and h.producer_id == -1 for h in headers)
    assert all(DefaultRecordBatch(piece).validate_crc() for piece in pieces)
    assert [r for piece in pieces for r in records(piece)] == records(source)


def test_rebuild_keeps_only_offsets_in_the_range() -> None:
    source = batch(100, list(range(10)))
    pieces = rebuild(source, parse_header(source), low=103, high=107)
    assert [[r[0] for r in records(piece)] for piece in pieces] == [[103, 104, 105, 106]]
    assert parse_header(pieces[0]).base_offset == 103
    assert rebuild(source, parse_header(source), low=200) == []


def test_aborted_transactions_are_recognised_until_their_marker() -> None:
    blob = [batch(0, [0, 1], producer=(5, 0, 0), transactional=True),   # aborted below
            batch(2, [0], producer=(6, 0, 0), transactional=True),       # another producer: committed
            control_batch(3, 5, abort=True),
            batch(4, [0, 1], producer=(5, 0, 2), transactional=True),    # a later transaction of 5
            batch(6, [0], producer=(7, 0, 0))]                           # not transactional
    txn = AbortedTransactions([(5, 0)])
    verdicts = [txn.is_aborted(header, view) for header, view in iter_batches(b''.join(blob))]
    assert verdicts == [True, False, False, False, False]
