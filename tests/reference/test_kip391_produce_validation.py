"""Produce-with-offsets (KIP-391) batch validation of the reference cluster: record offset deltas 0..n-1.

The broker walks the record framing of a batch (decompressing it in pieces) instead of decoding records, so
these tests build batches byte by byte where kafka-python's builder cannot produce the case. Every case runs
with both record walkers, the compiled one and the pure-Python one.
"""
from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from kafka import TopicPartition, codec

from kafka_kip._codec import record_walk
from kafka_kip.protocol.constants import (
    CORRUPT_MESSAGE,
    INVALID_PRODUCE_OFFSET,
    INVALID_RECORD,
    NONE,
    UNKNOWN_SERVER_ERROR,
)
from kafka_kip.protocol.requests import produce_request
from kafka_kip_reference.broker import record_validation
from kafka_kip_reference.broker.batches import InvalidBatch, build_batch, iter_records
from kafka_kip_reference.broker.record_validation import ValidationRules, validate_batch
from kafka_kip_reference.fixtures.hostile_batches import raw_batch, record, varint
from kafka_kip_reference.fixtures.wire_client import WireClient

pytestmark = pytest.mark.kip391

CODECS = {0: 'none', 1: 'gzip', 3: 'lz4', 4: 'zstd'}


def with_header(batch: bytes, *, last_offset_delta: int) -> bytes:
    """``batch`` with another last_offset_delta (and the CRC that goes with it)."""
    patched = bytearray(batch)
    struct.pack_into('>i', patched, 23, last_offset_delta)
    struct.pack_into('>I', patched, 17, crc32c(bytes(patched[21:])))
    return bytes(patched)


WALKERS = {'compiled': record_walk.RecordWalk, 'python': record_walk.PyRecordWalk}


@pytest.fixture(autouse=True, params=[name for name, walker in WALKERS.items()
                                      if name == 'python' or walker is not record_walk.PyRecordWalk])
def walker(request, monkeypatch):
    """Every test runs with each record walker built here (the compiled one needs the codec built)."""
    monkeypatch.setattr(record_validation, 'RecordWalk', WALKERS[request.param])
    return request.param


def validate_produced(batch: bytes, with_offsets: bool = False):
    """The header of ``batch`` if a broker with Kafka's default configs takes it (InvalidBatch if not)."""
    rules = ValidationRules(partition='t-0', max_message_bytes=1 << 30, max_uncompressed_bytes=1 << 30,
                            now_ms=10_000, with_offsets=with_offsets)
    return validate_batch(batch, rules).header


def rejected(batch: bytes, with_offsets: bool = True) -> tuple[int, str]:
    with pytest.raises(InvalidBatch) as exc:
        validate_produced(batch, with_offsets=with_offsets)
    return exc.value.error_code, str(exc.value)


def not_consecutive(index: int, delta: int) -> tuple[int, str]:
    return (CORRUPT_MESSAGE,
            f'record offsets within the batch are not consecutive: record {index} has offset delta {delta}')


# -- accepted ------------------------------------------------------------------------------------------


@pytest.mark.parametrize('compression', CODECS, ids=CODECS.values())
@pytest.mark.parametrize('count', [1, 64, 65, 8193])  # offset deltas of 1, 2 and 3 varint bytes
def test_consecutive_offset_deltas_are_accepted(compression, count):
    # values of 0..149 bytes: record lengths of one and two varint bytes
    batch = build_batch([(None, b'v' * (i % 150)) for i in range(count)], base_offset=77, compression=compression)
    header = validate_produced(batch, with_offsets=True)
    assert (header.base_offset, header.records_count, header.last_offset_delta) == (77, count, count - 1)


@pytest.mark.parametrize('compression', CODECS, ids=CODECS.values())
def test_long_records_and_spread_timestamps_are_walked_exactly(compression):
    # 3-byte lengths (values of 9 and 70 KB) and multi-byte timestamp deltas, negative ones included
    values = [(b'k', b'x' * 9_000), (None, b''), (b'key', b'y' * 70_000), (None, b'z')]
    timestamps = [1_000_000, 5, 1_000_000 + 86_400_000, 1_000_001]
    batch = build_batch(values, base_offset=3, timestamps=timestamps, compression=compression)
    assert validate_produced(batch, with_offsets=True).records_count == 4


