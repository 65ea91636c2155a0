"""Malformed and hostile produce payloads, each with the error code Apache Kafka 4.4 answers it with.

Built byte by byte where kafka-python's builder cannot make the case. :data:`CASES` is what the reference
cluster's validation is checked against (tests/test_ref_record_validation.py) and what the conformance matrix
sends to every broker (integration/test_produce_validation.py); the expected codes were measured on Apache Kafka
4.4 (KRaft, default configs, produce v9, acks=1).

    from kafka_kip.testing.hostile_batches import CASES
    for case in CASES:
        payload = case.payload(now_ms)       # the partition's records field of a ProduceRequest
        case.expected_error                  # Kafka's error code (0: Kafka stores it)
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from crc32c import crc32c
from kafka import codec

from kafka_kip.protocol.constants import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    INVALID_TIMESTAMP,
    NONE,
    UNKNOWN_SERVER_ERROR,
)

_BODY = struct.Struct('>hiqqqhii')  # attributes .. records_count: the CRC-covered header fields
_PREFIX = struct.Struct('>qiibI')  # base_offset, length, partition_leader_epoch, magic, crc
_ENCODERS = {1: codec.gzip_encode, 2: codec.snappy_encode, 3: codec.lz4_encode, 4: codec.zstd_encode}
LOG_APPEND_TIME_FLAG = 0x08
CONTROL_FLAG = 0x20
HOUR_MS = 3_600_000

#: The kinds of topic a case is sent to: Kafka's defaults, ``cleanup.policy=compact``,
#: ``message.timestamp.type=LogAppendTime``.
PLAIN, COMPACTED, LOG_APPEND_TIME = 'plain', 'compacted', 'log-append-time'
TOPIC_CONFIGS = {PLAIN: {}, COMPACTED: {'cleanup.policy': 'compact'},
                 LOG_APPEND_TIME: {'message.timestamp.type': 'LogAppendTime'}}


def varint(value: int) -> bytes:
    """Kafka's zigzag varint."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append(zigzag & 0x7F | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def record(offset_delta: int, value: bytes = b'v', *, timestamp_delta: int = 0, delta_bytes: bytes | None = None,
           length: bytes | None = None, key: bytes | None = None, key_size: int | None = None,
           value_size: int | None = None, header_count: int = 0) -> bytes:
    """One record: length, attributes, timestamp delta, offset delta, key, value, headers (none unless
    ``header_count`` says otherwise). The ``*_size``/``length``/``delta_bytes`` arguments write a field as given."""
    if key_size is None:
        key_size = -1 if key is None else len(key)
    key_field = varint(key_size) + (key or b'')
    value_field = varint(len(value) if value_size is None else value_size) + value
    body = (b'\0' + varint(timestamp_delta) + (varint(offset_delta) if delta_bytes is None else delta_bytes)
            + key_field + value_field + varint(header_count))
    return (varint(len(body)) if length is None else length) + body


def raw_batch(records: list[bytes], *, compression: int = 0, count: int | None = None,
              last_offset_delta: int | None = None, base_offset: int = 0, payload: bytes | None = None,
              attributes: int | None = None, base_timestamp: int = 1000, max_timestamp: int | None = None,
              producer: tuple[int, int, int] = (-1, -1, -1), magic: int = 2, good_crc: bool = True) -> bytes:
    """A batch around ``records`` (compressed with ``compression``), or around a raw ``payload``, with its CRC
    (a wrong one unless ``good_crc``); every header field can be given."""
    if payload is None:
        payload = b''.join(records)
        if compression:
            payload = _ENCODERS[compression](payload)
    count = len(records) if count is None else count
    last_offset_delta = count - 1 if last_offset_delta is None else last_offset_delta
    attributes = compression if attributes is None else attributes
    max_timestamp = base_timestamp if max_timestamp is None else max_timestamp
    body = _BODY.pack(attributes, last_offset_delta, base_timestamp, max_timestamp, *producer, count) + payload
    crc = crc32c(body) ^ (0 if good_crc else 1)
    return _PREFIX.pack(base_offset, len(body) + 9, -1, magic, crc) + body


