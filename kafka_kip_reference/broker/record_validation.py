"""Validation of a produced partition payload, as Apache Kafka's ``LogValidator`` and the checks before it do.

Every produce path (plain, idempotent, transactional, KIP-391 ``use_offset``) runs :func:`validate_batch` before
anything is appended, in Kafka's order:

1. framing (``ProduceRequest.validateRecords``): exactly one v2 batch; bytes after it that cannot form another
   batch are dropped, as Kafka's batch iterator drops them;
2. the batch (``UnifiedLog.analyzeAndValidateRecords``): base offset 0 (not for ``use_offset``), size within the
   topic's ``max.message.bytes``, CRC, a known codec;
3. the header (``LogValidator.validateBatch``): record count equal to the offset range, no control batch, a
   base sequence for a producer id;
4. every record (``LogValidator.validateRecord``), decompressed in pieces (:mod:`kafka_kip_reference.broker.decompression`)
   and walked without building records (:mod:`kafka_kip._codec.record_walk`): the record structure and count,
   keys on compacted topics, timestamps within ``message.timestamp.before.max.ms`` / ``after.max.ms``, and
   consecutive offset deltas for compressed and ``use_offset`` batches.

A refused batch raises :class:`InvalidBatch` (:class:`RecordErrors` when Kafka names the records) with the error
code Apache Kafka 4.4 answers for the same bytes; docs/SECURITY.md lists them. Nothing is appended.
"""
from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass

from crc32c import crc32c

from kafka_kip._codec.record_walk import MalformedRecords, RecordWalk
from kafka_kip.protocol import constants
from kafka_kip.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LENGTH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidBatch,
    parse_header,
)
from kafka_kip_reference.broker.batches import iter_records
from kafka_kip_reference.broker.config import MAX_UNCOMPRESSED_BATCH_BYTES, BrokerConfig
from kafka_kip_reference.broker.decompression import inflate
from kafka_kip_reference.broker.model import Topic

#: Kafka reads a batch's size and magic from its first 17 bytes; a remainder shorter than that is no batch.
_SIZE_AND_MAGIC = 17
_MAGIC_OFFSET = 16
_MIN_RECORD_OVERHEAD = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest size a batch may declare
#: Decompressed bytes walked between two chances for the broker to serve other connections.
PIECE_BYTES = 1 << 20


