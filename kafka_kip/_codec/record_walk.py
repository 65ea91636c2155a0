"""Walking the records of a v2 record batch as a broker validates them, without building record objects.

:class:`RecordWalk` checks the structure Kafka's ``DefaultRecord`` reader checks (length, attributes, timestamp
and offset deltas, key, value, headers, and that the fields fill the record's length exactly) and keeps what a
broker validates afterwards: whether the offset deltas are ``0..n-1``, the smallest and largest timestamp delta
and the records without a key. It takes the records in pieces (:meth:`RecordWalk.feed`), so a compressed batch
is walked while it is decompressed, a piece at a time.

The compiled walker (``kafka_kip._codec._record_walk``, built with the record codec) behaves exactly as
:class:`PyRecordWalk`; :data:`RecordWalk` is the compiled one when it is available (and
``KAFKA_KIP_PURE_PYTHON`` is not set).
"""
from __future__ import annotations

import os

from kafka_kip._codec import PURE_PYTHON_ENV
from kafka_kip._codec.malformed import Finding, MalformedRecords

#: Kafka's two zigzag varint widths: bits -> (name, most bytes, mask)
_WIDTHS = {32: ('varint', 5, 0xFFFFFFFF), 64: ('varlong', 10, 0xFFFFFFFFFFFFFFFF)}
#: Zigzag-decoded value of a one-byte varint, by byte.
_ZIGZAG = tuple((byte >> 1) ^ -(byte & 1) for byte in range(128))


class PyRecordWalk:
    """The records of one batch that declares ``count`` records, walked piece by piece.

    After the walk: ``walked`` records were read; ``gap_index`` is the first record whose offset delta is not its
    index (-1 if none; ``gap_delta`` is its delta); ``min_timestamp_delta`` / ``max_timestamp_delta`` bound the
    timestamp deltas; ``null_keys`` records have no key, the first of them ``first_null_key`` (-1 if none).
    """

    __slots__ = ('count', 'walked', 'gap_index', 'gap_delta', 'min_timestamp_delta', 'max_timestamp_delta',
                 'null_keys', 'first_null_key')

    def __init__(self, count: int) -> None:
        self.count = count
        self.walked = 0
        self.gap_index = -1
        self.gap_delta = 0
        self.min_timestamp_delta = 0
        self.max_timestamp_delta = 0
        self.null_keys = 0
        self.first_null_key = -1

    def feed(self, data: bytes | bytearray | memoryview, pos: int, final: bool) -> int:
        """Walk the complete records of ``data[pos:]``; return the position of the first record not walked.

        With ``final`` the records end with ``data``: a record running past it, fewer records than declared or
        bytes after the last record raise :class:`MalformedRecords`. Without it a record running past the end
        of ``data`` stops the walk there (feed the rest of it, from that position, with the next piece).
        """
        end = len(data)
        count = self.count
        index = self.walked
        try:
            while index < count:
                if pos >= end:
                    if final:
                        raise MalformedRecords(index, Finding.ENDS_EARLY, count=count)
                    break
                start = pos
                try:
                    size, pos = _varint(data, pos, index)
                except IndexError:
                    if final:
                        raise MalformedRecords(index, Finding.PAST_END) from None
                    pos = start
                    break
                if size < 0:
                    raise MalformedRecords(index, Finding.NEGATIVE_LENGTH)
                record_end = pos + size
                if record_end > end:
                    if final:
                        raise MalformedRecords(index, Finding.PAST_END)
                    pos = start
                    break
                try:
                    pos = self._fields(data, pos + 1, index)
                except IndexError:
                    pos = end + 1
                if pos != record_end:
                    raise MalformedRecords(index, Finding.NOT_FILLED, size=size)
                index += 1
        finally:
            self.walked = index
        if index == count and pos < end:
            raise MalformedRecords(index, Finding.TRAILING_BYTES, count=count)
        return pos

    def _fields(self, data, pos: int, index: int) -> int:
        """Read one record's fields after its attributes byte (at ``pos``); the position after them."""
        delta, pos = _varint(data, pos, index, 64)
        if index == 0:
            self.min_timestamp_delta = self.max_timestamp_delta = delta
        elif delta < self.min_timestamp_delta:
            self.min_timestamp_delta = delta
        elif delta > self.max_timestamp_delta:
            self.max_timestamp_delta = delta
        offset_delta, pos = _varint(data, pos, index)
        if offset_delta != index and self.gap_index < 0:
            self.gap_index, self.gap_delta = index, offset_delta
        key_size, pos = _varint(data, pos, index)
        if key_size < 0:
            self.null_keys += 1
            if self.first_null_key < 0:
                self.first_null_key = index
        else:
            pos += key_size
        pos = _skip_sized(data, pos, index)  # the value
        headers, pos = _varint(data, pos, index)
        if headers < 0:
            raise MalformedRecords(index, Finding.NEGATIVE_HEADERS, headers=headers)
        for header in range(headers):
            size, pos = _varint(data, pos, index)
            if size < 0:
                raise MalformedRecords(index, Finding.NEGATIVE_HEADER_KEY, header=header)
            pos = _skip_sized(data, pos + size, index)  # the header's value
        return pos


def _varint(data, pos: int, index: int, bits: int = 32) -> tuple[int, int]:
    """The zigzag varint at ``pos`` as Kafka reads it, ``bits`` wide (64: a varlong), and the position after it."""
    byte = data[pos]
    if byte < 0x80:  # most varints are one byte
        return _ZIGZAG[byte], pos + 1
    name, max_bytes, mask = _WIDTHS[bits]
    value = 0
    for shift in range(0, 7 * max_bytes, 7):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            value &= mask
            return (value >> 1) ^ -(value & 1), pos
    raise MalformedRecords(index, Finding.LONG_VARINT, name=name, max_bytes=max_bytes)


def _skip_sized(data, pos: int, index: int) -> int:
    """The position after the field of varint size at ``pos`` (a negative size, a null, has no bytes)."""
    size, pos = _varint(data, pos, index)
    return pos + size if size > 0 else pos


def _compiled_walk() -> type | None:
    if os.environ.get(PURE_PYTHON_ENV, '') not in ('', '0'):
        return None
    try:
        from kafka_kip._codec._record_walk import RecordWalk as compiled
    except ImportError:  # not built: kafka_kip._codec warns about the codec once
        return None
    return compiled


#: The walker the reference cluster uses: the compiled one when built, else :class:`PyRecordWalk`.
RecordWalk: type = _compiled_walk() or PyRecordWalk

__all__ = ['MalformedRecords', 'PyRecordWalk', 'RecordWalk']
