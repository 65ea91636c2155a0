# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled record codec: v2 record batches decoded straight into kafka-python's ``ConsumerRecord``.

The decoder takes the well-formed case only. Whatever it does not take exactly as kafka-python would (bytes
past the end, a varint over 64 bits, a negative header count, invalid UTF-8, a size that does not add up,
trailing bytes, an offset or timestamp outside int64) makes it return None, and the caller hands the batch
to kafka-python's own code, which then yields the same records and raises the same error.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE, PyList_New
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint64_t

cdef extern from *:
    """
    /* A new instance of a tuple subclass (a namedtuple) with n empty slots, as tuple.__new__ makes it. */
    static PyObject* kip_alloc_tuple_of(PyObject* type, Py_ssize_t n) {
        return ((PyTypeObject*)type)->tp_alloc((PyTypeObject*)type, n);
    }
    static int kip_add_overflows(int64_t a, int64_t b, int64_t* out) {
        return __builtin_add_overflow(a, b, out);
    }
    """
    object kip_alloc_tuple_of(object type, Py_ssize_t n)
    bint kip_add_overflows(int64_t a, int64_t b, int64_t* out) nogil

# ConsumerRecord's fields, in order
cdef enum:
    F_TOPIC = 0
    F_PARTITION = 1
    F_LEADER_EPOCH = 2
    F_OFFSET = 3
    F_TIMESTAMP = 4
    F_TIMESTAMP_TYPE = 5
    F_KEY = 6
    F_VALUE = 7
    F_HEADERS = 8
    F_CHECKSUM = 9
    F_KEY_SIZE = 10
    F_VALUE_SIZE = 11
    F_HEADER_SIZE = 12
    N_FIELDS = 13


class DeserializerStopIteration(Exception):
    """A deserializer raised StopIteration (which would otherwise end the record iteration silently)."""


cdef inline void _set(object record, Py_ssize_t index, object value):
    Py_INCREF(value)
    PyTuple_SET_ITEM(record, index, value)


cdef inline int _varint(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, int64_t* out) noexcept nogil:
    """Zigzag varint at pos[0]: 0 and the value, or -1 where kafka-python would not give an int64."""
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char byte
    cdef Py_ssize_t p = pos[0]
    while True:
        if p >= end:
            return -1
        byte = buf[p]
        p += 1
        if shift == 63 and (byte & 0x7e):
            return -1  # more than 64 bits
        result |= (<uint64_t>(byte & 0x7f)) << shift
        if not (byte & 0x80):
            break
        shift += 7
        if shift >= 64:
            return -1
    pos[0] = p
    out[0] = <int64_t>((result >> 1) ^ (-(result & 1)))
    return 0


cdef class Progress:
    """Where a partition's fetched records stand: kafka-python's PartitionRecords counters, kept in C so that
    handing out a record costs no Python attribute writes."""

    cdef int64_t _next_fetch_offset
    cdef object _next_fetch_offset_big  # a value outside int64 set from Python (never by the decoder)
    cdef public int64_t records_read
    cdef public int64_t bytes_read

    @property
    def next_fetch_offset(self):
        if self._next_fetch_offset_big is not None:
            return self._next_fetch_offset_big
        return self._next_fetch_offset

    @next_fetch_offset.setter
    def next_fetch_offset(self, value):
        try:
            self._next_fetch_offset = value
            self._next_fetch_offset_big = None
        except OverflowError:
            self._next_fetch_offset_big = value


cdef class DecodedBatch:
    """The records of one batch, handed out one at a time; each one moves ``progress`` as kafka-python's
    generator does (deserializing first, so a deserializer error leaves the counters as they were)."""

    cdef list _records
    cdef int64_t* _sizes
    cdef int64_t* _offsets
    cdef Py_ssize_t _next
    cdef Py_ssize_t _count
    cdef Progress _progress
    cdef object _deserialize
    cdef object _key_deserializer
    cdef object _value_deserializer
    cdef object _record_type

    def __cinit__(self):
        self._sizes = NULL
        self._offsets = NULL

    def __dealloc__(self):
        PyMem_Free(self._sizes)
        PyMem_Free(self._offsets)

    def __len__(self):
        return self._count

    def __iter__(self):
        return self

    def __next__(self):
        cdef Py_ssize_t index = self._next
        if index >= self._count:
            raise StopIteration
        cdef object record = <object>PyList_GET_ITEM(self._records, index)
        if self._key_deserializer is not None or self._value_deserializer is not None:
            record = self._deserialized(record)
        self._next = index + 1
        self._progress._next_fetch_offset = self._offsets[index] + 1
        self._progress._next_fetch_offset_big = None
        self._progress.records_read += 1
        self._progress.bytes_read += self._sizes[index]
        return record

    cdef object _deserialized(self, object raw):
        cdef object topic = <object>PyTuple_GET_ITEM(raw, F_TOPIC)
        cdef object headers = <object>PyTuple_GET_ITEM(raw, F_HEADERS)
        cdef object key = <object>PyTuple_GET_ITEM(raw, F_KEY)
        cdef object value = <object>PyTuple_GET_ITEM(raw, F_VALUE)
        try:
            if self._key_deserializer is not None:
                key = self._deserialize(self._key_deserializer, topic, headers, key)
            if self._value_deserializer is not None:
                value = self._deserialize(self._value_deserializer, topic, headers, value)
        except StopIteration as stop:
            raise DeserializerStopIteration() from stop
        cdef object record = kip_alloc_tuple_of(self._record_type, N_FIELDS)
        cdef Py_ssize_t field
        for field in range(N_FIELDS):
            if field == F_KEY:
                _set(record, field, key)
            elif field == F_VALUE:
                _set(record, field, value)
            else:
                _set(record, field, <object>PyTuple_GET_ITEM(raw, field))
        return record


