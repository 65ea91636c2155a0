# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled record codec: kafka-python's record hot paths, with kafka-python's objects and results.

Consuming: :func:`decode_records` decodes the records of a v2 batch straight into kafka-python's
``ConsumerRecord`` s (:class:`DecodedBatch`, moving :class:`Progress`). It takes the well-formed case only:
whatever it does not take exactly as kafka-python would (bytes past the end, a varint over 64 bits, a negative
header count, invalid UTF-8, a size that does not add up, trailing bytes, an offset or timestamp outside
int64) makes it return None, and the caller hands the batch to kafka-python's own code, which then yields
the same records and raises the same error (kafka_kip.consumer.records).

Producing: :class:`RecordBatchBuilder` (kafka-python's ``MemoryRecordsBuilder`` for v2, byte for byte),
:func:`send_plain` / :func:`append_plain` / :func:`append_record` (a plain record from ``send()`` into its
batch), :func:`complete_records` (a batch's record futures), :func:`estimate_size`, :class:`Counter`
(kafka_kip.producer.plain_send, kafka_kip.producer.records).
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_New
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject_Length
from cpython.ref cimport PyObject, Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

from _thread import allocate_lock as _allocate_lock
import logging as _logging
import struct as _struct
import time as _time

from kafka.errors import IllegalStateError as _IllegalStateError
from kafka.future import Future as _Future
from kafka.producer.future import FutureRecordMetadata as _FutureRecordMetadata
from kafka.record.default_records import DefaultRecordBatch as _DefaultRecordBatch
from kafka.record.default_records import DefaultRecordMetadata as _DefaultRecordMetadata
from kafka.record.memory_records import MemoryRecords as _MemoryRecords
from kafka.record.util import calc_crc32c as _calc_crc32c
from kafka.structs import TopicPartition as _TopicPartition
import kafka.codec as _kafka_codec

from kafka_kip._codec._records cimport (
    RecordFrame,
    kip_add_overflows,
    read_frame,
    read_header,
    varint_size as _varint_size,
    write_varint as _write_varint,
)

cdef extern from *:
    """
    /* A new instance of a tuple subclass (a namedtuple) with n empty slots, as tuple.__new__ makes it. */
    static PyObject* kip_alloc_tuple_of(PyObject* type, Py_ssize_t n) {
        return ((PyTypeObject*)type)->tp_alloc((PyTypeObject*)type, n);
    }
    """
    object kip_alloc_tuple_of(object type, Py_ssize_t n)

cdef extern from *:
    """
    #include "structmember.h"
    /* Where a __slots__ attribute lives in an instance: the offset its member descriptor holds. */
    static Py_ssize_t kip_slot_offset(PyObject* descriptor) {
        PyMemberDef* member;
        if (!PyObject_TypeCheck(descriptor, &PyMemberDescr_Type)) {
            PyErr_SetString(PyExc_TypeError, "not a __slots__ attribute");
            return -1;
        }
        member = ((PyMemberDescrObject*)descriptor)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY)) {
            PyErr_SetString(PyExc_TypeError, "not a writable object __slots__ attribute");
            return -1;
        }
        return member->offset;
    }
    /* The object in a slot (borrowed; NULL if unset). */
    static PyObject* kip_slot(PyObject* instance, Py_ssize_t offset) {
        return *(PyObject**)((char*)instance + offset);
    }
    static void kip_set_slot(PyObject* instance, Py_ssize_t offset, PyObject* value) {
        PyObject** slot = (PyObject**)((char*)instance + offset);
        PyObject* old = *slot;
        Py_INCREF(value);
        *slot = value;
        Py_XDECREF(old);
    }
    /* An instance of a __slots__ class with every slot unset, as object.__new__ makes it. */
    static PyObject* kip_alloc(PyObject* type) {
        return ((PyTypeObject*)type)->tp_alloc((PyTypeObject*)type, 0);
    }
    """
    Py_ssize_t kip_slot_offset(object descriptor) except -1
    PyObject* kip_slot(object instance, Py_ssize_t offset)
    void kip_set_slot(object instance, Py_ssize_t offset, object value)
    object kip_alloc(object type)
    void PyObject_GC_UnTrack(object)

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
        if start < 0 or start > view.len or count < 0 or count > view.len - start:
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
    cdef RecordFrame frame
    cdef int64_t index, header, header_size
    cdef int64_t header_key_length = 0, header_value_length = 0
    cdef Py_ssize_t header_pos, header_key_at = 0, header_value_at = 0
    cdef object key, value, headers, header_key, header_value, record
    cdef object timestamp_type = 1 if log_append_time else 0
    for index in range(count):
        if not read_frame(buf, end, &pos, base_offset, first_timestamp, max_timestamp, log_append_time, &frame):
            return False
        key = None if frame.key_length < 0 else PyBytes_FromStringAndSize(<const char*>buf + frame.key_at,
                                                                          frame.key_length)
        value = None if frame.value_length < 0 else PyBytes_FromStringAndSize(<const char*>buf + frame.value_at,
                                                                              frame.value_length)
        headers = PyList_New(0)
        header_size = 0
        header_pos = frame.headers_at
        for header in range(frame.header_count):
            read_header(buf, end, &header_pos, &header_key_at, &header_key_length, &header_value_at,
                        &header_value_length)
            try:
                header_key = PyUnicode_DecodeUTF8(<const char*>buf + header_key_at, header_key_length, NULL)
            except UnicodeDecodeError:
                return False
            if header_value_length >= 0:
                header_value = PyBytes_FromStringAndSize(<const char*>buf + header_value_at, header_value_length)
                header_size += header_key_length + header_value_length
            else:
                header_value = None
                header_size += header_key_length
            PyList_Append(headers, (header_key, header_value))
        record = kip_alloc_tuple_of(record_type, N_FIELDS)
        _set(record, F_TOPIC, topic)
        _set(record, F_PARTITION, partition)
        _set(record, F_LEADER_EPOCH, leader_epoch)
        _set(record, F_OFFSET, frame.offset)
        _set(record, F_TIMESTAMP, frame.timestamp)
        _set(record, F_TIMESTAMP_TYPE, timestamp_type)
        _set(record, F_KEY, key)
        _set(record, F_VALUE, value)
        _set(record, F_HEADERS, headers)
        _set(record, F_CHECKSUM, None)
        _set(record, F_KEY_SIZE, -1 if key is None else frame.key_length)  # (any negative length is null)
        _set(record, F_VALUE_SIZE, -1 if value is None else frame.value_length)
        _set(record, F_HEADER_SIZE, header_size if frame.header_count else -1)
        PyList_Append(batch._records, record)
        batch._sizes[index] = frame.size
        batch._offsets[index] = frame.offset
    return pos == end  # kafka-python refuses bytes left over after the last record


# -- producing --------------------------------------------------------------------------------------------


cdef object _HEADER = _DefaultRecordBatch.HEADER_STRUCT
cdef Py_ssize_t _HEADER_SIZE = _DefaultRecordBatch.HEADER_STRUCT.size
cdef Py_ssize_t _ATTRIBUTES_OFFSET = _DefaultRecordBatch.ATTRIBUTES_OFFSET
cdef Py_ssize_t _CRC_OFFSET = _DefaultRecordBatch.CRC_OFFSET
cdef int _TRANSACTIONAL = _DefaultRecordBatch.TRANSACTIONAL_MASK
cdef object _CRC = _struct.Struct('>I')
# kafka-python's encoders by compression type (the producer checked at construction that they are there)
cdef dict _ENCODERS = {1: 'gzip_encode', 2: 'snappy_encode', 3: 'lz4_encode', 4: 'zstd_encode'}
cdef tuple _BYTES_TYPES = (bytes, bytearray, memoryview)


cdef class _Payload:
    """The bytes of a key, value or header, as kafka-python writes them: its len() as the length, then its buffer."""
    cdef Py_buffer view
    cdef bint held
    cdef Py_ssize_t length

    cdef int take(self, object data) except -1:
        self.length = PyObject_Length(data)
        PyObject_GetBuffer(data, &self.view, PyBUF_SIMPLE)
        self.held = True
        return 0

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)


cdef inline Py_ssize_t _write_payload(char* out, _Payload payload):
    cdef Py_ssize_t written
    if payload is None:
        out[0] = 1  # varint -1: null
        return 1
    written = _write_varint(out, payload.length)
    memcpy(out + written, payload.view.buf, payload.view.len)
    return written + payload.view.len


cdef class RecordBatchBuilder:
    """kafka-python's ``MemoryRecordsBuilder`` for magic 2, compiled: the same methods, byte-identical batches.

    ``append`` writes the record straight into the batch buffer; ``close`` compresses with kafka-python's
    encoders and writes the header and CRC as kafka-python's builder does. The one difference: a timestamp
    outside int64, or one whose difference from the batch's first does not fit in int64, raises
    OverflowError (kafka-python would write a batch it cannot close or a broker cannot read).
    """

    cdef bytearray _buffer
    cdef int _magic
    cdef int _compression_type
    cdef Py_ssize_t _batch_size
    cdef bint _transactional
    cdef object _producer_id
    cdef object _producer_epoch
    cdef object _base_sequence
    cdef bint _has_timestamp
    cdef int64_t _first_timestamp
    cdef int64_t _max_timestamp
    cdef int64_t _next_offset
    cdef int64_t _last_offset
    cdef int64_t _records
    cdef bint _closed
    cdef Py_ssize_t _bytes_written
    #: KIP-253: the partition count the batch's records were partitioned with (-1: partitions given explicitly);
    #: kept here so that :func:`append_plain` compares it in C (kafka_kip.producer.partition_counts)
    cdef public int partition_count

    def __init__(self, int magic, int compression_type, Py_ssize_t batch_size, int64_t offset=0,
                 bint transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1):
        self.partition_count = -1
        if magic != 2:
            raise ValueError(f'RecordBatchBuilder builds message format v2 only, not magic {magic}')
        if compression_type not in (0, 1, 2, 3, 4):
            raise ValueError(f'compression type must be 0-4, got {compression_type}')
        self._magic = magic
        self._compression_type = compression_type
        self._batch_size = batch_size
        self._set_producer_state(producer_id, producer_epoch, base_sequence, transactional)
        self._next_offset = offset
        self._buffer = bytearray(_HEADER_SIZE)

    cdef int _append(self, object timestamp, object key, object value, object headers, int64_t* offset,
                     Py_ssize_t* size, int64_t* timestamp_ms, int64_t* header_size) except -1:
        """Append a record; 1 (offset, size, timestamp and kafka-python's header size set), or 0 if it
        does not fit."""
        if self._closed:
            return 0
        cdef int64_t record_offset = self._next_offset
        cdef int64_t ts
        if timestamp is None:
            ts = <int64_t>(_time.time() * 1000)
        elif type(timestamp) is not int:
            raise TypeError(timestamp)
        else:
            ts = timestamp
        if not (key is None or type(key) in _BYTES_TYPES):
            raise TypeError('Not supported type for key: {}'.format(type(key)))
        if not (value is None or type(value) in _BYTES_TYPES):
            raise TypeError('Not supported type for value: {}'.format(type(value)))
        cdef bint first = not self._has_timestamp
        cdef int64_t delta = 0
        if first:  # set before the record is encoded, as kafka-python does (even if encoding then fails)
            self._has_timestamp = True
            self._first_timestamp = ts
            self._max_timestamp = ts
        elif kip_add_overflows(ts, -self._first_timestamp, &delta):
            raise OverflowError(f'timestamp {ts} is too far from the batch\'s first timestamp {self._first_timestamp}')
        cdef _Payload key_bytes = None, value_bytes = None
        if key is not None:
            key_bytes = _Payload()
            key_bytes.take(key)
        if value is not None:
            value_bytes = _Payload()
            value_bytes.take(value)
        cdef Py_ssize_t count = len(headers)
        cdef list encoded = []
        cdef int64_t headers_size = 0
        cdef Py_ssize_t body = 1 + _varint_size(delta) + _varint_size(record_offset) + _varint_size(count)
        body += 1 if key_bytes is None else _varint_size(key_bytes.length) + key_bytes.view.len
        body += 1 if value_bytes is None else _varint_size(value_bytes.length) + value_bytes.view.len
        cdef _Payload name, data
        for header_key, header_value in headers:
            name = _Payload()
            name.take(header_key.encode('utf-8'))
            data = None
            if header_value is not None:
                data = _Payload()
                data.take(header_value)
            encoded.append((name, data))
            body += _varint_size(name.length) + name.view.len
            body += 1 if data is None else _varint_size(data.length) + data.view.len
        cdef Py_ssize_t required = body + _varint_size(body)
        cdef Py_ssize_t used = PyByteArray_GET_SIZE(self._buffer)
        if required + used > self._batch_size and not first:
            return 0
        if self._max_timestamp < ts:
            self._max_timestamp = ts
        PyByteArray_Resize(self._buffer, used + required)
        cdef char* out = PyByteArray_AS_STRING(self._buffer) + used
        out += _write_varint(out, body)
        out[0] = 0  # attributes
        out += 1
        out += _write_varint(out, delta)
        out += _write_varint(out, record_offset)
        out += _write_payload(out, key_bytes)
        out += _write_payload(out, value_bytes)
        out += _write_varint(out, count)
        for name, data in encoded:
            out += _write_payload(out, name)
            out += _write_payload(out, data)
            headers_size += name.length + (0 if data is None else data.length)
        self._records += 1
        self._last_offset = record_offset
        self._next_offset = record_offset + 1
        offset[0] = record_offset
        size[0] = required
        timestamp_ms[0] = ts
        header_size[0] = headers_size if count else -1
        return 1

    def append(self, timestamp, key, value, headers=None):
        """Append a record; its metadata (kafka-python's DefaultRecordMetadata), or None if it does not fit."""
        cdef int64_t offset, ts, header_size
        cdef Py_ssize_t size
        if not self._append(timestamp, key, value, [] if headers is None else headers, &offset, &size, &ts,
                            &header_size):
            return None
        return _DefaultRecordMetadata(offset, size, ts)

    def skip(self, offsets_to_skip):
        self._next_offset += offsets_to_skip

    def set_producer_state(self, producer_id, producer_epoch, base_sequence, is_transactional):
        if self._closed:
            raise _IllegalStateError('Trying to set producer state of an already closed batch. This indicates a '
                                     'bug on the client.')
        self._set_producer_state(producer_id, producer_epoch, base_sequence, is_transactional)

    cdef _set_producer_state(self, producer_id, producer_epoch, base_sequence, bint transactional):
        assert not transactional or producer_id != -1, 'Cannot write transactional messages without a valid producer ID'
        assert producer_id == -1 or producer_epoch != -1, 'Invalid negative producer epoch'
        assert producer_id == -1 or base_sequence != -1, 'Invalid negative sequence number'
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._transactional = transactional

    @property
    def producer_id(self):
        return self._producer_id

    @property
    def producer_epoch(self):
        return self._producer_epoch

    @property
    def base_sequence(self):
        return self._base_sequence

    def records(self):
        assert self._closed
        return _MemoryRecords(self._buffer)

    def close(self):
        """Compress (where it makes the batch smaller) and write the header; once only."""
        if self._closed:
            return
        self._bytes_written = PyByteArray_GET_SIZE(self._buffer)
        cdef int attributes = self._compressed()
        if self._transactional:
            attributes |= _TRANSACTIONAL
        buffer = self._buffer
        _HEADER.pack_into(buffer, 0, 0, len(buffer) - 12, 0, self._magic, 0, attributes, self._last_offset,
                          self._first_timestamp if self._has_timestamp else 0,
                          self._max_timestamp if self._has_timestamp else 0,
                          self._producer_id, self._producer_epoch, self._base_sequence, self._records)
        _CRC.pack_into(buffer, _CRC_OFFSET, _calc_crc32c(memoryview(buffer)[_ATTRIBUTES_OFFSET:]))
        self._closed = True

    cdef int _compressed(self) except -1:
        """Compress the records in place if that makes them smaller; the compression attribute to write."""
        if self._compression_type == 0:
            return 0
        data = bytes(self._buffer[_HEADER_SIZE:])
        compressed = getattr(_kafka_codec, _ENCODERS[self._compression_type])(data)
        if len(data) <= len(compressed):
            return 0
        del self._buffer[_HEADER_SIZE:]
        self._buffer += compressed
        return self._compression_type

    def size_in_bytes(self):
        return PyByteArray_GET_SIZE(self._buffer)

    def compression_rate(self):
        assert self._closed
        return PyByteArray_GET_SIZE(self._buffer) / <double>self._bytes_written

    def is_full(self):
        return self._closed or PyByteArray_GET_SIZE(self._buffer) >= self._batch_size

    def next_offset(self):
        return self._next_offset

    def buffer(self):
        assert self._closed
        return self._buffer


#: What a record future built here holds instead of kafka-python's two empty callback lists, until a callback
#: is registered (``kafka_kip.producer.records.RecordFuture`` makes the lists then).
NO_CALLBACKS = ()

cdef Py_ssize_t _IS_DONE, _VALUE, _EXCEPTION, _CALLBACKS, _ERRBACKS, _LOCK, _PRODUCE_FUTURE, _ARGS
cdef bint _slots_bound = False


def bind_future_slots():
    """Find where kafka-python's ``Future`` and ``FutureRecordMetadata`` keep their attributes (``__slots__``);
    raises TypeError or KeyError if they no longer keep them there. Record futures are built and completed
    directly in those slots once this succeeded (kafka_kip._patch.record_future checks the result)."""
    global _IS_DONE, _VALUE, _EXCEPTION, _CALLBACKS, _ERRBACKS, _LOCK, _PRODUCE_FUTURE, _ARGS, _slots_bound
    slots = vars(_Future)
    _IS_DONE, _VALUE, _EXCEPTION = (kip_slot_offset(slots[name]) for name in ('is_done', 'value', 'exception'))
    _CALLBACKS, _ERRBACKS, _LOCK = (kip_slot_offset(slots[name]) for name in ('_callbacks', '_errbacks', '_lock'))
    slots = vars(_FutureRecordMetadata)
    _PRODUCE_FUTURE, _ARGS = (kip_slot_offset(slots[name]) for name in ('_produce_future', 'args'))
    _slots_bound = True


cdef object _new_record_future(type future_type, object produce_future, tuple args, object lock):
    """A ``future_type`` in the state kafka-python's ``FutureRecordMetadata.__init__`` leaves it, minus the
    callback registration on ``produce_future``, with :data:`NO_CALLBACKS` for the callback lists and ``lock``
    (its batch's: kafka-python's Future never calls out while holding its lock, so sharing one cannot
    deadlock)."""
    if not _slots_bound:
        raise RuntimeError('bind_future_slots() has not run')
    PyObject_GC_UnTrack(args)  # ints and None only: the collector would untrack it itself, later
    cdef object future = kip_alloc(future_type)
    kip_set_slot(future, _IS_DONE, False)
    kip_set_slot(future, _VALUE, None)
    kip_set_slot(future, _EXCEPTION, None)
    kip_set_slot(future, _CALLBACKS, NO_CALLBACKS)
    kip_set_slot(future, _ERRBACKS, NO_CALLBACKS)
    kip_set_slot(future, _LOCK, lock)
    kip_set_slot(future, _PRODUCE_FUTURE, produce_future)
    kip_set_slot(future, _ARGS, args)
    return future


def new_record_future(type future_type, object produce_future, tuple args, object lock=None):
    """See :func:`_new_record_future` (a lock of its own by default; for checks and tests)."""
    return _new_record_future(future_type, produce_future, args, _allocate_lock() if lock is None else lock)


cdef bint _quiet(object future):
    """Whether nobody registered a callback on ``future`` and it is not done (read under its lock)."""
    return (<object>kip_slot(future, _CALLBACKS) is NO_CALLBACKS and <object>kip_slot(future, _ERRBACKS) is NO_CALLBACKS
            and <object>kip_slot(future, _IS_DONE) is False)


cdef void _succeed_quietly(object future, object metadata):
    """The state kafka-python's ``Future.success`` leaves a future without callbacks in (under its lock)."""
    kip_set_slot(future, _VALUE, metadata)
    kip_set_slot(future, _IS_DONE, True)
    kip_set_slot(future, _CALLBACKS, None)
    kip_set_slot(future, _ERRBACKS, None)


def succeed(object future, object metadata):
    """Complete ``future`` with ``metadata`` as ``future.success(metadata)`` does."""
    lock = <object>kip_slot(future, _LOCK)
    lock.acquire()
    try:
        quiet = _quiet(future)
        if quiet:
            _succeed_quietly(future, metadata)
    finally:
        lock.release()
    if not quiet:
        future.success(metadata)


def append_record(object batch, RecordBatchBuilder builder, object timestamp, object key, object value,
                  object headers, object now, type future_type):
    """kafka-python's ``ProducerBatch.try_append`` for a batch built by :class:`RecordBatchBuilder`: the record's
    future (a ``future_type``, whose batch completes it without a callback), or None if it does not fit."""
    cdef int64_t offset, ts, header_size
    cdef Py_ssize_t size
    if not builder._append(timestamp, key, value, headers, &offset, &size, &ts, &header_size):
        return None
    if now is None:
        now = _time.monotonic()
    if batch.max_record_size < size:
        batch.max_record_size = size
    batch.last_append = now
    produce_future = batch.produce_future
    future = _new_record_future(future_type, produce_future, (
        offset, ts, None, -1 if key is None else len(key), -1 if value is None else len(value), header_size),
        produce_future.records_lock)
    PyList_Append(batch._record_futures, future)
    return future


def complete_records(object batch_future, list futures, tuple result, object metadata_type,
                     object log_end_offset=None):
    """Complete the record futures of a batch acknowledged with ``result`` (base offset, log append time,
    record errors) as kafka-python's ``FutureRecordMetadata._produce_success`` does: in order, each with its
    RecordMetadata (built in one step) or its record error. Futures rebound to another batch are skipped.
    ``log_end_offset`` (KIP-391; None: not reported) is set on each RecordMetadata as its attribute of that name.

    The futures share the batch's lock (``batch_future.records_lock``), taken once for all of them; it is let
    go around a future with callbacks, which kafka-python's ``success`` completes (running them).
    """
    base_offset, log_append_time, record_errors = result
    if record_errors is not None:
        for future in futures:
            if future._produce_future is batch_future:
                future._produce_success(result)
        return
    cdef bint broker_time = log_append_time is not None and log_append_time != -1
    cdef object topic_partition = batch_future.topic_partition
    cdef object topic = topic_partition[0], partition = topic_partition[1]
    cdef bint untracked = type(topic) is str and type(partition) is int
    cdef object metadata, args
    cdef object lock = batch_future.records_lock
    if untracked:
        PyObject_GC_UnTrack(topic_partition)  # (str, int): nothing in it to collect
    lock.acquire()
    try:
        for future in futures:
            if <object>kip_slot(future, _PRODUCE_FUTURE) is not batch_future:
                continue
            args = <object>kip_slot(future, _ARGS)
            metadata = kip_alloc_tuple_of(metadata_type, 9)
            _set(metadata, 0, topic)
            _set(metadata, 1, partition)
            _set(metadata, 2, topic_partition)
            _set(metadata, 3, base_offset + args[0] if base_offset != -1 and args[0] is not None else base_offset)
            _set(metadata, 4, log_append_time if broker_time else args[1])
            _set(metadata, 5, args[2])
            _set(metadata, 6, args[3])
            _set(metadata, 7, args[4])
            _set(metadata, 8, args[5])
            if log_end_offset is not None:
                metadata.log_end_offset = log_end_offset
            if untracked:
                PyObject_GC_UnTrack(metadata)  # str, ints, None and the untracked topic partition (and its int)
            if <object>kip_slot(future, _LOCK) is lock and _quiet(future):
                _succeed_quietly(future, metadata)
                continue
            lock.release()
            try:
                future.success(metadata)
            finally:
                lock.acquire()
    finally:
        lock.release()


cdef Py_ssize_t _ESTIMATE_OVERHEAD = _HEADER_SIZE + 21  # kafka-python's MAX_RECORD_OVERHEAD


cdef inline Py_ssize_t _sized(object data) except -1:
    if data is None:
        return 1
    cdef Py_ssize_t length = len(data)
    return _varint_size(length) + length


def estimate_size(object key, object value, list headers):
    """kafka-python's ``DefaultRecordBatchBuilder.estimate_size_in_bytes``: the upper bound of a record's size
    in a batch of its own."""
    cdef Py_ssize_t size = _ESTIMATE_OVERHEAD + _sized(key) + _sized(value) + _varint_size(len(headers))
    for header_key, header_value in headers:
        size += _sized(header_key.encode('utf-8')) + _sized(header_value)
    return size


cdef class Counter:
    """kafka-python's ``AtomicInteger`` (increment, decrement, get) without a lock: each call runs under the GIL."""

    cdef Py_ssize_t _value

    def increment(self):
        self._value += 1
        return self._value

    def decrement(self):
        self._value -= 1
        return self._value

    def get(self):
        return self._value


cdef object _monotonic = _time.monotonic


def append_plain(object accumulator, object tp, object timestamp_ms, object key, object value, list headers,
                 bint abort_on_new_batch, type batch_type, type future_type, int partition_count, object sending):
    """kafka-python's ``RecordAccumulator.append`` where the record joins the partition's newest batch, a
    ``batch_type`` built by :class:`RecordBatchBuilder` for the same ``partition_count`` (KIP-253); any other
    case is left to ``accumulator.append``, with ``sending.count`` set to the record's partition count.

    Returns ``(future, batch_is_full, new_batch_created, abort_for_new_batch)`` as kafka-python's does.
    """
    if accumulator._closed:
        return _append_counted(accumulator, tp, timestamp_ms, key, value, headers, None, abort_on_new_batch,
                               partition_count, sending)
    now = _monotonic()
    appended = _append_to_newest(accumulator, tp, timestamp_ms, key, value, headers, now, batch_type, future_type,
                                 partition_count, None)
    if appended is not None:
        return appended + (False, False)
    # a new batch (or another kind of batch): kafka-python's code, which tries the newest batch again first
    return _append_counted(accumulator, tp, timestamp_ms, key, value, headers, now, abort_on_new_batch,
                           partition_count, sending)


cdef object _append_to_newest(object accumulator, object tp, object timestamp_ms, object key, object value,
                              list headers, object now, type batch_type, type future_type, int partition_count,
                              object offset):
    """The record appended to the partition's newest batch if that is a ``batch_type`` built by
    :class:`RecordBatchBuilder` that takes it: records of ``partition_count`` (plain records, ``offset`` None) or,
    for a record with an ``offset``, one whose next offset it is. ``(future, batch_is_full)``, or None."""
    cdef Counter appending = accumulator._appends_in_progress
    appending._value += 1  # abort_incomplete_batches() waits for appends in progress
    try:
        lock = accumulator._tp_lock(tp)
        lock.acquire()
        try:
            queue = accumulator._batches[tp]
            if queue:
                last = queue[len(queue) - 1]
                records = last.records
                if type(last) is batch_type and type(records) is RecordBatchBuilder and (
                        (<RecordBatchBuilder>records).partition_count == partition_count if offset is None
                        else last.base_offset + (<RecordBatchBuilder>records)._next_offset == offset):
                    future = append_record(last, records, timestamp_ms, key, value, headers, now, future_type)
                    if future is not None:
                        return (future, len(queue) > 1 or (<RecordBatchBuilder>records).is_full())
        finally:
            lock.release()
    finally:
        appending._value -= 1
    return None


cdef object _append_counted(object accumulator, object tp, object timestamp_ms, object key, object value,
                            list headers, object now, bint abort_on_new_batch, int partition_count, object sending):
    """``accumulator.append`` with ``sending.count`` set to the record's partition count while it runs."""
    sending.count = partition_count
    try:
        return accumulator.append(tp, timestamp_ms, key, value, headers, now=now,
                                  abort_on_new_batch=abort_on_new_batch)
    finally:
        sending.count = -1


cdef object _DEBUG = _logging.DEBUG
cdef tuple _SERIALIZED = (bytes, bytearray, memoryview, type(None))


cdef object _topic_partition(object topic, object partition):
    cdef object tp = kip_alloc_tuple_of(_TopicPartition, 2)  # TopicPartition(topic, partition), in one step
    _set(tp, 0, topic)
    _set(tp, 1, partition)
    return tp


cdef bint _well_formed(object headers, bint null_values):
    """A list of (str, bytes) tuples, or None; ``null_values``: a value may be None (a record with an offset)."""
    if headers is None:
        return True
    if type(headers) is not list:
        return False
    for header in <list>headers:
        if not (type(header) is tuple and len(<tuple>header) == 2 and isinstance((<tuple>header)[0], str)
                and (isinstance((<tuple>header)[1], bytes) or (null_values and (<tuple>header)[1] is None))):
            return False
    return True


cdef object _chosen_partition(object producer, object topic, object key, object value, object key_bytes,
                              object value_bytes):
    partition = producer._partition(topic, None, key, value, key_bytes, value_bytes)
    if partition is None:
        raise ValueError(f'Partitioner did not assign a partition for topic {topic}!')
    return partition


cdef _join_transaction(object producer, object tp):
    manager = producer._transaction_manager
    if manager and manager.is_transactional():
        manager.maybe_add_partition_to_transaction(tp)


def send_plain(object log, type batch_type, type future_type, object sending, type metadata_type, object producer,
               object topic, object value, object key, object headers, object partition, object timestamp_ms):
    """kafka-python's ``producer.send(...)`` for the common case, or None (nothing done): see
    :mod:`kafka_kip.producer.plain_send`. ``log`` is kafka-python's producer logger; ``sending`` is where a new
    batch learns its records' partition count (KIP-253: the count read here, before the partitioner runs, or -1
    for an explicit partition). None too unless ``producer._metadata`` is a ``metadata_type`` and
    ``producer._accumulator`` kafka_kip's (one replaced after the producer was built, as kafka-python's tests
    replace them with mocks, gets kafka-python's send)."""
    metadata = producer._metadata
    config = producer.config
    if (producer._closed or (value is None and key is None) or not isinstance(metadata, metadata_type)
            or type(getattr(producer._accumulator, '_appends_in_progress', None)) is not Counter
            or not _well_formed(headers, False)):
        return None
    partitions = metadata.known_partitions(topic)
    if partitions is None or topic in metadata.internal_topics:
        return None
    cdef bint explicit = partition is not None
    if explicit and partition not in partitions:
        return None
    cdef int partition_count = -1 if explicit else len(partitions)
    if headers is None:
        headers = []
    key_serializer = config['key_serializer']
    value_serializer = config['value_serializer']
    key_bytes = key if key_serializer is None else producer._serialize(key_serializer, topic, headers, key)
    value_bytes = value if value_serializer is None else producer._serialize(value_serializer, topic, headers, value)
    if type(key_bytes) not in _SERIALIZED:
        raise TypeError(f'Unsupported type for serialized key: {type(key_bytes)}')
    if type(value_bytes) not in _SERIALIZED:
        raise TypeError(f'Unsupported type for serialized value: {type(value_bytes)}')
    if not explicit:
        partition = _chosen_partition(producer, topic, key, value, key_bytes, value_bytes)
    size = estimate_size(key_bytes, value_bytes, headers)
    if size > config['max_request_size']:
        producer._ensure_valid_record_size(size)  # raises kafka-python's MessageSizeTooLargeError
    tp = _topic_partition(topic, partition)
    cdef bint debug = log.isEnabledFor(_DEBUG)
    if debug:
        log.debug('%s: Sending (key=%r value=%r headers=%r) to %s', str(producer), key, value, headers, tp)
    _join_transaction(producer, tp)
    # KIP-480: a record the partitioner placed (no key) must not be the one to open a new batch: the
    # accumulator declines it, the partitioner moves on and the record goes where it points then.
    cdef bint sticky = not explicit and key_bytes is None
    accumulator = producer._accumulator
    future, batch_is_full, new_batch_created, declined = append_plain(
        accumulator, tp, timestamp_ms, key_bytes, value_bytes, headers, sticky, batch_type, future_type,
        partition_count, sending)
    if declined:
        on_new_batch = getattr(config['partitioner'], 'on_new_batch', None)
        if on_new_batch is not None:
            on_new_batch(topic, metadata, partition)
        tp = _topic_partition(topic, _chosen_partition(producer, topic, key, value, key_bytes, value_bytes))
        _join_transaction(producer, tp)
        future, batch_is_full, new_batch_created, _ = append_plain(
            accumulator, tp, timestamp_ms, key_bytes, value_bytes, headers, False, batch_type, future_type,
            partition_count, sending)
    if batch_is_full or new_batch_created:
        if debug:
            log.debug('%s: Waking up the sender since %s is either full or getting a new batch', str(producer), tp)
        producer._sender.wakeup()
    return future


# -- records with offsets (KIP-391): kafka_kip.producer.offset_send ---------------------------------------------

cdef object _INT32_MAX = 2 ** 31 - 1
cdef object _INT64_MAX = 2 ** 63 - 1


def append_at_offset(object accumulator, object tp, object offset, object timestamp_ms, object key, object value,
                     list headers, type batch_type, type future_type):
    """``OffsetRecordAccumulator.append_with_offset`` where the record continues the partition's newest batch (a
    ``batch_type`` built by :class:`RecordBatchBuilder` whose next offset is ``offset``): ``(future,
    batch_is_full)``. None, having done nothing, for anything else (a new batch: the accumulator's method)."""
    if accumulator._closed:
        return None
    return _append_to_newest(accumulator, tp, timestamp_ms, key, value, headers, _monotonic(), batch_type,
                             future_type, -1, offset)


def send_with_offset(type batch_type, type future_type, object producer, object topic, object partition,
                     object key, object value, object headers, object timestamp_ms, object offset):
    """``KafkaProducer.send`` of a record with an offset, the common case: see
    :mod:`kafka_kip.producer.offset_send`. The record's future, or None (nothing done: the Python path runs)."""
    if producer._closed or type(topic) is not str or type(partition) is not int or type(offset) is not int:
        return None
    if not (0 <= partition <= _INT32_MAX and 0 <= offset <= _INT64_MAX):
        return None
    if timestamp_ms is not None and not (type(timestamp_ms) is int and 0 <= timestamp_ms <= _INT64_MAX):
        return None
    if not _well_formed(headers, True):
        return None
    partitions = producer._metadata.known_partitions(topic)
    if partitions is None or partition not in partitions:
        return None
    if headers is None:
        headers = []
    config = producer.config
    key_serializer = config['key_serializer']
    value_serializer = config['value_serializer']
    key_bytes = key if key_serializer is None else producer._serialize(key_serializer, topic, headers, key)
    value_bytes = value if value_serializer is None else producer._serialize(value_serializer, topic, headers, value)
    if not isinstance(key_bytes, _SERIALIZED):
        raise TypeError(f'Unsupported type for serialized key: {type(key_bytes)}')
    if not isinstance(value_bytes, _SERIALIZED):
        raise TypeError(f'Unsupported type for serialized value: {type(value_bytes)}')
    size = estimate_size(key_bytes, value_bytes, headers)
    if size > config['max_request_size']:
        producer._ensure_valid_record_size(size)  # raises kafka-python's MessageSizeTooLargeError
    tp = _topic_partition(topic, partition)
    _join_transaction(producer, tp)
    accumulator = producer._accumulator
    appended = append_at_offset(accumulator, tp, offset, timestamp_ms, key_bytes, value_bytes, headers, batch_type,
                                future_type)
    if appended is not None:
        future, batch_is_full = appended
        new_batch = False
    else:
        future, batch_is_full, new_batch = accumulator.append_with_offset(tp, offset, timestamp_ms, key_bytes,
                                                                          value_bytes, headers)
    if batch_is_full or new_batch:
        producer._sender.wakeup()
    return future
