# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Spark's Kafka columns straight from the record bytes of v2 batches (the kafka-kip Spark source's read path).

:class:`SparkColumns` appends the records of one partition, batch after batch, to C buffers laid out as Arrow
arrays, and hands them over as a ``pyarrow.RecordBatch`` of :func:`kafka_kip.spark.records.record_schema`'s
columns: no Python object per record. :meth:`SparkColumns.append_batch` takes the well-formed case only (the
framing of :mod:`kafka_kip._codec._records`, header keys in UTF-8) and answers -1, having appended nothing, for
anything else: the caller then lets kafka-python decode that batch, which raises kafka-python's error.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT32_MAX, INT64_MIN, int32_t, int64_t, uint8_t, uintptr_t
from libc.string cimport memcpy, memset

import pyarrow as _pa

from kafka_kip._codec._buffers cimport Buffer, reserve as _reserve
from kafka_kip._codec._records cimport RecordFrame, read_frame, read_header

cdef extern from *:
    """
    static int kip_mul_overflows(int64_t a, int64_t b, int64_t* out) {
        return __builtin_mul_overflow(a, b, out);
    }
    """
    bint kip_mul_overflows(int64_t a, int64_t b, int64_t* out) nogil


# -- growing buffers ----------------------------------------------------------------------------------------

cdef inline int _put(Buffer* buffer, const void* source, Py_ssize_t size) except -1:
    _reserve(buffer, size)
    memcpy(buffer.data + buffer.length, source, size)
    buffer.length += size
    return 0


cdef inline int _put_int32(Buffer* buffer, int32_t value) except -1:
    return _put(buffer, &value, sizeof(int32_t))


cdef inline int _put_int64(Buffer* buffer, int64_t value) except -1:
    return _put(buffer, &value, sizeof(int64_t))


cdef inline int _put_bit(Buffer* bitmap, Py_ssize_t index, bint value) except -1:
    """Bit ``index`` of an Arrow validity bitmap (least significant bit first) set to ``value``."""
    cdef Py_ssize_t byte = index >> 3
    if byte >= bitmap.length:
        _reserve(bitmap, byte + 1 - bitmap.length)
        memset(bitmap.data + bitmap.length, 0, byte + 1 - bitmap.length)
        bitmap.length = byte + 1
    if value:
        bitmap.data[byte] = <char>(<uint8_t>bitmap.data[byte] | (1 << (index & 7)))
    else:
        bitmap.data[byte] = <char>(<uint8_t>bitmap.data[byte] & ~(1 << (index & 7)))
    return 0


cdef object _arrow_of(Buffer* buffer):
    """A copy of ``buffer`` in a ``pyarrow.Buffer`` of Arrow's memory pool. The rows a read keeps live there, not in
    the C heap where the client's transient fetch buffers come and go: kept rows among them would leave each new
    fetch buffer on fresh pages (a page fault every 4 KiB)."""
    out = _pa.allocate_buffer(buffer.length)
    cdef void* target = <void*><uintptr_t>out.address
    if buffer.length:
        with nogil:  # first touches of fresh pages: the client's I/O thread receives meanwhile
            memcpy(target, buffer.data, buffer.length)
    return out


# -- variable-length columns --------------------------------------------------------------------------------

# An Arrow binary or string column: validity bitmap, int32 offsets (one more than values), data.
cdef struct VarColumn:
    Buffer valid
    Buffer offsets
    Buffer data
    Py_ssize_t values
    Py_ssize_t nulls


cdef int _var_append(VarColumn* column, const char* source, int64_t size) except -1:
    """One value (``size`` -1: null)."""
    if column.offsets.length == 0:
        _put_int32(&column.offsets, 0)
    if size > INT32_MAX - column.data.length:
        raise OverflowError('more than 2 GiB of keys, values or headers in one Arrow batch')
    if size >= 0:
        _put(&column.data, source, size)
    else:
        column.nulls += 1
    _put_bit(&column.valid, column.values, size >= 0)
    _put_int32(&column.offsets, <int32_t>column.data.length)
    column.values += 1
    return 0