@dataclass(frozen=True)
class HostileBatch:
    """One case: ``payload(now_ms)`` sent to a topic of ``topic_kind`` is answered ``expected_error`` by Kafka.

    ``record_errors`` is how many records Kafka names in the response's ``record_errors``.
    """

    name: str
    payload: Callable[[int], bytes]
    expected_error: int
    topic_kind: str = PLAIN
    record_errors: int = 0


def _three(**fields) -> Callable[[int], bytes]:
    """Three well-formed records ('a', 'b', 'c') in a batch with ``fields``; ``now`` timestamps by default."""
    def build(now_ms: int) -> bytes:
        values = fields.copy()
        records = values.pop('records', [record(0, b'a'), record(1, b'b'), record(2, b'c')])
        values.setdefault('base_timestamp', now_ms)
        return raw_batch(records, **values)
    return build


def _with_base_timestamp(offset_ms: int, **fields) -> Callable[[int], bytes]:
    """Three records stamped ``offset_ms`` after the broker's clock."""
    return lambda now_ms: _three(base_timestamp=now_ms + offset_ms, **fields)(now_ms)


def _garbage_payload(compression: int) -> Callable[[int], bytes]:
    return _three(attributes=compression, payload=b''.join([record(0, b'a'), record(1, b'b'), record(2, b'c')]))


def _truncated(compression: int) -> Callable[[int], bytes]:
    whole = _ENCODERS[compression](b''.join([record(0, b'a'), record(1, b'b'), record(2, b'c')]))
    return _three(attributes=compression, payload=whole[:-4])


def _then(first: Callable[[int], bytes], tail: bytes | Callable[[int], bytes]) -> Callable[[int], bytes]:
    return lambda now_ms: first(now_ms) + (tail(now_ms) if callable(tail) else tail)


