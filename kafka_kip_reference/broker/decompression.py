"""Bounded, streaming decompression of a produced batch's records (gzip, snappy, lz4, zstd).

:func:`inflate` yields the decompressed records in pieces of at most ``piece`` bytes and refuses a batch whose
records inflate beyond ``limit`` bytes as soon as they do, so a small batch that would inflate to gigabytes
costs no more than ``limit`` bytes of work and one piece of memory. Bytes that do not decompress are refused
as Apache Kafka refuses them: UNKNOWN_SERVER_ERROR (Kafka's decompression exception is not mapped to an error
code; measured on Apache Kafka 4.4), with a message naming the codec and the failure.
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import lz4.frame
import zstandard

from kafka_kip.protocol import constants
from kafka_kip.protocol.record_batch import InvalidBatch

try:
    import snappy
except ImportError:  # python-snappy is optional, as in kafka-python
    snappy = None

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODEC_NAMES = {GZIP: 'gzip', SNAPPY: 'snappy', LZ4: 'lz4', ZSTD: 'zstd'}
_GZIP_MAGIC = b'\x1f\x8b'
_XERIAL_MAGIC = b'\x82SNAPPY\x00'
_XERIAL_HEADER = 16  # magic, version, compatible version
_XERIAL_BLOCK = struct.Struct('>i')
#: zstd frames may ask for a window of up to 2 GiB; none needs more than the records may inflate to.
_ZSTD_MAX_WINDOW = 1 << 27


def inflate(codec: int, payload: bytes | memoryview, limit: int, piece: int) -> Iterator[bytes]:
    """The decompressed bytes of ``payload`` in pieces of at most ``piece`` bytes (a snappy block may be one
    larger piece, never above ``limit``); InvalidBatch when they exceed ``limit`` in all, or do not decompress."""
    name = CODEC_NAMES.get(codec)
    if name is None:
        raise InvalidBatch(constants.UNKNOWN_SERVER_ERROR, f'unknown compression codec id {codec}')
    total = 0
    try:
        for chunk in _PIECES[codec](payload, piece, limit):
            total += len(chunk)
            if total > limit:
                raise InvalidBatch(constants.MESSAGE_TOO_LARGE,
                                   f'the {name} records inflate to more than {limit} bytes, the '
                                   'most this broker decompresses of one batch')
            if chunk:
                yield chunk
    except InvalidBatch:
        raise
    except Exception as exc:  # every failure to decompress client bytes refuses the batch
        raise InvalidBatch(constants.UNKNOWN_SERVER_ERROR,
                           f'cannot decompress the {name} records: {exc}') from exc


def _gzip(payload, piece: int, limit: int) -> Iterator[bytes]:
    """Every gzip member, as Java's GZIPInputStream reads them (bytes after a member that are not one are ignored)."""
    data = bytes(payload)
    while True:
        inflater = zlib.decompressobj(wbits=31)
        while not inflater.eof:
            chunk = inflater.decompress(data, piece)
            data = inflater.unconsumed_tail
            if not chunk and not data:
                raise ValueError('the gzip stream is truncated')
            yield chunk
        data = inflater.unused_data
        if not data.startswith(_GZIP_MAGIC):
            return


