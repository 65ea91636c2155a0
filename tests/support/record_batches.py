"""v2 record batches for the codec tests, built with kafka-python's own builder, and hypothesis strategies.

A batch is built as a producer builds it and then stamped as a broker would store it: base offset, leader
epoch, and optionally the log-append-time, transactional and control attributes (with the CRC recomputed).
"""
from __future__ import annotations

import random
import struct
from collections import namedtuple
from dataclasses import dataclass, field

from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

CODECS = {'none': 0, 'gzip': 1, 'snappy': 2, 'lz4': 3, 'zstd': 4}
AbortedTransaction = namedtuple('AbortedTransaction', ['producer_id', 'first_offset'])

_HEADER = DefaultRecordBatch.HEADER_STRUCT
_ATTRIBUTES_OFFSET = DefaultRecordBatch.ATTRIBUTES_OFFSET
_CRC_OFFSET = DefaultRecordBatch.CRC_OFFSET
_LAST_OFFSET_DELTA_OFFSET = struct.calcsize('>qiibIh')
_MAX_TIMESTAMP_OFFSET = struct.calcsize('>qiibIhiq')


@dataclass(frozen=True)
class Record:
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(frozen=True)
class Batch:
    records: list[Record]
    codec: str = 'none'
    base_offset: int = 0
    leader_epoch: int = 0
    producer_id: int = -1
    control: bool = False
    log_append_time: int | None = None  # the broker's timestamp, if the topic uses LogAppendTime
    offset_step: int = 1  # > 1: gaps between the records, as compaction leaves them
    compacted_tail: int = 0  # offsets after the last record that compaction removed (the batch still spans them)

    @property
    def next_offset(self) -> int:
        return self.base_offset + (len(self.records) - 1) * self.offset_step + 1 + self.compacted_tail


def fix_crc(raw: bytearray, start: int = 0) -> None:
    """Recompute the CRC of the batch at ``raw[start:]`` (after changing bytes it covers)."""
    length = struct.unpack_from('>i', raw, start + 8)[0]
    end = start + 12 + length
    struct.pack_into('>I', raw, start + _CRC_OFFSET, calc_crc32c(memoryview(raw)[start + _ATTRIBUTES_OFFSET:end]))


def build(batch: Batch) -> bytes:
    """The batch as a broker stores it, built by kafka-python's DefaultRecordBatchBuilder."""
    transactional = batch.producer_id >= 0
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[batch.codec], is_transactional=transactional,
        producer_id=batch.producer_id, producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1, batch_size=1 << 30)
    for index, record in enumerate(batch.records):
        builder.append(index * batch.offset_step, record.timestamp, record.key, record.value, record.headers)
    raw = builder.build()
    struct.pack_into('>q', raw, 0, batch.base_offset)
    struct.pack_into('>i', raw, 12, batch.leader_epoch)
    if batch.compacted_tail:
        struct.pack_into('>i', raw, _LAST_OFFSET_DELTA_OFFSET, batch.next_offset - 1 - batch.base_offset)
        fix_crc(raw)
    if batch.control or batch.log_append_time is not None:
        attributes = struct.unpack_from('>h', raw, _ATTRIBUTES_OFFSET)[0]
        if batch.control:
            attributes |= DefaultRecordBatch.CONTROL_MASK
        if batch.log_append_time is not None:
            attributes |= DefaultRecordBatch.TIMESTAMP_TYPE_MASK
            struct.pack_into('>q', raw, _MAX_TIMESTAMP_OFFSET, batch.log_append_time)
        struct.pack_into('>h', raw, _ATTRIBUTES_OFFSET, attributes)
        fix_crc(raw)
    return bytes(raw)


def control_batch(base_offset: int, producer_id: int, commit: bool, leader_epoch: int = 0) -> Batch:
    """A transaction marker (one control record: version 0, type 1 = commit, 0 = abort)."""
    marker = Record(timestamp=0, key=struct.pack('>hh', 0, 1 if commit else 0), value=b'\x00\x00\x00\x00\x00\x00')
    return Batch([marker], base_offset=base_offset, leader_epoch=leader_epoch, producer_id=producer_id, control=True)