cdef object _var_array(VarColumn* column, object kind):
    if column.offsets.length == 0:
        _put_int32(&column.offsets, 0)
    valid = _arrow_of(&column.valid) if column.nulls else None
    return _pa.Array.from_buffers(kind, column.values, [
        valid, _arrow_of(&column.offsets),
        _arrow_of(&column.data)], null_count=column.nulls)


cdef void _var_free(VarColumn* column) noexcept:
    PyMem_Free(column.valid.data)
    PyMem_Free(column.offsets.data)
    PyMem_Free(column.data.data)


cdef void _var_clear(VarColumn* column) noexcept:
    column.valid.length = column.offsets.length = column.data.length = 0
    column.values = column.nulls = 0


cdef struct VarMark:
    Py_ssize_t offsets, data, values, nulls


cdef inline VarMark _var_mark(VarColumn* column) noexcept:
    cdef VarMark mark
    mark.offsets, mark.data, mark.values, mark.nulls = (column.offsets.length, column.data.length,
                                                        column.values, column.nulls)
    return mark


cdef inline void _var_rewind(VarColumn* column, VarMark mark) noexcept:
    column.offsets.length, column.data.length, column.values, column.nulls = (mark.offsets, mark.data,
                                                                              mark.values, mark.nulls)


cdef inline bint _ascii(const unsigned char* data, int64_t size) noexcept nogil:
    cdef int64_t i
    for i in range(size):
        if data[i] & 0x80:
            return False
    return True


# -- the columns --------------------------------------------------------------------------------------------

# What SparkColumns._append_records did with a batch.
cdef enum:
    DECLINED = 0
    APPENDED = 1
    TIMESTAMP_OUT_OF_RANGE = 2


# Where every column stood before an append: what a failed append goes back to.
cdef struct Mark:
    Py_ssize_t rows
    VarMark keys, values, header_keys, header_values
    Py_ssize_t header_lists, header_lists_nulls