def _snappy(payload, piece: int, limit: int) -> Iterator[bytes]:
    """Kafka's snappy: xerial-framed blocks (snappy-java's stream format) or one raw block."""
    if snappy is None:
        raise ValueError('python-snappy is not installed on this broker')
    data = memoryview(payload)
    if bytes(data[:len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        yield _snappy_block(data, limit)
        return
    pos = _XERIAL_HEADER
    while pos < len(data):
        if pos + _XERIAL_BLOCK.size > len(data):
            raise ValueError('a xerial block header is truncated')
        size = _XERIAL_BLOCK.unpack_from(data, pos)[0]
        pos += _XERIAL_BLOCK.size
        if size < 0 or pos + size > len(data):
            raise ValueError(f'a xerial block of {size} bytes runs past the end of the records')
        yield _snappy_block(data[pos:pos + size], limit)
        pos += size


def _snappy_block(block: memoryview, limit: int) -> bytes:
    """One raw snappy block, refused before decompressing when its declared length exceeds ``limit``."""
    declared = shift = 0
    for byte in bytes(block[:5]):
        declared |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    if declared > limit:
        raise InvalidBatch(constants.MESSAGE_TOO_LARGE,
                           f'a snappy block declares {declared} bytes, more than the {limit} '
                           'bytes this broker decompresses of one batch')
    return snappy.decompress(bytes(block))


def _lz4(payload, piece: int, limit: int) -> Iterator[bytes]:
    """One LZ4 frame (Kafka's lz4 format)."""
    decompressor = lz4.frame.LZ4FrameDecompressor()
    data = bytes(payload)
    while not decompressor.eof:
        chunk = decompressor.decompress(data, max_length=piece)
        data = b''
        if not chunk and decompressor.needs_input:
            raise ValueError('the lz4 frame is truncated')
        yield chunk


def _zstd(payload, piece: int, limit: int) -> Iterator[bytes]:
    """zstd frames, read across frame boundaries as Kafka's zstd stream does.

    python-zstandard's bounded reader ends quietly at a truncated frame, so the frames' structure is checked
    first (:func:`_check_zstd_frames`): a truncated stream is refused as Kafka refuses it, not as missing records.
    """
    _check_zstd_frames(memoryview(payload))
    decompressor = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
    with decompressor.stream_reader(bytes(payload), read_across_frames=True) as reader:
        while chunk := reader.read(piece):
            yield chunk


_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MAGIC = 0x184D2A50  # 0x184D2A50 .. 0x184D2A5F
_FRAME_CONTENT_SIZE_BYTES = (0, 2, 4, 8)  # by the descriptor's top two bits (0: 1 byte for a single segment)
_DICTIONARY_ID_BYTES = (0, 1, 2, 4)
_RLE_BLOCK, _RESERVED_BLOCK = 1, 3


def _check_zstd_frames(data: memoryview) -> None:
    """Walk the frames and block headers of a zstd stream (RFC 8878) without decompressing; ValueError when a
    frame is truncated or malformed."""
    pos, end = 0, len(data)
    while pos < end:
        if pos + 4 > end:
            raise ValueError('a zstd frame is truncated')
        magic = int.from_bytes(data[pos:pos + 4], 'little')
        pos += 4
        if magic & 0xFFFFFFF0 == _SKIPPABLE_MAGIC:
            if pos + 4 > end:
                raise ValueError('a skippable zstd frame is truncated')
            pos += 4 + int.from_bytes(data[pos:pos + 4], 'little')
            continue
        if magic != _ZSTD_MAGIC:
            raise ValueError(f'not a zstd frame (magic {magic:#x})')
        if pos >= end:
            raise ValueError('a zstd frame header is truncated')
        descriptor = data[pos]
        single_segment = descriptor >> 5 & 1
        content_size = _FRAME_CONTENT_SIZE_BYTES[descriptor >> 6] or single_segment
        pos += 1 + (not single_segment) + _DICTIONARY_ID_BYTES[descriptor & 3] + content_size
        last = False
        while not last:
            if pos + 3 > end:
                raise ValueError('a zstd frame is truncated')
            block = int.from_bytes(data[pos:pos + 3], 'little')
            last, kind, size = block & 1, block >> 1 & 3, block >> 3
            if kind == _RESERVED_BLOCK:
                raise ValueError('a zstd block has the reserved type')
            pos += 3 + (1 if kind == _RLE_BLOCK else size)
        pos += 4 * (descriptor >> 2 & 1)  # content checksum
        if pos > end:
            raise ValueError('a zstd frame is truncated')


_PIECES = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}