def fetched(batches: list[Batch]) -> bytes:
    """The records field of a FetchResponse holding ``batches``."""
    return b''.join(build(batch) for batch in batches)


#: the ways :func:`corrupted` spoils a fetch
CORRUPTIONS = ('flip', 'flip-and-fix-crc', 'truncate', 'garbage-after', 'pad-inside', 'recount')


def corrupted(batches: list[Batch], seed: int, how: str) -> bytes:
    """The fetch of ``batches`` spoilt ``how`` (one of :data:`CORRUPTIONS`), at places ``seed`` picks."""
    raw = bytearray(fetched(batches))
    rng = random.Random(seed)
    if how == 'truncate':
        del raw[rng.randrange(1, len(raw)):]
    elif how == 'garbage-after':
        raw += rng.randbytes(rng.randrange(1, 80))
    elif how == 'pad-inside':  # bytes after the last record of the first batch, inside its length and CRC
        end = len(build(batches[0]))
        raw[end:end] = rng.randbytes(rng.randrange(1, 5))
        struct.pack_into('>i', raw, 8, struct.unpack_from('>i', raw, 8)[0] + len(raw) - len(fetched(batches)))
        fix_crc(raw)
    elif how == 'recount':  # a record count that does not match the records
        count_at = 57
        struct.pack_into('>i', raw, count_at, struct.unpack_from('>i', raw, count_at)[0] + rng.choice([-1, 1, 1000]))
        fix_crc(raw)
    else:
        first_length = len(build(batches[0]))
        for _ in range(rng.randrange(1, 4)):
            raw[rng.randrange(61, first_length)] = rng.randrange(256)  # records of the first batch
        if how == 'flip-and-fix-crc':
            fix_crc(raw)
    return bytes(raw)


def batch_kind(batch) -> str:
    """'OffsetProducerBatch', or 'ProducerBatch' for a batch of plain records (kafka-python's class, or the
    compiled codec's subclass of it)."""
    from kafka_kip.producer.batch import OffsetProducerBatch
    return 'OffsetProducerBatch' if isinstance(batch, OffsetProducerBatch) else 'ProducerBatch'


# -- strategies -------------------------------------------------------------------------------------------

_payload = st.one_of(st.none(), st.binary(max_size=300))
_header = st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40)))
_first_timestamp = st.integers(min_value=-1, max_value=1 << 42)


@st.composite
def records(draw: st.DrawFn, max_records: int = 12) -> list[Record]:
    first = draw(_first_timestamp)
    return draw(st.lists(st.builds(Record, timestamp=st.integers(first - 1000, first + 10**9), key=_payload,
                                   value=_payload, headers=st.lists(_header, max_size=3)),
                         min_size=1, max_size=max_records))


@st.composite
def batch_lists(draw: st.DrawFn, max_batches: int = 4) -> list[Batch]:
    """Consecutive batches of any codec and shape, starting at a random offset; some from a transactional
    producer with commit/abort markers, some with LogAppendTime, some compacted (gaps between records, records
    removed from the end of the batch, batches removed between batches)."""
    offset = draw(st.integers(min_value=0, max_value=1 << 40))
    batches = []
    for _ in range(draw(st.integers(min_value=1, max_value=max_batches))):
        kind = draw(st.sampled_from(['plain', 'plain', 'transactional', 'marker']))
        producer_id = draw(st.integers(min_value=0, max_value=3)) if kind != 'plain' else -1
        epoch = draw(st.integers(min_value=-1, max_value=5))
        if kind == 'marker':
            batch = control_batch(offset, producer_id, commit=draw(st.booleans()), leader_epoch=epoch)
        else:
            batch = Batch(draw(records()), codec=draw(st.sampled_from(sorted(CODECS))), base_offset=offset,
                          leader_epoch=epoch, producer_id=producer_id,
                          log_append_time=draw(st.one_of(st.none(), _first_timestamp)),
                          offset_step=draw(st.sampled_from([1, 1, 1, 2])),
                          compacted_tail=draw(st.sampled_from([0, 0, 0, 2])))
        batches.append(batch)
        offset = batch.next_offset + draw(st.sampled_from([0, 0, 0, 3]))  # sometimes a gap (compaction)
    return batches
