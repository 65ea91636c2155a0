"""``KafkaProtocol.receive_bytes`` staging each response in a :class:`ResponseFrame` instead of ``KafkaBytes``.

kafka-python stages a response in a zero-filled ``bytearray`` of its size, copies every received piece into it
(through a temporary copy) and hands the decoder ``bytes(frame[start:])`` (two more copies): a fetch response of
a MiB passes through memory about six times, mostly on pages the allocator has just taken from the system (a
page fault every 4 KiB), which costs a bulk reader more than decoding the records. A :class:`ResponseFrame`
keeps the received pieces, joins them once when the decoder asks (not at all when the response came in one
piece) and gives the decoder the rest of the frame as a view of the joined bytes. A frame of
:data:`REUSED_MIN` bytes or more is joined into its thread's reusable storage (:class:`_JoinStorage`), so a bulk
reader's responses pass through the same pages each time. Scoped: only
:class:`kafka_kip.protocol.connection.KipProtocol` runs the returned function.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

from kafka.protocol.parser import KafkaProtocol

from kafka_kip._patch.rebind import rebound, require_names

#: Frames from this size up are joined into their thread's reusable storage; smaller ones into new bytes.
REUSED_MIN = 64 << 10
#: ... up to this size: the storage is not kept larger (a larger frame is joined into new bytes).
REUSED_MAX = 64 << 20


class _JoinStorage(threading.local):
    """One ``bytearray`` per thread that large frames are joined into, one frame after the other (a frame is joined
    when its decoding starts, which ends before the thread joins another). Reused only while nothing still sees the
    last frame joined into it: resizing a ``bytearray`` that a view exports raises ``BufferError``, and then a new
    one is taken, so a view kept past its decoding never sees other bytes."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def take(self, size: int) -> bytearray:
        """The storage, at least ``size`` bytes long."""
        buffer = self.buffer
        try:
            buffer.append(0)  # (a resize: refused while a view of the buffer is alive)
            del buffer[-1]
        except BufferError:
            buffer = bytearray()
        if len(buffer) < size:
            buffer = bytearray(size)
        self.buffer = buffer
        return buffer


_storage = _JoinStorage()


class ResponseFrame:
    """What kafka-python's parser and decoders ask of its ``KafkaBytes(size)``: ``len()`` (the frame's size),
    ``write()`` (the received pieces, in order), ``tell()``, ``seek()`` and ``read()``; and ``getbuffer()``. ``read()`` without a
    size (the decoder taking the rest of the frame) answers a ``memoryview``, as the decoder reads it."""

    __slots__ = ('_size', '_parts', '_joined', '_position')

    def __init__(self, size: int) -> None:
        self._size, self._parts, self._joined, self._position = size, [], None, 0

    def __len__(self) -> int:
        return self._size

    def write(self, data: bytes) -> None:
        if self._joined is not None:
            raise ValueError('a response frame is written before it is read, not after')
        self._parts.append(data)
        self._position += len(data)

    def tell(self) -> int:
        return self._position

    def seek(self, position: int) -> None:
        self._position = position

    def getbuffer(self) -> memoryview:
        """The whole frame (as ``BytesIO.getbuffer``), for a reader that decodes in place."""
        return memoryview(self._whole())

    def read(self, size: int | None = None) -> bytes | memoryview:
        joined = self._whole()
        start = min(self._position, len(joined))
        self._position = len(joined) if size is None else min(start + size, len(joined))
        if size is None:
            return memoryview(joined)[start:]
        return bytes(joined[start:self._position])

    def _whole(self) -> bytes | memoryview:
        if self._joined is None:
            parts, self._parts = self._parts, []
            if len(parts) == 1 or not REUSED_MIN <= self._size <= REUSED_MAX:
                self._joined = b''.join(parts)
            else:
                storage = _storage.take(self._size)
                position = 0
                for part in parts:
                    storage[position:position + len(part)] = part
                    position += len(part)
                self._joined = memoryview(storage)[:position]
        return self._joined

    def __repr__(self) -> str:
        return f'ResponseFrame({self._size})'


def install() -> Callable[..., list]:
    """kafka-python's ``KafkaProtocol.receive_bytes`` staging responses in :class:`ResponseFrame` s; raises
    KafkaPythonChanged if it no longer builds ``KafkaBytes`` or no longer stages through write/tell/seek."""
    require_names(KafkaProtocol.receive_bytes, {'write', 'tell', 'seek', '_rbuffer'},
                  'to stage a response through write(), tell() and seek()')
    return rebound(KafkaProtocol.receive_bytes, KafkaBytes=ResponseFrame)


__all__ = ['ResponseFrame', 'install']