def decode_records(object data, Py_ssize_t start, int64_t count, int64_t base_offset, int64_t first_timestamp,
                   int64_t max_timestamp, bint log_append_time, object leader_epoch, object topic,
                   object partition, object record_type, Progress progress, object deserialize,
                   object key_deserializer, object value_deserializer):
    """The ``count`` records of a v2 batch whose (uncompressed) records start at ``data[start]``.

    Returns a :class:`DecodedBatch` of ``record_type`` (kafka-python's ConsumerRecord) instances with the
    raw key and value (deserialized as they are handed out), or None if the records are not exactly what
    kafka-python would decode without error (see the module docstring).
    """
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef DecodedBatch batch = DecodedBatch()
    try:
        if count < 0 or count > view.len - start:
            return None  # every record takes at least one byte: kafka-python would run out of them
        batch._sizes = <int64_t*>PyMem_Malloc(max(count, 1) * sizeof(int64_t))
        batch._offsets = <int64_t*>PyMem_Malloc(max(count, 1) * sizeof(int64_t))
        if batch._sizes == NULL or batch._offsets == NULL:
            raise MemoryError()
        batch._records = PyList_New(0)
        batch._progress = progress
        batch._deserialize = deserialize
        batch._key_deserializer = key_deserializer
        batch._value_deserializer = value_deserializer
        batch._record_type = record_type
        if not _decode_into(batch, <const unsigned char*>view.buf, start, view.len, count, base_offset,
                            first_timestamp, max_timestamp, log_append_time, leader_epoch, topic, partition,
                            record_type):
            return None
        batch._count = count
        return batch
    finally:
        PyBuffer_Release(&view)


cdef bint _decode_into(DecodedBatch batch, const unsigned char* buf, Py_ssize_t pos, Py_ssize_t end,
                       int64_t count, int64_t base_offset, int64_t first_timestamp, int64_t max_timestamp,
                       bint log_append_time, object leader_epoch, object topic, object partition,
                       object record_type) except -1:
    cdef int64_t length, attributes, timestamp_delta, offset_delta, key_length, value_length
    cdef int64_t header_count, header_key_length, header_value_length, offset, timestamp, header_size
    cdef Py_ssize_t record_start
    cdef int64_t index, header
    cdef object key, value, headers, header_key, header_value, record
    cdef object timestamp_type = 1 if log_append_time else 0
    for index in range(count):
        if _varint(buf, end, &pos, &length) < 0:
            return False
        record_start = pos
        if (_varint(buf, end, &pos, &attributes) < 0 or _varint(buf, end, &pos, &timestamp_delta) < 0
                or _varint(buf, end, &pos, &offset_delta) < 0):
            return False
        if log_append_time:
            timestamp = max_timestamp
        elif kip_add_overflows(first_timestamp, timestamp_delta, &timestamp):
            return False
        if kip_add_overflows(base_offset, offset_delta, &offset) or offset == 0x7fffffffffffffff:
            return False  # offset + 1 (the next fetch offset) must be an int64 too
        if _varint(buf, end, &pos, &key_length) < 0:
            return False
        if key_length >= 0:
            if key_length > end - pos:
                return False
            key = PyBytes_FromStringAndSize(<const char*>buf + pos, key_length)
            pos += key_length
        else:
            key = None
        if _varint(buf, end, &pos, &value_length) < 0:
            return False
        if value_length >= 0:
            if value_length > end - pos:
                return False
            value = PyBytes_FromStringAndSize(<const char*>buf + pos, value_length)
            pos += value_length
        else:
            value = None
        if _varint(buf, end, &pos, &header_count) < 0 or header_count < 0:
            return False
        headers = PyList_New(0)
        header_size = 0
        for header in range(header_count):
            if _varint(buf, end, &pos, &header_key_length) < 0 or header_key_length < 0:
                return False
            if header_key_length > end - pos:
                return False
            try:
                header_key = PyUnicode_DecodeUTF8(<const char*>buf + pos, header_key_length, NULL)
            except UnicodeDecodeError:
                return False
            pos += header_key_length
            if _varint(buf, end, &pos, &header_value_length) < 0:
                return False
            if header_value_length >= 0:
                if header_value_length > end - pos:
                    return False
                header_value = PyBytes_FromStringAndSize(<const char*>buf + pos, header_value_length)
                pos += header_value_length
                header_size += header_key_length + header_value_length
            else:
                header_value = None
                header_size += header_key_length
            PyList_Append(headers, (header_key, header_value))
        if pos - record_start != length:
            return False
        record = kip_alloc_tuple_of(record_type, N_FIELDS)
        _set(record, F_TOPIC, topic)
        _set(record, F_PARTITION, partition)
        _set(record, F_LEADER_EPOCH, leader_epoch)
        _set(record, F_OFFSET, offset)
        _set(record, F_TIMESTAMP, timestamp)
        _set(record, F_TIMESTAMP_TYPE, timestamp_type)
        _set(record, F_KEY, key)
        _set(record, F_VALUE, value)
        _set(record, F_HEADERS, headers)
        _set(record, F_CHECKSUM, None)
        _set(record, F_KEY_SIZE, -1 if key is None else key_length)
        _set(record, F_VALUE_SIZE, -1 if value is None else value_length)
        _set(record, F_HEADER_SIZE, header_size if header_count else -1)
        PyList_Append(batch._records, record)
        batch._sizes[index] = length
        batch._offsets[index] = offset
    return pos == end  # kafka-python refuses bytes left over after the last record
