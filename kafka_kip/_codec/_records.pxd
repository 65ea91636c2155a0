# cython: language_level=3
"""The framing of a v2 batch's records, shared by the compiled codecs (_compiled.pyx, _columns.pyx, _encoder.pyx).

:func:`read_frame` walks one record without creating an object: where its key, value and headers are, its
offset and timestamp. It takes the well-formed case only and answers False for whatever kafka-python would not
decode without error (bytes past the end, a varint over 64 bits, a negative header count or header key length,
a size that does not add up, an offset or timestamp outside int64); the decoders then hand the batch to
kafka-python's own code, which raises kafka-python's error. Header keys are checked for UTF-8 by the decoders
that build them.
"""
from libc.stdint cimport INT64_MAX, int64_t, uint64_t


cdef extern from *:
    """
    static int kip_add_overflows(int64_t a, int64_t b, int64_t* out) {
        return __builtin_add_overflow(a, b, out);
    }
    """
    bint kip_add_overflows(int64_t a, int64_t b, int64_t* out) nogil


cdef struct RecordFrame:
    int64_t size            # the record's length field: its bytes after that field
    int64_t offset
    int64_t timestamp
    Py_ssize_t key_at       # where the key's bytes start (meaningless for a null key)
    int64_t key_length      # negative: null
    Py_ssize_t value_at
    int64_t value_length    # negative: null
    int64_t header_count
    Py_ssize_t headers_at   # the first header


cdef inline bint read_varint(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, int64_t* out) noexcept nogil:
    """Zigzag varint at pos[0] into out[0], moving pos[0] past it; False where kafka-python would not give an
    int64 (past ``end``, more than 64 bits)."""
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char byte
    cdef Py_ssize_t p = pos[0]
    while True:
        if p >= end:
            return False
        byte = buf[p]
        p += 1
        if shift == 63 and (byte & 0x7e):
            return False  # more than 64 bits
        result |= (<uint64_t>(byte & 0x7f)) << shift
        if not (byte & 0x80):
            break
        shift += 7
        if shift >= 64:
            return False
    pos[0] = p
    out[0] = <int64_t>((result >> 1) ^ (-(result & 1)))
    return True


cdef inline bint _read_bytes(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, Py_ssize_t* at,
                             int64_t* length) noexcept nogil:
    """A length-prefixed byte string (a negative length: null): where it starts and its length, pos[0] moved past
    it."""
    if not read_varint(buf, end, pos, length):
        return False
    at[0] = pos[0]
    if length[0] >= 0:
        if length[0] > end - pos[0]:
            return False
        pos[0] += length[0]
    return True


cdef inline bint read_header(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, Py_ssize_t* key_at,
                             int64_t* key_length, Py_ssize_t* value_at, int64_t* value_length) noexcept nogil:
    """One header at pos[0] (key never null, value null for a negative length), pos[0] moved past it."""
    return (_read_bytes(buf, end, pos, key_at, key_length) and key_length[0] >= 0
            and _read_bytes(buf, end, pos, value_at, value_length))


cdef inline bint read_frame(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, int64_t base_offset,
                            int64_t first_timestamp, int64_t max_timestamp, bint log_append_time,
                            RecordFrame* frame) noexcept nogil:
    """The record at pos[0] into ``frame``, pos[0] moved past it; False if it is not exactly well formed."""
    cdef int64_t attributes, timestamp_delta, offset_delta, header
    cdef Py_ssize_t record_start, header_key_at, header_value_at
    cdef int64_t header_key_length, header_value_length
    if not read_varint(buf, end, pos, &frame.size):
        return False
    record_start = pos[0]
    if not (read_varint(buf, end, pos, &attributes) and read_varint(buf, end, pos, &timestamp_delta)
            and read_varint(buf, end, pos, &offset_delta)):
        return False
    if log_append_time:
        frame.timestamp = max_timestamp
    elif kip_add_overflows(first_timestamp, timestamp_delta, &frame.timestamp):
        return False
    if kip_add_overflows(base_offset, offset_delta, &frame.offset) or frame.offset == INT64_MAX:
        return False  # offset + 1 (the next fetch offset) must be an int64 too
    if not (_read_bytes(buf, end, pos, &frame.key_at, &frame.key_length)
            and _read_bytes(buf, end, pos, &frame.value_at, &frame.value_length)):
        return False
    if not read_varint(buf, end, pos, &frame.header_count) or frame.header_count < 0:
        return False
    frame.headers_at = pos[0]
    for header in range(frame.header_count):
        if not read_header(buf, end, pos, &header_key_at, &header_key_length, &header_value_at, &header_value_length):
            return False
    return pos[0] - record_start == frame.size


cdef inline Py_ssize_t varint_size(int64_t value) noexcept nogil:
    """The bytes of ``value`` as a zigzag varint."""
    cdef uint64_t zigzag = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef Py_ssize_t size = 1
    while zigzag > 0x7f:
        zigzag >>= 7
        size += 1
    return size


cdef inline Py_ssize_t write_varint(char* out, int64_t value) noexcept nogil:
    """``value`` as a zigzag varint at ``out``; the bytes written."""
    cdef uint64_t zigzag = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef Py_ssize_t size = 0
    while zigzag > 0x7f:
        out[size] = <char>(0x80 | (zigzag & 0x7f))
        zigzag >>= 7
        size += 1
    out[size] = <char>zigzag
    return size + 1