class RecordErrors(InvalidBatch):
    """A batch refused for some of its records: ``record_errors`` is ``[(index in the batch, message), ...]``."""

    def __init__(self, error_code: int, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(error_code, message)
        self.record_errors = record_errors


@dataclass(frozen=True)
class ValidationRules:
    """What a partition's configs and the request ask of a batch.

    ``now_ms`` is the broker's clock for the timestamp rules; ``max_uncompressed_bytes`` bounds the work of one
    batch (``reference.max.uncompressed.batch.bytes``, the reference cluster's own config).
    """

    partition: str
    max_message_bytes: int
    max_uncompressed_bytes: int
    now_ms: int
    compacted: bool = False
    log_append_time: bool = False
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 2**63 - 1
    with_offsets: bool = False


@dataclass(frozen=True)
class ValidatedBatch:
    """A batch that may be appended: its header and its bytes (without any ignored trailing bytes)."""

    header: BatchHeader
    records: bytes


def validate_batch(records: bytes, rules: ValidationRules) -> ValidatedBatch:
    """Validate ``records`` in one go (see the module docstring); InvalidBatch if Kafka would refuse them."""
    validation = _Validation(records, rules)
    for _ in validation.steps():
        pass
    return validation.result


async def validate_batch_async(records: bytes, rules: ValidationRules, large_batches: asyncio.Lock) -> ValidatedBatch:
    """:func:`validate_batch`, letting the broker serve other connections between the pieces of a compressed batch
    larger than one piece. Such batches take ``large_batches`` (one lock per cluster) for the rest of their
    validation, so their memory (at most ``max_uncompressed_bytes``) is held by one of them at a time."""
    validation = _Validation(records, rules)
    steps = validation.steps()
    for _ in steps:  # only a batch of more than one piece gets here
        async with large_batches:
            for _ in steps:
                await asyncio.sleep(0)
    return validation.result


def rules_for(topic: Topic, config: BrokerConfig, partition: int, now_ms: int, with_offsets: bool,
              broker_id: int | None = None) -> ValidationRules:
    """The rules a batch for ``partition`` of ``topic`` is validated by, from its configs as broker ``broker_id``
    (the leader appending it) applies them."""
    def value(name: str) -> str:
        return topic.config(name, broker_id)
    return ValidationRules(
        partition=f'{topic.name}-{partition}', max_message_bytes=int(value('max.message.bytes')),
        max_uncompressed_bytes=config.int(MAX_UNCOMPRESSED_BATCH_BYTES), now_ms=now_ms,
        compacted='compact' in value('cleanup.policy').split(','),
        log_append_time=value('message.timestamp.type') == 'LogAppendTime',
        timestamp_before_max_ms=int(value('message.timestamp.before.max.ms')),
        timestamp_after_max_ms=int(value('message.timestamp.after.max.ms')), with_offsets=with_offsets)


class _Validation:
    """One batch's validation; :meth:`steps` yields between decompressed pieces and leaves :attr:`result`."""

    def __init__(self, records: bytes, rules: ValidationRules) -> None:
        self.records = records
        self.rules = rules
        self.result: ValidatedBatch | None = None

    def steps(self) -> Generator[None, None, None]:
        rules = self.rules
        records = _single_batch(self.records)
        header = parse_header(records)
        _check_batch(records, header, rules)
        walk = RecordWalk(header.records_count)
        compression = header.attributes & COMPRESSION_MASK
        try:
            if compression:
                buffer = bytearray()
                pieces = inflate(compression, memoryview(records)[HEADER_SIZE:], rules.max_uncompressed_bytes,
                                 PIECE_BYTES)
                for number, piece in enumerate(pieces):
                    if number:
                        yield  # a large batch: let other connections in before the next piece
                    buffer += piece
                    del buffer[:walk.feed(buffer, 0, False)]
                walk.feed(buffer, 0, True)
            else:
                walk.feed(records, HEADER_SIZE, True)
        except MalformedRecords as exc:
            raise InvalidBatch(constants.INVALID_RECORD, str(exc)) from None
        _check_records(records, header, walk, compression, rules)
        self.result = ValidatedBatch(header, records)


def _single_batch(records: bytes) -> bytes:
    """The one batch of a partition payload, as Kafka's ``ProduceRequest.validateRecords`` finds it."""
    first = _batch_size(records, 0)
    if first is None:
        raise InvalidBatch(constants.INVALID_RECORD,
                           'produce requests must contain exactly one complete record batch')
    if records[_MAGIC_OFFSET] != 2:
        raise InvalidBatch(constants.INVALID_RECORD,
                           f'record batches must have magic 2, not {records[_MAGIC_OFFSET]}')
    if first == len(records):
        return records
    if _batch_size(records, first) is not None:
        raise InvalidBatch(constants.INVALID_RECORD, 'produce requests must contain exactly one record batch')
    return records[:first]  # the rest cannot be a batch: Kafka's batch iterator ignores it


def _batch_size(records: bytes, pos: int) -> int | None:
    """The size of the batch at ``pos``, or None when the bytes from there cannot hold one (not a batch)."""
    remaining = len(records) - pos
    if remaining < _SIZE_AND_MAGIC:
        return None
    size = int.from_bytes(records[pos + 8:pos + 12], 'big', signed=True) + LENGTH_OVERHEAD
    if size < _MIN_RECORD_OVERHEAD:
        raise InvalidBatch(constants.CORRUPT_MESSAGE,
                           f'record batch size {size} is less than the minimum record overhead '
                           f'({_MIN_RECORD_OVERHEAD})')
    magic = records[pos + _MAGIC_OFFSET]
    if magic > 2:
        raise InvalidBatch(constants.CORRUPT_MESSAGE, f'Invalid magic found in record: {magic}')
    return size if size <= remaining else None


def _check_batch(records: bytes, header: BatchHeader, rules: ValidationRules) -> None:
    """Kafka's checks of the batch as a whole (``analyzeAndValidateRecords``, ``LogValidator.validateBatch``)."""
    if not rules.with_offsets and header.base_offset != 0:
        raise InvalidBatch(constants.INVALID_RECORD,
                           f'the base offset of a produced batch must be 0, not {header.base_offset}')
    if header.size > rules.max_message_bytes:
        raise InvalidBatch(constants.MESSAGE_TOO_LARGE,
                           f'the batch of {header.size} bytes exceeds max.message.bytes '
                           f'{rules.max_message_bytes}')
    if crc32c(memoryview(records)[ATTRIBUTES_OFFSET:]) != header.crc:
        raise InvalidBatch(constants.CORRUPT_MESSAGE, 'record batch CRC mismatch')
    compression = header.attributes & COMPRESSION_MASK
    if compression > 4:
        raise InvalidBatch(constants.UNKNOWN_SERVER_ERROR, f'unknown compression codec id {compression}')
    if header.last_offset_delta + 1 <= 0:
        raise InvalidBatch(constants.INVALID_RECORD,
                           f'the batch has an invalid offset range: last offset delta '
                           f'{header.last_offset_delta}')
    if header.records_count <= 0:
        raise InvalidBatch(constants.INVALID_RECORD, f'invalid record count {header.records_count}')
    if header.last_offset_delta + 1 != header.records_count:
        raise InvalidBatch(constants.INVALID_RECORD,
                           f'the offset range of {header.last_offset_delta + 1} does not match the '
                           f'record count {header.records_count}')
    if header.attributes & CONTROL_MASK:
        raise InvalidBatch(constants.INVALID_RECORD, 'clients may not produce control batches')
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidBatch(constants.INVALID_RECORD,
                           f'invalid sequence number {header.base_sequence} for producer id '
                           f'{header.producer_id}')


def _check_records(records: bytes, header: BatchHeader, walk, compression: int, rules: ValidationRules) -> None:
    """Offset deltas, keys and timestamps of the walked records."""
    if walk.gap_index >= 0:
        message = (f'record offsets within the batch are not consecutive: record {walk.gap_index} has offset delta '
                   f'{walk.gap_delta}')
        if rules.with_offsets:
            raise InvalidBatch(constants.CORRUPT_MESSAGE, message)
        if compression:  # Kafka 4.4 fails this batch with an exception it does not map to an error code
            raise InvalidBatch(constants.UNKNOWN_SERVER_ERROR, message)
    log_append_batch = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    if walk.null_keys and rules.compacted or not _timestamps_allowed(header, walk, log_append_batch, rules):
        _refuse_records(records, header, log_append_batch, rules)


def _timestamps_allowed(header: BatchHeader, walk, log_append_batch: bool, rules: ValidationRules) -> bool:
    """True when no record's timestamp can be refused (the walk's extremes are within the window)."""
    if rules.log_append_time:
        return not log_append_batch
    if log_append_batch:
        if header.max_timestamp == constants.NO_TIMESTAMP:
            return False
        lowest = highest = header.max_timestamp
    else:
        lowest = header.base_timestamp + walk.min_timestamp_delta
        highest = header.base_timestamp + walk.max_timestamp_delta
    return (rules.now_ms - lowest <= rules.timestamp_before_max_ms
            and highest - rules.now_ms <= rules.timestamp_after_max_ms)


def _refuse_records(records: bytes, header: BatchHeader, log_append_batch: bool, rules: ValidationRules) -> None:
    """Raise RecordErrors naming every refused record, as Kafka's ``processRecordErrors`` does."""
    errors = []
    timestamp_error = False
    low = rules.now_ms - rules.timestamp_before_max_ms
    high = rules.now_ms + rules.timestamp_after_max_ms
    for index, record in enumerate(iter_records(records)):
        timestamp = header.max_timestamp if log_append_batch else record.timestamp
        if rules.compacted and record.key is None:
            errors.append((index, f'Compacted topic cannot accept message without key in topic partition '
                                  f'{rules.partition}'))
        elif not rules.log_append_time and timestamp != constants.NO_TIMESTAMP:
            if not low <= timestamp <= high:
                timestamp_error = True
                errors.append((index, f'Timestamp {timestamp} of message with offset {record.offset} is out of '
                                      f'range. The timestamp should be within [{low}, {high}]'))
        elif log_append_batch:
            timestamp_error = True
            errors.append((index, 'Invalid timestamp type in message. Producer should not set timestamp type to '
                                  'LogAppendTime.'))
    if not errors:
        return
    if timestamp_error:
        raise RecordErrors(constants.INVALID_TIMESTAMP,
                           'One or more records have been rejected due to invalid timestamp', errors)
    raise RecordErrors(constants.INVALID_RECORD,
                       f'One or more records have been rejected due to {len(errors)} record errors '
                       f'in total, and only showing the first three errors at most: '
                       f'{[message for _, message in errors[:3]]}', errors)
