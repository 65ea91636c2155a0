# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled record walker: :class:`kafka_kip._codec.record_walk.PyRecordWalk`, in C, with the same results."""
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from kafka_kip._codec.malformed import Finding, MalformedRecords

cdef enum:
    VARINT_MAX_BYTES = 5
    VARLONG_MAX_BYTES = 10

cdef enum:
    OK = 0
    PAST_END = 1        # a field runs past the bytes given
    LONG_VARINT = 2
    LONG_VARLONG = 3
    NEGATIVE_HEADERS = 4
    NEGATIVE_HEADER_KEY = 5


cdef inline int read_varint(const unsigned char* data, Py_ssize_t end, Py_ssize_t* pos, int32_t* out) noexcept nogil:
    cdef uint64_t value = 0
    cdef unsigned char byte
    cdef int shift = 0
    cdef uint32_t raw
    while shift < 7 * VARINT_MAX_BYTES:
        if pos[0] >= end:
            return PAST_END
        byte = data[pos[0]]
        pos[0] += 1
        value |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            raw = <uint32_t>value
            out[0] = <int32_t>((raw >> 1) ^ (-(raw & 1)))
            return OK
        shift += 7
    return LONG_VARINT


cdef inline int read_varlong(const unsigned char* data, Py_ssize_t end, Py_ssize_t* pos, int64_t* out) noexcept nogil:
    cdef uint64_t value = 0
    cdef unsigned char byte
    cdef int shift = 0
    while shift < 7 * VARLONG_MAX_BYTES:
        if pos[0] >= end:
            return PAST_END
        byte = data[pos[0]]
        pos[0] += 1
        if shift < 64:
            value |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            out[0] = <int64_t>((value >> 1) ^ (-(value & 1)))
            return OK
        shift += 7
    return LONG_VARLONG


cdef inline int skip_sized(const unsigned char* data, Py_ssize_t end, Py_ssize_t* pos) noexcept nogil:
    """Skip a field of varint size (a negative size, a null, has no bytes)."""
    cdef int32_t size
    cdef int status = read_varint(data, end, pos, &size)
    if status == OK and size > 0:
        pos[0] += size
    return status


cdef class RecordWalk:
    """See :class:`kafka_kip._codec.record_walk.PyRecordWalk`."""

    cdef public int64_t count
    cdef public int64_t walked
    cdef public int64_t gap_index
    cdef public int64_t gap_delta
    cdef public int64_t min_timestamp_delta
    cdef public int64_t max_timestamp_delta
    cdef public int64_t null_keys
    cdef public int64_t first_null_key
    cdef int32_t _bad_value  # the negative header count, or the index of the header with a negative key length

    def __init__(self, int64_t count):
        self.count = count
        self.walked = 0
        self.gap_index = -1
        self.gap_delta = 0
        self.min_timestamp_delta = 0
        self.max_timestamp_delta = 0
        self.null_keys = 0
        self.first_null_key = -1

    def feed(self, data, Py_ssize_t pos, bint final):
        cdef const unsigned char[::1] view = data
        cdef const unsigned char* buf = &view[0] if view.shape[0] else NULL
        cdef Py_ssize_t end = view.shape[0]
        cdef int64_t index = self.walked
        cdef int64_t count = self.count
        cdef Py_ssize_t start, record_end
        cdef int32_t size
        cdef int status
        try:
            while index < count:
                if pos >= end:
                    if final:
                        raise MalformedRecords(index, Finding.ENDS_EARLY, count=count)
                    break
                start = pos
                status = read_varint(buf, end, &pos, &size)
                if status == PAST_END:
                    if final:
                        raise MalformedRecords(index, Finding.PAST_END)
                    pos = start
                    break
                if status == LONG_VARINT:
                    raise MalformedRecords(index, Finding.LONG_VARINT, name='varint', max_bytes=VARINT_MAX_BYTES)
                if size < 0:
                    raise MalformedRecords(index, Finding.NEGATIVE_LENGTH)
                record_end = pos + size
                if record_end > end:
                    if final:
                        raise MalformedRecords(index, Finding.PAST_END)
                    pos = start
                    break
                pos += 1  # attributes
                status = self._fields(buf, end, &pos, index)
                if status == LONG_VARINT:
                    raise MalformedRecords(index, Finding.LONG_VARINT, name='varint', max_bytes=VARINT_MAX_BYTES)
                if status == LONG_VARLONG:
                    raise MalformedRecords(index, Finding.LONG_VARINT, name='varlong', max_bytes=VARLONG_MAX_BYTES)
                if status == NEGATIVE_HEADERS:
                    raise MalformedRecords(index, Finding.NEGATIVE_HEADERS, headers=self._bad_value)
                if status == NEGATIVE_HEADER_KEY:
                    raise MalformedRecords(index, Finding.NEGATIVE_HEADER_KEY, header=self._bad_value)
                if status == PAST_END or pos != record_end:
                    raise MalformedRecords(index, Finding.NOT_FILLED, size=size)
                index += 1
        finally:
            self.walked = index
        if index == count and pos < end:
            raise MalformedRecords(index, Finding.TRAILING_BYTES, count=count)
        return pos

    cdef int _fields(self, const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, int64_t index) noexcept:
        """Read one record's fields after its attributes byte; a status, ``pos`` after them."""
        cdef int64_t delta
        cdef int32_t value, headers, header
        cdef int status = read_varlong(buf, end, pos, &delta)
        if status:
            return status
        if index == 0:
            self.min_timestamp_delta = self.max_timestamp_delta = delta
        elif delta < self.min_timestamp_delta:
            self.min_timestamp_delta = delta
        elif delta > self.max_timestamp_delta:
            self.max_timestamp_delta = delta
        status = read_varint(buf, end, pos, &value)
        if status:
            return status
        if value != index and self.gap_index < 0:
            self.gap_index = index
            self.gap_delta = value
        status = read_varint(buf, end, pos, &value)  # key size
        if status:
            return status
        if value < 0:
            self.null_keys += 1
            if self.first_null_key < 0:
                self.first_null_key = index
        else:
            pos[0] += value
        status = skip_sized(buf, end, pos)  # the value
        if status:
            return status
        status = read_varint(buf, end, pos, &headers)
        if status:
            return status
        if headers < 0:
            self._bad_value = headers
            return NEGATIVE_HEADERS
        for header in range(headers):
            status = read_varint(buf, end, pos, &value)
            if status:
                return status
            if value < 0:
                self._bad_value = header
                return NEGATIVE_HEADER_KEY
            pos[0] += value
            status = skip_sized(buf, end, pos)  # the header's value
            if status:
                return status
        return OK
