"""KIP-1243's ``ConsistencyContextStore``: where clients keep the latest consistency context they share.

Every request a client sends to a broker that advertises ``kip.1243`` carries ``store.read()``, and every
response's context goes to ``store.store_latest()``; clients built with one store (by
:class:`kafka_kip.ClientFactory`, or given it as ``consistency_context_store=``) therefore see metadata at
least as new as anything any of them has seen. Four stores:

- :meth:`ConsistencyContextStore.empty` / :meth:`~ConsistencyContextStore.of`: in memory, for the clients of
  one process;
- :meth:`~ConsistencyContextStore.eventually_consistent`: keeps nothing, always reads the unknown context (the
  behaviour of clients without KIP-1243);
- :meth:`~ConsistencyContextStore.file`: a file shared by the processes of one host (beyond the proposal; POSIX).
  Writers replace the file atomically (a new file renamed over the old one) under an exclusive lock on a
  sidecar ``<path>.lock``; readers take no lock and never block: they see the old or the new context, whole.

Every store is safe to use from several threads.
"""
from __future__ import annotations

import abc
import os
import tempfile
import threading
from pathlib import Path

from kafka.errors import KafkaConfigurationError

from kafka_kip.metadata.consistency import ConsistencyContext

_UNKNOWN = ConsistencyContext.unknown()


class ConsistencyContextStore(abc.ABC):
    """Reads and stores the latest consistency context of the clients that share it."""

    @abc.abstractmethod
    def store_latest(self, context: ConsistencyContext) -> bool:
        """Keep ``context`` if it is more recent than the stored one (:meth:`ConsistencyContext.later`).

        Returns True if the stored context changed. ValueError if both are known and name different clusters.
        """

    @abc.abstractmethod
    def read(self) -> ConsistencyContext:
        """The stored context (``ConsistencyContext.unknown()`` if none)."""

    @property
    def shares_writes(self) -> bool:
        """False for :meth:`eventually_consistent`: clients sharing it promise nothing about each other's
        writes (a :class:`kafka_kip.ClientFactory` then does not make its clients wait for them either)."""
        return True

    @staticmethod
    def empty() -> ConsistencyContextStore:
        """A store in memory that starts unknown."""
        return MemoryConsistencyContextStore(_UNKNOWN)

    @staticmethod
    def of(context: ConsistencyContext) -> ConsistencyContextStore:
        """A store in memory that starts at ``context`` (e.g. ``ConsistencyContext.from_bytes(blob)`` handed
        over by another process)."""
        return MemoryConsistencyContextStore(context)

    @staticmethod
    def eventually_consistent() -> ConsistencyContextStore:
        """The store that keeps nothing: clients using it send no context and get no KIP-1243 guarantee."""
        return _EVENTUALLY_CONSISTENT

    @staticmethod
    def file(path: str | os.PathLike[str]) -> ConsistencyContextStore:
        """A store in the file at ``path``, shared by every process on this host that opens the same path.

        The file (and a ``<path>.lock`` beside it) is created at the first store; a missing file reads as
        unknown. Its content is :meth:`ConsistencyContext.to_bytes`.
        """
        return FileConsistencyContextStore(path)


def _checked(context: object) -> ConsistencyContext:
    if not isinstance(context, ConsistencyContext):
        raise TypeError(f'expected a ConsistencyContext, got {context!r}')
    return context


class MemoryConsistencyContextStore(ConsistencyContextStore):
    """The context in memory; :meth:`read` takes no lock (the context is immutable)."""

    def __init__(self, context: ConsistencyContext) -> None:
        self._context = _checked(context)
        self._lock = threading.Lock()

    def store_latest(self, context: ConsistencyContext) -> bool:
        with self._lock:
            latest = self._context.later(_checked(context))
            if latest is self._context:
                return False
            self._context = latest
            return True

    def read(self) -> ConsistencyContext:
        return self._context

    def __repr__(self) -> str:
        return f'ConsistencyContextStore.of({self._context})'


class _EventuallyConsistentStore(ConsistencyContextStore):
    """Keeps nothing (the proposal's legacy store)."""

    def store_latest(self, context: ConsistencyContext) -> bool:
        _checked(context)
        return False

    def read(self) -> ConsistencyContext:
        return _UNKNOWN

    @property
    def shares_writes(self) -> bool:
        return False

    def __repr__(self) -> str:
        return 'ConsistencyContextStore.eventually_consistent()'


_EVENTUALLY_CONSISTENT = _EventuallyConsistentStore()


class FileConsistencyContextStore(ConsistencyContextStore):
    """The context in a file, shared by processes (see the module docstring).

    :meth:`read` reads the file each time (a few microseconds; the decoded context is kept while the bytes are
    the same). A file that does not hold a context raises ValueError naming the path, on read and store.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + '.lock')
        self._thread_lock = threading.Lock()
        self._last: tuple[bytes, ConsistencyContext] = (b'', _UNKNOWN)  # the bytes last read, decoded

    def read(self) -> ConsistencyContext:
        # No cache by file times: a replaced file can have the old one's inode, size and (coarse) mtime.
        try:
            with open(self.path, 'rb') as file:
                blob = file.read()
        except FileNotFoundError:
            return _UNKNOWN
        last = self._last
        if blob == last[0]:
            return last[1]
        try:
            context = ConsistencyContext.from_bytes(blob)
        except ValueError as exc:
            raise ValueError(f'{self.path} does not hold a consistency context: {exc}') from None
        self._last = (blob, context)
        return context

    def store_latest(self, context: ConsistencyContext) -> bool:
        context = _checked(context)
        if context.is_unknown():
            return False
        import fcntl  # POSIX; imported here so that kafka_kip imports everywhere (the file store needs it)

        with self._thread_lock, open(self._lock_path, 'a') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # writers of every process, one at a time; readers never wait
            stored = self.read()
            latest = stored.later(context)
            if latest is stored:
                return False
            self._replace(latest.to_bytes())
            return True

    def _replace(self, blob: bytes) -> None:
        fd, temporary = tempfile.mkstemp(prefix=self.path.name + '.', suffix='.tmp', dir=self.path.parent)
        try:
            with os.fdopen(fd, 'wb') as out:
                out.write(blob)
            os.replace(temporary, self.path)
        except BaseException:
            os.unlink(temporary)
            raise

    def __repr__(self) -> str:
        return f'ConsistencyContextStore.file({str(self.path)!r})'


def require_store(store: object) -> ConsistencyContextStore | None:
    """``store`` if it is a store (or None, for a client's own); KafkaConfigurationError naming it otherwise."""
    if store is None or isinstance(store, ConsistencyContextStore):
        return store
    raise KafkaConfigurationError(
        f'consistency_context_store must be a kafka_kip ConsistencyContextStore (ConsistencyContextStore.empty(), '
        f'.of(context), .eventually_consistent() or .file(path)), got {store!r}')


__all__ = ['ConsistencyContextStore', 'require_store', 'MemoryConsistencyContextStore', 'FileConsistencyContextStore']