def _cases() -> list[HostileBatch]:
    cases = [HostileBatch('well-formed', _three(), NONE)]
    for compression, name in ((0, 'uncompressed'), (1, 'gzip'), (4, 'zstd')):
        c = {'compression': compression}
        cases += [
            HostileBatch(f'{name}: count 4, 3 records', _three(count=4, **c), INVALID_RECORD),
            HostileBatch(f'{name}: count 2, 3 records', _three(count=2, **c), INVALID_RECORD),
            HostileBatch(f'{name}: last offset delta 5 of 3 records', _three(last_offset_delta=5, **c),
                         INVALID_RECORD),
            HostileBatch(f'{name}: count 0', _three(records=[], count=0, **c), INVALID_RECORD),
            HostileBatch(f'{name}: count -1', _three(count=-1, last_offset_delta=2, **c), INVALID_RECORD),
            HostileBatch(f'{name}: control batch', _three(attributes=compression | CONTROL_FLAG, **c), INVALID_RECORD),
            HostileBatch(f'{name}: producer id without a sequence', _three(producer=(5, 0, -1), **c),
                         INVALID_RECORD),
            HostileBatch(f'{name}: negative record length', _three(
                records=[record(0), record(1, length=varint(-5))], **c), INVALID_RECORD),
            HostileBatch(f'{name}: bytes after the last record', _three(
                records=[record(0), record(1), b'\0\1'], count=2, **c), INVALID_RECORD),
            HostileBatch(f'{name}: -3 headers', _three(records=[record(0), record(1, header_count=-3)], **c),
                         INVALID_RECORD),
            HostileBatch(f'{name}: value longer than its record', _three(
                records=[record(0), record(1, value_size=100)], **c), INVALID_RECORD),
            HostileBatch(f'{name}: key size -2 (null)', _three(records=[record(0), record(1, key_size=-2)], **c),
                         NONE),
            HostileBatch(f'{name}: timestamp 2 hours ahead', _with_base_timestamp(2 * HOUR_MS, **c),
                         INVALID_TIMESTAMP, record_errors=3),
            HostileBatch(f'{name}: timestamp -5', _three(base_timestamp=-5, **c), NONE),
            HostileBatch(f'{name}: log-append-time flag from a producer', _three(
                attributes=compression | LOG_APPEND_TIME_FLAG, **c), NONE),
            HostileBatch(f'{name}: null keys on a compacted topic', _three(**c), INVALID_RECORD, COMPACTED,
                         record_errors=3),
            HostileBatch(f'{name}: keyed records on a compacted topic', _three(
                records=[record(0, key=b'k'), record(1, key=b'k')], **c), NONE, COMPACTED),
            HostileBatch(f'{name}: log-append-time flag on a LogAppendTime topic', _three(
                attributes=compression | LOG_APPEND_TIME_FLAG, **c), INVALID_TIMESTAMP, LOG_APPEND_TIME,
                record_errors=3),
        ]
        gaps = NONE if compression == 0 else UNKNOWN_SERVER_ERROR  # Kafka 4.4 cannot rewrite compressed ones
        cases += [HostileBatch(f'{name}: offset deltas {deltas}', _three(
            records=[record(d, v) for d, v in zip(deltas, (b'a', b'b', b'c'), strict=True)], **c), gaps)
            for deltas in ((0, 2, 3), (0, 1, 1), (1, 2, 3))]
    for compression, name in ((1, 'gzip'), (2, 'snappy'), (3, 'lz4'), (4, 'zstd')):
        cases.append(HostileBatch(f'{name} flag on records that are not {name}', _garbage_payload(compression),
                                  UNKNOWN_SERVER_ERROR))
    for compression, name in ((1, 'gzip'), (3, 'lz4'), (4, 'zstd')):
        cases.append(HostileBatch(f'truncated {name}', _truncated(compression), UNKNOWN_SERVER_ERROR))
    cases += [HostileBatch(f'compression codec {codec_id}', _garbage_payload(codec_id), UNKNOWN_SERVER_ERROR)
              for codec_id in (5, 6, 7)]
    cases += [
        HostileBatch('gzip followed by garbage', _three(attributes=1, payload=codec.gzip_encode(
            b''.join([record(0, b'a'), record(1, b'b'), record(2, b'c')])) + b'garbage'), NONE),
        HostileBatch('two gzip members', _three(attributes=1, payload=codec.gzip_encode(record(0, b'a'))
                                                + codec.gzip_encode(record(1, b'b') + record(2, b'c'))), NONE),
        HostileBatch('magic 0', _three(magic=0), INVALID_RECORD),
        HostileBatch('magic 1', _three(magic=1), INVALID_RECORD),
        HostileBatch('magic 3', _three(magic=3), CORRUPT_MESSAGE),
        HostileBatch('wrong CRC', _three(good_crc=False), CORRUPT_MESSAGE),
        HostileBatch('base offset 5', _three(base_offset=5), INVALID_RECORD),
        HostileBatch('batch size 13', lambda now: _three()(now)[:8] + struct.pack('>i', 1) + _three()(now)[12:],
                     CORRUPT_MESSAGE),
        HostileBatch('two batches', _then(_three(), _three()), INVALID_RECORD),
        HostileBatch('a batch and a batch with a wrong CRC', _then(_three(), _three(good_crc=False)), INVALID_RECORD),
        HostileBatch('a batch and 3 bytes', _then(_three(), b'\0\0\0'), NONE),
        HostileBatch('a batch and a truncated batch', _then(_three(), lambda now: _three()(now)[:-3]), NONE),
        HostileBatch('a batch and 20 bytes with magic 7', _then(_three(), b'\0' * 8 + struct.pack('>i', 100)
                                                                 + b'\0' * 4 + b'\x07' + b'\0' * 3), CORRUPT_MESSAGE),
        HostileBatch('a truncated batch', lambda now: _three()(now)[:-3], INVALID_RECORD),
        HostileBatch('30 bytes of a batch', lambda now: _three()(now)[:30], INVALID_RECORD),
        HostileBatch('no bytes', lambda now: b'', INVALID_RECORD),
        HostileBatch('log-append-time flag, max timestamp -1', _three(
            attributes=LOG_APPEND_TIME_FLAG, base_timestamp=-1, max_timestamp=-1), INVALID_TIMESTAMP, record_errors=3),
        HostileBatch('timestamp 2 hours ahead on a LogAppendTime topic', _with_base_timestamp(2 * HOUR_MS), NONE,
                     LOG_APPEND_TIME),
        HostileBatch('count 2**31-1', _three(count=2**31 - 1, last_offset_delta=2**31 - 2), INVALID_RECORD),
    ]
    return cases


#: Every case, in a fixed order (names are unique).
CASES: list[HostileBatch] = _cases()