@pytest.mark.parametrize('compression', CODECS, ids=CODECS.values())
def test_the_hand_built_batches_are_what_kafka_python_decodes(compression):
    batch = raw_batch([record(0, b'a'), record(1, b'b', timestamp_delta=-300), record(2, b'c')],
                      compression=compression, base_offset=40)
    assert [(r.offset, r.timestamp, r.value) for r in iter_records(batch)] == [
        (40, 1000, b'a'), (41, 700, b'b'), (42, 1000, b'c')]
    assert validate_produced(batch, with_offsets=True).records_count == 3


@pytest.mark.parametrize('compression', CODECS, ids=CODECS.values())
def test_non_canonical_varints_are_read_as_kafka_reads_them(compression):
    # Kafka's varint reader accepts redundant continuation bytes (up to 5 bytes)
    body = b'\0' + varint(0) + b'\x82\x80\x00' + varint(-1) + varint(1) + b'b' + varint(0)  # offset delta 1
    length = bytes([len(body) << 1 | 0x80, 0x80, 0x00])  # the body's length in three bytes
    records = [record(0, b'a', delta_bytes=b'\x80\x00'), length + body]
    assert [r.offset for r in iter_records(raw_batch(records))] == [0, 1]
    assert validate_produced(raw_batch(records, compression=compression), with_offsets=True).records_count == 2


# -- rejected: the offset rules -------------------------------------------------------------------------


@pytest.mark.parametrize('compression', CODECS, ids=CODECS.values())
def test_a_gap_inside_a_batch_is_corrupt(compression):
    built = build_batch([(None, b'a'), (None, b'b'), (None, b'c')], offset_deltas=[0, 1, 3], compression=compression)
    gapped = with_header(built, last_offset_delta=2)
    assert rejected(gapped) == not_consecutive(2, 3)
    if gapped[22] & 0x07:  # kafka-python's builder leaves records uncompressed where that is smaller
        # Apache Kafka 4.4 fails a compressed one with UNKNOWN_SERVER_ERROR, stores an uncompressed one
        assert rejected(gapped, with_offsets=False) == (UNKNOWN_SERVER_ERROR, not_consecutive(2, 3)[1])
    else:
        assert validate_produced(gapped).records_count == 3
    compressed_gap = raw_batch([record(0), record(2)], compression=compression)
    assert rejected(compressed_gap) == not_consecutive(1, 2)
    if compression:
        assert rejected(compressed_gap, with_offsets=False) == (UNKNOWN_SERVER_ERROR, not_consecutive(1, 2)[1])


@pytest.mark.parametrize('compression', CODECS, ids=CODECS.values())
def test_a_wrong_last_offset_delta_is_invalid(compression):
    batch = build_batch([(None, b'a'), (None, b'b'), (None, b'c')], compression=compression)
    for last in (1, 3, 5):
        wrong = with_header(batch, last_offset_delta=last)
        expected = (INVALID_RECORD, f'the offset range of {last + 1} does not match the record count 3')
        assert rejected(wrong) == rejected(wrong, with_offsets=False) == expected  # Kafka's check, on every path
    expected = (INVALID_RECORD, 'the batch has an invalid offset range: last offset delta -1')
    assert rejected(with_header(batch, last_offset_delta=-1)) == expected


@pytest.mark.parametrize('compression', CODECS, ids=CODECS.values())
def test_a_non_zero_first_delta_is_corrupt(compression):
    built = build_batch([(None, b'a'), (None, b'b'), (None, b'c')], offset_deltas=[1, 2, 3], compression=compression)
    assert rejected(with_header(built, last_offset_delta=2)) == not_consecutive(0, 1)
    assert rejected(raw_batch([record(-1), record(0)], compression=compression)) == not_consecutive(0, -1)


@pytest.mark.parametrize('compression', CODECS, ids=CODECS.values())
def test_repeated_and_decreasing_deltas_are_corrupt(compression):
    assert rejected(raw_batch([record(0), record(1), record(1)], compression=compression)) == not_consecutive(2, 1)
    assert rejected(raw_batch([record(0), record(-1)], compression=compression)) == not_consecutive(1, -1)
    late = [record(i) for i in range(100)] + [record(8191)]  # 2-byte deltas decoded inline
    assert rejected(raw_batch(late, compression=compression)) == not_consecutive(100, 8191)


# -- rejected: the record framing ------------------------------------------------------------------------


