# cython: language_level=3
"""A growing C buffer, shared by the compiled codecs that build bytes (_columns.pyx, _encoder.pyx)."""
from cpython.mem cimport PyMem_Realloc


cdef struct Buffer:
    char* data
    Py_ssize_t length
    Py_ssize_t capacity


cdef inline int reserve(Buffer* buffer, Py_ssize_t extra) except -1:
    """Room for ``extra`` more bytes after ``buffer.length`` (at least doubling, at least 4 KiB)."""
    cdef Py_ssize_t needed = buffer.length + extra
    cdef Py_ssize_t capacity = buffer.capacity
    cdef char* grown
    if needed <= capacity:
        return 0
    capacity = max(needed, capacity * 2, 4096)
    grown = <char*>PyMem_Realloc(buffer.data, capacity)
    if grown == NULL:
        raise MemoryError()
    buffer.data = grown
    buffer.capacity = capacity
    return 0