cdef class SparkColumns:
    """The records of one partition as the columns of ``record_schema(with_headers)``, appended in offset order.

    ``schema`` is that record schema in Arrow (``pyspark.sql.pandas.types.to_arrow_schema``).
    """

    cdef VarColumn _keys
    cdef VarColumn _values
    cdef Buffer _offsets
    cdef Buffer _timestamps
    cdef Buffer _timestamp_types
    cdef Buffer _leader_epochs
    cdef bint _with_headers
    cdef Buffer _header_lists_valid
    cdef Buffer _header_lists
    cdef Py_ssize_t _header_lists_nulls
    cdef VarColumn _header_keys
    cdef VarColumn _header_values
    cdef Py_ssize_t _rows
    cdef bytes _topic
    cdef int32_t _partition
    cdef object _schema

    def __cinit__(self, str topic, int32_t partition, object schema, bint with_headers):
        self._topic = topic.encode('utf-8')
        self._partition = partition
        self._schema = schema
        self._with_headers = with_headers

    def __dealloc__(self):
        _var_free(&self._keys)
        _var_free(&self._values)
        _var_free(&self._header_keys)
        _var_free(&self._header_values)
        PyMem_Free(self._offsets.data)
        PyMem_Free(self._timestamps.data)
        PyMem_Free(self._timestamp_types.data)
        PyMem_Free(self._leader_epochs.data)
        PyMem_Free(self._header_lists_valid.data)
        PyMem_Free(self._header_lists.data)

    def __len__(self):
        return self._rows

    @property
    def nbytes(self) -> int:
        """Bytes of keys, values and headers held (the rest is a few bytes a row)."""
        return self._keys.data.length + self._values.data.length + self._header_keys.data.length + \
            self._header_values.data.length

    def append_batch(self, object data, Py_ssize_t start, int64_t count, int64_t base_offset,
                     int64_t first_timestamp, int64_t max_timestamp, bint log_append_time, int32_t leader_epoch,
                     int64_t min_offset, int64_t until):
        """The records of a v2 batch (``count`` records from ``data[start]``, uncompressed) whose offsets are in
        ``[min_offset, until)`` (the records below ``min_offset`` before the first at or above it). Returns how
        many were appended, or -1 (none appended) if the batch is not exactly what kafka-python decodes without
        error. A timestamp Spark cannot hold raises, the records before it appended, as kafka-python hands out the
        records before an error; other errors (out of memory, over 2 GiB in one Arrow batch) leave none of the
        batch appended."""
        cdef Py_buffer view
        cdef Mark mark = self._mark()
        cdef RecordFrame failed
        cdef int outcome = DECLINED
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            if start >= 0 and start <= view.len and 0 <= count <= view.len - start:
                outcome = self._append_records(<const unsigned char*>view.buf, start, view.len, count, base_offset,
                                               first_timestamp, max_timestamp, log_append_time, leader_epoch,
                                               min_offset, until, &failed)
        except BaseException:
            self._rewind(mark)
            raise
        finally:
            PyBuffer_Release(&view)
        if outcome == DECLINED:
            self._rewind(mark)
            return -1
        if outcome == TIMESTAMP_OUT_OF_RANGE:
            raise _timestamp_error(self._topic, self._partition, failed.offset, failed.timestamp)
        return self._rows - mark.rows

    cdef Mark _mark(self) noexcept:
        cdef Mark mark
        mark.rows = self._rows
        mark.keys, mark.values = _var_mark(&self._keys), _var_mark(&self._values)
        mark.header_keys, mark.header_values = _var_mark(&self._header_keys), _var_mark(&self._header_values)
        mark.header_lists, mark.header_lists_nulls = self._header_lists.length, self._header_lists_nulls
        return mark

    cdef void _rewind(self, Mark mark) noexcept:
        # (validity bits past the rows are written again before they are read)
        _var_rewind(&self._keys, mark.keys)
        _var_rewind(&self._values, mark.values)
        _var_rewind(&self._header_keys, mark.header_keys)
        _var_rewind(&self._header_values, mark.header_values)
        self._header_lists.length, self._header_lists_nulls = mark.header_lists, mark.header_lists_nulls
        self._rows = mark.rows
        self._offsets.length = self._timestamps.length = mark.rows * sizeof(int64_t)
        self._timestamp_types.length = self._leader_epochs.length = mark.rows * sizeof(int32_t)

    cdef int _append_records(self, const unsigned char* buf, Py_ssize_t pos, Py_ssize_t end, int64_t count,
                             int64_t base_offset, int64_t first_timestamp, int64_t max_timestamp,
                             bint log_append_time, int32_t leader_epoch, int64_t min_offset, int64_t until,
                             RecordFrame* failed) except -1:
        """APPENDED, DECLINED, or TIMESTAMP_OUT_OF_RANGE (``failed`` the record; those before it appended)."""
        cdef RecordFrame frame
        cdef int64_t index, micros
        for index in range(count):
            if not read_frame(buf, end, &pos, base_offset, first_timestamp, max_timestamp, log_append_time, &frame):
                return DECLINED
            if frame.header_count and not _header_keys_decode(buf, end, &frame):
                return DECLINED
            if frame.offset < min_offset:
                continue  # (below the fetch offset, as kafka-python skips the leading records below it)
            min_offset = INT64_MIN  # offsets only grow; in corrupt data kafka-python keeps later lower ones
            if frame.offset >= until:
                continue
            if kip_mul_overflows(frame.timestamp, 1000, &micros):
                failed[0] = frame
                return TIMESTAMP_OUT_OF_RANGE
            if self._with_headers:
                self._append_headers(buf, end, &frame)
            _var_append(&self._keys, <const char*>buf + frame.key_at, frame.key_length)
            _var_append(&self._values, <const char*>buf + frame.value_at, frame.value_length)
            self._append_fixed(frame.offset, micros, 1 if log_append_time else 0, leader_epoch)
        return APPENDED if pos == end else DECLINED  # kafka-python refuses bytes left over after the last record

    cdef int _append_fixed(self, int64_t offset, int64_t micros, int32_t timestamp_type,
                           int32_t leader_epoch) except -1:
        _put_int64(&self._offsets, offset)
        _put_int64(&self._timestamps, micros)
        _put_int32(&self._timestamp_types, timestamp_type)
        _put_int32(&self._leader_epochs, leader_epoch)
        self._rows += 1
        return 0

    cdef int _append_headers(self, const unsigned char* buf, Py_ssize_t end, RecordFrame* frame) except -1:
        """The headers of a framed record whose header keys decode."""
        cdef Py_ssize_t pos = frame.headers_at, key_at = 0, value_at = 0
        cdef int64_t header, key_length = 0, value_length = 0
        if not frame.header_count:
            return self._append_no_headers()
        for header in range(frame.header_count):
            read_header(buf, end, &pos, &key_at, &key_length, &value_at, &value_length)
            _var_append(&self._header_keys, <const char*>buf + key_at, key_length)
            _var_append(&self._header_values, <const char*>buf + value_at, value_length)
        return self._end_header_list(True)

    cdef int _append_no_headers(self) except -1:
        """Null, not an empty list, for a record without headers (as Spark's Kafka source has it)."""
        self._header_lists_nulls += 1
        return self._end_header_list(False)

    cdef int _end_header_list(self, bint valid) except -1:
        if self._header_lists.length == 0:
            _put_int32(&self._header_lists, 0)
        _put_bit(&self._header_lists_valid, self._rows, valid)
        _put_int32(&self._header_lists, <int32_t>self._header_keys.values)
        return 0

    def append_record(self, object key, object value, int64_t offset, object timestamp, int32_t timestamp_type,
                      object headers, int32_t leader_epoch):
        """One record given as its fields (a ``ConsumerRecord`` kafka-python decoded); on an error (a timestamp
        Spark cannot hold) nothing of it is appended."""
        if not _MIN_MILLIS <= timestamp <= _MAX_MILLIS:
            raise _timestamp_error(self._topic, self._partition, offset, timestamp)
        cdef int64_t micros = <int64_t>timestamp * 1000
        cdef Mark mark = self._mark()
        try:
            if self._with_headers:
                for header_key, header_value in headers or ():
                    name = header_key.encode('utf-8')
                    _var_append(&self._header_keys, name, len(name))
                    _var_append(&self._header_values,
                                <const char*>header_value if header_value is not None else NULL,
                                -1 if header_value is None else len(header_value))
                if headers:
                    self._end_header_list(True)
                else:
                    self._append_no_headers()
            _var_append(&self._keys, <const char*>key if key is not None else NULL, -1 if key is None else len(key))
            _var_append(&self._values, <const char*>value if value is not None else NULL,
                        -1 if value is None else len(value))
            self._append_fixed(offset, micros, timestamp_type, leader_epoch)
        except BaseException:
            self._rewind(mark)
            raise

    def take(self):
        """The rows appended so far as a ``pyarrow.RecordBatch`` of the schema; the columns start empty again."""
        cdef Py_ssize_t rows = self._rows, row
        cdef Py_ssize_t topic_size = len(self._topic)
        if topic_size * rows > INT32_MAX:
            raise OverflowError('topic names of one Arrow batch over 2 GiB')
        topic_offsets, topics, partitions = (_pa.allocate_buffer((rows + 1) * sizeof(int32_t)),
                                             _pa.allocate_buffer(topic_size * rows),
                                             _pa.allocate_buffer(rows * sizeof(int32_t)))
        cdef int32_t* offsets_at = <int32_t*><uintptr_t>topic_offsets.address
        cdef char* topics_at = <char*><uintptr_t>topics.address
        cdef int32_t* partitions_at = <int32_t*><uintptr_t>partitions.address
        cdef const char* topic = self._topic
        for row in range(rows):
            offsets_at[row] = <int32_t>(row * topic_size)
            memcpy(topics_at + row * topic_size, topic, topic_size)
            partitions_at[row] = self._partition
        offsets_at[rows] = <int32_t>(rows * topic_size)
        try:
            schema = self._schema
            arrays = [_var_array(&self._keys, _pa.binary()), _var_array(&self._values, _pa.binary()),
                      _pa.Array.from_buffers(_pa.string(), rows, [None, topic_offsets, topics]),
                      _pa.Array.from_buffers(_pa.int32(), rows, [None, partitions]),
                      _fixed_array(_pa.int64(), rows, &self._offsets),
                      _fixed_array(schema.field('timestamp').type, rows, &self._timestamps),
                      _fixed_array(_pa.int32(), rows, &self._timestamp_types)]
            if self._with_headers:
                arrays.append(self._headers_array(schema.field('headers').type))
            arrays.append(_fixed_array(_pa.int32(), rows, &self._leader_epochs))
            return _pa.RecordBatch.from_arrays(arrays, schema=schema)
        finally:
            self._clear()

    cdef object _headers_array(self, object kind):
        entry = kind.value_type
        if self._header_lists.length == 0:
            _put_int32(&self._header_lists, 0)
        entries = _pa.Array.from_buffers(entry, self._header_keys.values, [None], children=[
            _var_array(&self._header_keys, entry.field('key').type),
            _var_array(&self._header_values, entry.field('value').type)])
        valid = _arrow_of(&self._header_lists_valid) if self._header_lists_nulls else None
        return _pa.Array.from_buffers(kind, self._rows, [
            valid, _arrow_of(&self._header_lists)],
            null_count=self._header_lists_nulls, children=[entries])

    cdef void _clear(self) noexcept:
        _var_clear(&self._keys)
        _var_clear(&self._values)
        _var_clear(&self._header_keys)
        _var_clear(&self._header_values)
        self._offsets.length = self._timestamps.length = self._timestamp_types.length = 0
        self._leader_epochs.length = self._header_lists_valid.length = self._header_lists.length = 0
        self._header_lists_nulls = self._rows = 0