@pytest.mark.parametrize('compression', CODECS, ids=CODECS.values())
def test_broken_record_framing_is_invalid(compression):
    def check(records: list[bytes], message: str, **header: int) -> None:
        batch = raw_batch(records, compression=compression, **header)
        assert rejected(batch) == rejected(batch, with_offsets=False) == (INVALID_RECORD, message)

    good = record(0, b'a')
    for negative in (-5, -100, -10_000):  # lengths of one, two and three varint bytes
        check([good, record(1, length=varint(negative))], 'record 1 has a negative length')
    short = 'record 1 does not fill its length of 2 bytes exactly'
    check([good, record(1, length=varint(2))], short)
    check([good, record(1, length=b'\x84\x00')], short)  # 2 in two bytes
    check([good, record(1, length=b'\x84\x80\x00')], short)
    check([good, record(1), record(2, b'tail')], 'bytes follow the last of the 2 records', count=2)
    check([good, record(1)], 'the batch ends after 2 of its 3 records', count=3)
    check([good], 'the batch ends after 1 of its 2 records', count=2)
    check([record(0, b'a', length=varint(100)), record(1)], 'record 0 runs past the end of the batch')
    check([good, record(1, b'b', length=varint(len(good) + 10))], 'record 1 runs past the end of the batch')
    check([good, record(1, b'b' * 100, length=varint(120))], 'record 1 runs past the end of the batch')
    check([good, b'\x0c'], 'record 1 runs past the end of the batch')
    check([good, record(1, delta_bytes=b'\x82\x80\x80\x80\x80\x00')], 'record 1 has a varint longer than 5 bytes')


def test_a_gzip_batch_of_several_members_is_read_whole():
    records = [record(0, b'a'), record(1, b'b'), record(2, b'c')]
    payload = codec.gzip_encode(records[0]) + codec.gzip_encode(b''.join(records[1:]))
    batch = raw_batch(records, compression=1, payload=payload)
    assert [r.value for r in iter_records(batch)] == [b'a', b'b', b'c']
    assert validate_produced(batch, with_offsets=True).records_count == 3
    wrong = raw_batch([*records, record(3)], compression=1, payload=payload + codec.gzip_encode(record(2)))
    assert rejected(wrong) == not_consecutive(3, 2)


@pytest.mark.parametrize('compression', [1, 3, 4], ids=['gzip', 'lz4', 'zstd'])
def test_an_undecompressable_batch_is_refused_as_kafka_refuses_it(compression):
    code, message = rejected(raw_batch([record(0)], compression=compression, payload=b'not compressed at all'))
    assert code == UNKNOWN_SERVER_ERROR  # Apache Kafka 4.4's answer (its decompression exception has no error code)
    assert message.startswith(f'cannot decompress the {CODECS[compression]} records: ')


# -- over the wire ---------------------------------------------------------------------------------------


@pytest.mark.parametrize('compression', CODECS, ids=CODECS.values())
def test_the_broker_answers_produce_with_offsets_by_these_rules(reference_cluster_factory, compression):
    tp = TopicPartition('t', 0)
    cluster = reference_cluster_factory(brokers=1)
    cluster.create_topic('t', 1, 1)

    def produce(records: bytes):
        with WireClient(cluster.brokers()[0]) as wire:
            response = wire.request(produce_request('t', 0, records, use_offset=True))
        return response.responses[0].partition_responses[0]

    def batch(base_offset: int, *values: bytes, deltas: list[int] | None = None) -> bytes:
        return build_batch([(None, v) for v in values], base_offset=base_offset, offset_deltas=deltas,
                           compression=compression)

    first = produce(batch(10, b'a', b'b', b'c'))
    assert (first.error_code, first.base_offset, first.log_end_offset) == (NONE, 10, 13)
    gapped = produce(with_header(batch(20, b'd', b'e', deltas=[0, 2]), last_offset_delta=1))
    assert (gapped.error_code, gapped.error_message) == not_consecutive(1, 2)
    no_last = produce(with_header(batch(20, b'd', b'e'), last_offset_delta=4))
    assert (no_last.error_code, no_last.error_message) == (
        INVALID_RECORD, 'the offset range of 5 does not match the record count 2')
    below = produce(batch(12, b'x'))
    assert (below.error_code, below.log_end_offset) == (INVALID_PRODUCE_OFFSET, 13)
    after_gap = produce(batch(20, b'd', b'e'))
    assert (after_gap.error_code, after_gap.base_offset, after_gap.log_end_offset) == (NONE, 20, 22)
    assert [(r.offset, r.value) for r in cluster.records(tp)] == [
        (10, b'a'), (11, b'b'), (12, b'c'), (20, b'd'), (21, b'e')]
    assert cluster.internal_errors == []
