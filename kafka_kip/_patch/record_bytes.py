"""The record bytes of a v2 batch, read from kafka-python's ``DefaultRecordBatch`` (``_buffer``, ``_pos``).

kafka-python parses the batch header and decompresses the records (when it is iterated) but has no public
way to get at the record bytes, which kafka_kip's compiled decoder reads directly. Read-only: nothing in
kafka-python changes. The tripwire builds a small batch with kafka-python's own builder, uncompressed and
gzip-compressed, and checks that the two attributes still hold the records where the decoder expects them.
"""
from __future__ import annotations

import operator
from collections.abc import Callable

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafka_kip._patch.rebind import require_behaviour

RecordBytes = Callable[[DefaultRecordBatch], tuple[bytearray, int]]

_GZIP = DefaultRecordBatch.CODEC_GZIP


def _built(compression_type: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression_type, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1024)
    for offset in range(3):
        builder.append(offset, timestamp=1, key=b'key', value=b'value' * 40, headers=[])
    return bytes(builder.build())


def _check(record_bytes: RecordBytes) -> str | None:
    """What is wrong with the bytes ``record_bytes`` finds in a plain and a decompressed batch (None: nothing)."""
    plain = _built(DefaultRecordBatch.CODEC_NONE)
    header_size = DefaultRecordBatch.HEADER_STRUCT.size
    unread = record_bytes(DefaultRecordBatch(plain))
    compressed = DefaultRecordBatch(_built(_GZIP))
    iter(compressed)  # decompresses
    buffer, start = record_bytes(compressed)
    if (bytes(unread[0]), unread[1]) != (plain, header_size) or bytes(buffer[start:]) != plain[header_size:]:
        return 'other bytes'
    return None


def install() -> RecordBytes:
    """``batch -> (buffer, start)``: the records of ``batch`` are ``buffer[start:]`` (decompressed once the
    batch has been iterated). Raises KafkaPythonChanged if kafka-python no longer keeps them there."""
    record_bytes = operator.attrgetter('_buffer', '_pos')
    require_behaviour(lambda: _check(record_bytes),
                      'DefaultRecordBatch no longer holds its (decompressed) records in _buffer/_pos')
    return record_bytes


__all__ = ['RecordBytes', 'install']