cdef bint _header_keys_decode(const unsigned char* buf, Py_ssize_t end, RecordFrame* frame) except -1:
    """Whether the header keys of a framed record are UTF-8, as kafka-python decodes them: a record it refuses is
    refused whatever its offset and whether the schema has a headers column."""
    cdef Py_ssize_t pos = frame.headers_at, key_at = 0, value_at = 0
    cdef int64_t header, key_length = 0, value_length = 0
    for header in range(frame.header_count):
        read_header(buf, end, &pos, &key_at, &key_length, &value_at, &value_length)
        if not _ascii(buf + key_at, key_length):
            try:
                PyUnicode_DecodeUTF8(<const char*>buf + key_at, key_length, NULL)
            except UnicodeDecodeError:
                return False
    return True


cdef object _fixed_array(object kind, Py_ssize_t rows, Buffer* values):
    return _pa.Array.from_buffers(kind, rows, [None, _arrow_of(values)])


#: the milliseconds a Spark timestamp (microseconds in an int64) holds
_MIN_MILLIS = -(2 ** 63) // 1000 + 1
_MAX_MILLIS = (2 ** 63 - 1) // 1000


cdef object _timestamp_error(bytes topic, int32_t partition, int64_t offset, object timestamp):
    return OverflowError(f'{topic.decode()}-{partition} offset {offset}: timestamp {timestamp} ms is outside what a '
                         'Spark timestamp holds (microseconds in 64 bits)')
