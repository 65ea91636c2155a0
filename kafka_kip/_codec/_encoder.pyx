# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Arrow columns straight into Kafka v2 record batches (the write path's inverse of ``_columns.pyx``).

:class:`TopicEncoder` encodes the rows of one topic, given as Arrow arrays of the Spark Kafka sink's columns,
into v2 record batches per partition, byte for byte what kafka-python's ``DefaultRecordBatchBuilder`` builds for
the same records (the same compression encoders, kept only where they make the batch smaller): no Python object
per row. Rows without a partition are partitioned as the Java client's (and kafka-python's) default partitioner
does: ``toPositive(murmur2(key)) % partition count`` for a keyed row; keyless rows stick to one partition chosen
at random until ``batch_size`` bytes went to it (the Java client's built-in sticky partitioner without its
load statistics).

A batch holds rows of one kind: partitioned here (it carries the partition count, KIP-253) or given their
partition; with ``preserve_offsets`` a batch holds consecutive offsets only. Producer id, epoch and sequence are
left unset (-1) and the header's base offset is 0, as an ordinary produce carries it; the producer stamps them
when it sends (:mod:`kafka_kip.producer.prebuilt`; with ``use_offset`` the batch's first offset).
"""
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcpy, memset

import random as _random

import kafka.codec as _kafka_codec
import pyarrow as _pa
from crc32c import crc32c as _crc32c
from kafka.errors import MessageSizeTooLargeError as _MessageSizeTooLargeError
from kafka.errors import UnknownTopicOrPartitionError as _UnknownTopicOrPartitionError

from kafka_kip._codec._buffers cimport Buffer, reserve
from kafka_kip._codec._records cimport varint_size, write_varint

cdef extern from *:
    """
    static int kip_sub_overflows(int64_t a, int64_t b, int64_t* out) {
        return __builtin_sub_overflow(a, b, out);
    }
    """
    bint kip_sub_overflows(int64_t a, int64_t b, int64_t* out) nogil

DEF HEADER_SIZE = 61          # a v2 batch header: base offset .. records count
DEF ATTRIBUTES_AT = 21        # where the CRC-covered part starts
DEF CRC_AT = 17
DEF MAGIC = 2
#: kafka-python's encoders by compression type
cdef dict _ENCODERS = {1: _kafka_codec.gzip_encode, 2: _kafka_codec.snappy_encode, 3: _kafka_codec.lz4_encode,
                       4: _kafka_codec.zstd_encode}
cdef object _BINARY = _pa.binary()
cdef object _STRING = _pa.string()
cdef object _INT32 = _pa.int32()
cdef object _INT64 = _pa.int64()


# -- Arrow arrays as C pointers -------------------------------------------------------------------------------

cdef struct Binary:
    const uint8_t* validity   # NULL: no nulls (or no column)
    const int32_t* offsets    # NULL: no column (every row null)
    const char* data
    Py_ssize_t at             # the array's offset into its buffers


cdef struct Ints:
    const uint8_t* validity
    const char* values        # NULL: no column
    Py_ssize_t at


cdef inline const char* _address(object buffer) except? NULL:
    if buffer is None:
        return NULL
    cdef uintptr_t address = buffer.address
    return <const char*>address


cdef int _binary(object array, object name, Py_ssize_t rows, Binary* column) except -1:
    memset(column, 0, sizeof(Binary))
    if array is None:
        return 0
    if array.type != _BINARY and array.type != _STRING:  # (the same layout)
        raise TypeError(f'column {name!r} must be a pyarrow binary or string array here, got {array.type}')
    if len(array) != rows:
        raise ValueError(f'column {name!r} has {len(array)} rows, the value column {rows}')
    buffers = array.buffers()
    column.validity = <const uint8_t*>_address(buffers[0]) if array.null_count else NULL
    column.offsets = <const int32_t*>_address(buffers[1])
    column.data = _address(buffers[2])
    column.at = array.offset
    return 0


cdef int _ints(object array, object kind, object name, Py_ssize_t rows, Ints* column) except -1:
    memset(column, 0, sizeof(Ints))
    if array is None:
        return 0
    if array.type != kind and not (kind is None and _pa.types.is_list(array.type)):
        raise TypeError(f'column {name!r} must be a pyarrow {kind or 'list'} array here, got {array.type}')
    if len(array) != rows:
        raise ValueError(f'column {name!r} has {len(array)} rows, the value column {rows}')
    buffers = array.buffers()
    column.validity = <const uint8_t*>_address(buffers[0]) if array.null_count else NULL
    column.values = _address(buffers[1])
    column.at = array.offset
    return 0


cdef inline bint _valid(const uint8_t* validity, Py_ssize_t index) noexcept nogil:
    return validity == NULL or (validity[index >> 3] >> (index & 7)) & 1


cdef inline bint _binary_at(Binary* column, Py_ssize_t row, const char** data, int64_t* length) noexcept nogil:
    """Row ``row`` of a binary column: False for null."""
    cdef Py_ssize_t index = column.at + row
    if column.offsets == NULL or not _valid(column.validity, index):
        length[0] = -1
        return False
    data[0] = column.data + column.offsets[index]
    length[0] = column.offsets[index + 1] - column.offsets[index]
    return True


cdef inline bint _int_at(Ints* column, Py_ssize_t row, int width, int64_t* out) noexcept nogil:
    """Row ``row`` of an int32 (``width`` 4) or int64 column: False for null."""
    cdef Py_ssize_t index = column.at + row
    if column.values == NULL or not _valid(column.validity, index):
        return False
    if width == 4:
        out[0] = (<const int32_t*>column.values)[index]
    else:
        out[0] = (<const int64_t*>column.values)[index]
    return True


# -- murmur2 ----------------------------------------------------------------------------------------------------

cdef uint32_t murmur2(const char* data, Py_ssize_t length) noexcept nogil:
    """The Java client's ``Utils.murmur2`` (as unsigned 32 bits)."""
    cdef uint32_t m = 0x5bd1e995
    cdef uint32_t seed = 0x9747b28c
    cdef uint32_t h = seed ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i, quads = length // 4
    cdef const uint8_t* bytes_ = <const uint8_t*>data
    for i in range(quads):
        k = (bytes_[i * 4] | (<uint32_t>bytes_[i * 4 + 1] << 8) | (<uint32_t>bytes_[i * 4 + 2] << 16)
             | (<uint32_t>bytes_[i * 4 + 3] << 24))
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
    cdef Py_ssize_t tail = quads * 4
    cdef Py_ssize_t left = length % 4
    if left == 3:
        h ^= <uint32_t>bytes_[tail + 2] << 16
    if left >= 2:
        h ^= <uint32_t>bytes_[tail + 1] << 8
    if left >= 1:
        h ^= bytes_[tail]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h


def key_partition(bytes key, int partition_count):
    """The partition of ``key`` among ``partition_count`` (the Java client's default partitioner)."""
    return <int>((murmur2(key, len(key)) & 0x7fffffff) % partition_count)


# -- batches ------------------------------------------------------------------------------------------------------

cdef struct OpenBatch:
    Buffer bytes_             # HEADER_SIZE bytes of room, then the records
    int64_t count
    int64_t base_offset       # the first row's offset (preserve_offsets), else 0
    int64_t first_timestamp
    int64_t max_timestamp
    bint partitioned          # its rows were partitioned here (else their partition was given)


cdef inline void _put_be(char* out, uint64_t value, int size) noexcept nogil:
    cdef int i
    for i in range(size):
        out[i] = <char>(value >> (8 * (size - 1 - i)))


cdef class TopicEncoder:
    """Encodes rows of ``topic`` (``partition_count`` partitions) into v2 batches.

    ``batch_size``: a batch is closed before a row would take it over that many (uncompressed) bytes, as
    kafka-python's builder does; ``max_record_bytes``: the largest batch one row may make (the smaller of the
    producer's ``max_request_size`` and the topic's ``max.message.bytes``), ``limit_name`` says which it is.
    ``compression``: kafka-python's compression type (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    """

    cdef readonly str topic
    cdef readonly int partition_count
    cdef readonly bint preserve_offsets
    cdef int _compression
    cdef Py_ssize_t _batch_size
    cdef Py_ssize_t _max_record_bytes
    cdef str _limit_name
    cdef OpenBatch* _open
    cdef int64_t* _last_offsets     # preserve_offsets: the last offset seen per partition (-1: none)
    cdef int _sticky                # keyless rows' partition (-1: none chosen)
    cdef int64_t _sticky_bytes
    cdef object _random
    cdef list _out

    def __cinit__(self, str topic, int partition_count, int compression=0, Py_ssize_t batch_size=16384,
                  Py_ssize_t max_record_bytes=1048576, str limit_name='max_request_size', bint preserve_offsets=False,
                  object rng=None):
        if partition_count < 1:
            raise ValueError(f'topic {topic!r}: partition count must be at least 1, got {partition_count}')
        if compression not in (0, 1, 2, 3, 4):
            raise ValueError(f'compression type must be 0-4 (none, gzip, snappy, lz4, zstd), got {compression}')
        self.topic = topic
        self.partition_count = partition_count
        self.preserve_offsets = preserve_offsets
        self._compression = compression
        self._batch_size = min(batch_size, max_record_bytes)
        self._max_record_bytes = max_record_bytes
        self._limit_name = limit_name
        self._sticky = -1
        self._out = []
        self._random = _random.Random() if rng is None else rng
        self._open = <OpenBatch*>PyMem_Malloc(partition_count * sizeof(OpenBatch))
        self._last_offsets = <int64_t*>PyMem_Malloc(partition_count * sizeof(int64_t))
        if self._open == NULL or self._last_offsets == NULL:
            raise MemoryError()
        memset(self._open, 0, partition_count * sizeof(OpenBatch))
        cdef int p
        for p in range(partition_count):
            self._last_offsets[p] = -1

    def __dealloc__(self):
        cdef int p
        if self._open != NULL:
            for p in range(self.partition_count):
                PyMem_Free(self._open[p].bytes_.data)
            PyMem_Free(self._open)
        PyMem_Free(self._last_offsets)

    def encode(self, object value, object key=None, object partition=None, object timestamp=None,
               object offset=None, object headers=None, int64_t now_ms=0):
        """Encode the rows of these columns; the batches completed, in order per partition, as
        ``(partition, base_offset, record_count, partitioned, data)`` (``data`` a bytearray).

        If a row cannot be encoded (over the size limit, offsets out of order, ...) the error is raised with the
        rows before it kept: :meth:`take` returns the batches completed before it, :meth:`finish` the open ones.

        Columns: ``value`` and ``key`` binary or string; ``partition`` int32; ``timestamp`` (ms; null:
        ``now_ms``) and ``offset`` int64; ``headers`` list<struct<key string, value binary>>. None: the column is
        absent. Batches still open are returned by :meth:`finish`.
        """
        cdef Py_ssize_t rows = len(value)
        cdef Binary values, keys, hkeys, hvalues
        cdef Ints partitions, timestamps, offsets, hoffsets
        _binary(value, 'value', rows, &values)
        _binary(key, 'key', rows, &keys)
        _ints(partition, _INT32, 'partition', rows, &partitions)
        _ints(timestamp, _INT64, 'timestamp', rows, &timestamps)
        _ints(offset, _INT64, 'offset', rows, &offsets)
        if headers is not None:
            _ints(headers, None, 'headers', rows, &hoffsets)  # the list array's validity and offsets
            entries = headers.values
            header_keys, header_values = entries.field('key'), entries.field('value')
            _binary(header_keys, 'headers.key', len(entries), &hkeys)
            _binary(header_values, 'headers.value', len(entries), &hvalues)
            if hkeys.validity != NULL or entries.null_count:
                raise ValueError(f'topic {self.topic!r}: a header is null or has a null key (Kafka header keys are strings)')
        else:
            memset(&hoffsets, 0, sizeof(Ints))
        if self.preserve_offsets and (partitions.values == NULL or offsets.values == NULL):
            raise ValueError("preserve_offsets needs 'partition' and 'offset' columns")
        cdef Py_ssize_t row, h, first_header, last_header
        cdef int64_t p, ts, row_offset, key_length, value_length, name_length, data_length, header_count, delta
        cdef int64_t offset_delta, body, size, rest
        cdef const char* key_data = NULL
        cdef const char* value_data = NULL
        cdef const char* name_data = NULL
        cdef const char* data_data = NULL
        cdef bint partitioned, has_key
        cdef OpenBatch* batch
        cdef char* out
        for row in range(rows):
            has_key = _binary_at(&keys, row, &key_data, &key_length)
            _binary_at(&values, row, &value_data, &value_length)
            row_offset = -1
            partitioned = not _int_at(&partitions, row, 4, &p)
            if self.preserve_offsets:
                if partitioned or not _int_at(&offsets, row, 8, &row_offset):
                    raise ValueError(f'preserve_offsets: a row for topic {self.topic!r} has a null '
                                     f'{"partition" if partitioned else "offset"}')
            if partitioned:
                if has_key:
                    p = (murmur2(key_data, key_length) & 0x7fffffff) % self.partition_count
                else:
                    if self._sticky < 0 or self._sticky_bytes >= self._batch_size:
                        self._sticky = self._random.randrange(self.partition_count)
                        self._sticky_bytes = 0
                    p = self._sticky
            elif not 0 <= p < self.partition_count:
                raise _UnknownTopicOrPartitionError(
                    f'a row for topic {self.topic!r} has partition {p}; the topic has partitions '
                    f'0..{self.partition_count - 1}')
            if self.preserve_offsets:
                if row_offset < 0:
                    raise ValueError(f'preserve_offsets: {self.topic}-{p} has a negative offset {row_offset}')
                if row_offset <= self._last_offsets[p]:
                    # the broker would refuse it as "already there" and the row would be lost silently
                    raise ValueError(f'preserve_offsets needs the rows of a partition in increasing offset order; '
                                     f'{self.topic}-{p} has offset {row_offset} after {self._last_offsets[p]}')
            if not _int_at(&timestamps, row, 8, &ts):
                ts = now_ms
            header_count = 0
            if hoffsets.values != NULL and _valid(hoffsets.validity, hoffsets.at + row):
                first_header = (<const int32_t*>hoffsets.values)[hoffsets.at + row]
                last_header = (<const int32_t*>hoffsets.values)[hoffsets.at + row + 1]
                header_count = last_header - first_header
            rest = varint_size(header_count)
            rest += 1 if key_length < 0 else varint_size(key_length) + key_length
            rest += 1 if value_length < 0 else varint_size(value_length) + value_length
            for h in range(header_count):
                _binary_at(&hkeys, first_header + h, &name_data, &name_length)
                _binary_at(&hvalues, first_header + h, &data_data, &data_length)
                rest += varint_size(name_length) + name_length
                rest += 1 if data_length < 0 else varint_size(data_length) + data_length
            batch = &self._open[p]
            if batch.count and (batch.partitioned != partitioned
                                or (self.preserve_offsets and row_offset != batch.base_offset + batch.count)
                                or kip_sub_overflows(ts, batch.first_timestamp, &delta)):
                self._close(<int>p)
            if batch.count:
                body = 1 + varint_size(ts - batch.first_timestamp) + varint_size(batch.count) + rest
                if batch.bytes_.length + varint_size(body) + body > self._batch_size:
                    self._close(<int>p)
            if batch.count == 0:
                body = 3 + rest  # attributes and the two deltas (0): one byte each
                if HEADER_SIZE + varint_size(body) + body > self._max_record_bytes:
                    where = f'{self.topic}-{p}' + (f' at offset {row_offset}' if self.preserve_offsets else '')
                    raise _MessageSizeTooLargeError(
                        f'a row for {where} is {HEADER_SIZE + varint_size(body) + body} bytes as a record batch, '
                        f'over the limit of {self._max_record_bytes} bytes ({self._limit_name}); nothing of it '
                        'or after it was sent')
                batch.partitioned = partitioned
                batch.base_offset = row_offset if self.preserve_offsets else 0
                batch.first_timestamp = ts
                batch.max_timestamp = ts
                batch.bytes_.length = HEADER_SIZE
            delta = ts - batch.first_timestamp
            offset_delta = batch.count
            size = varint_size(body) + body
            reserve(&batch.bytes_, size)
            out = batch.bytes_.data + batch.bytes_.length
            out += write_varint(out, body)
            out[0] = 0  # attributes
            out += 1
            out += write_varint(out, delta)
            out += write_varint(out, offset_delta)
            out += _write_bytes(out, key_data, key_length)
            out += _write_bytes(out, value_data, value_length)
            out += write_varint(out, header_count)
            for h in range(header_count):
                _binary_at(&hkeys, first_header + h, &name_data, &name_length)
                _binary_at(&hvalues, first_header + h, &data_data, &data_length)
                out += _write_bytes(out, name_data, name_length)
                out += _write_bytes(out, data_data, data_length)
            batch.bytes_.length += size
            batch.count += 1
            if batch.max_timestamp < ts:
                batch.max_timestamp = ts
            if self.preserve_offsets:
                self._last_offsets[p] = row_offset
            if partitioned and not has_key:
                self._sticky_bytes += size
        return self.take()

    def take(self):
        """The batches completed and not handed out yet."""
        out_batches, self._out = self._out, []
        return out_batches

    def finish(self):
        """Close every open batch; the batches as :meth:`encode` returns them."""
        cdef int p
        for p in range(self.partition_count):
            if self._open[p].count:
                self._close(p)
        return self.take()

    cdef int _close(self, int p) except -1:
        """Compress (where it makes the batch smaller), write the header and CRC, and hand the batch out."""
        cdef OpenBatch* batch = &self._open[p]
        cdef int attributes = 0
        cdef Py_ssize_t records_length = batch.bytes_.length - HEADER_SIZE
        data = None
        if self._compression:
            records = PyByteArray_FromStringAndSize(batch.bytes_.data + HEADER_SIZE, records_length)
            compressed = _ENCODERS[self._compression](bytes(records))
            if len(compressed) < records_length:
                attributes = self._compression
                data = bytearray(HEADER_SIZE)
                data += compressed
        if data is None:
            data = PyByteArray_FromStringAndSize(batch.bytes_.data, batch.bytes_.length)
        cdef char* header = PyByteArray_AS_STRING(data)
        cdef Py_ssize_t total = len(data)
        _put_be(header, 0, 8)  # base offset: the producer stamps a batch's own when it sends with use_offset
        _put_be(header + 8, <uint64_t>(total - 12), 4)
        _put_be(header + 12, 0, 4)  # partition leader epoch
        header[16] = MAGIC
        _put_be(header + ATTRIBUTES_AT, <uint64_t>attributes, 2)
        _put_be(header + 23, <uint64_t>(batch.count - 1), 4)  # last offset delta
        _put_be(header + 27, <uint64_t>batch.first_timestamp, 8)
        _put_be(header + 35, <uint64_t>batch.max_timestamp, 8)
        _put_be(header + 43, <uint64_t>(-1), 8)  # producer id
        _put_be(header + 51, <uint64_t>(-1), 2)  # producer epoch
        _put_be(header + 53, <uint64_t>(-1), 4)  # base sequence
        _put_be(header + 57, <uint64_t>batch.count, 4)
        _put_be(header + CRC_AT, _crc32c(memoryview(data)[ATTRIBUTES_AT:]), 4)
        self._out.append((p, batch.base_offset, batch.count, batch.partitioned, data))
        batch.bytes_.length = 0
        batch.count = 0
        return 0


cdef inline Py_ssize_t _write_bytes(char* out, const char* data, int64_t length) noexcept nogil:
    """A length-prefixed byte string (a negative length: null)."""
    if length < 0:
        out[0] = 1  # varint -1
        return 1
    cdef Py_ssize_t written = write_varint(out, length)
    memcpy(out + written, data, length)
    return written + length
