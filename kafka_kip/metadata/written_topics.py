"""Read-your-writes on any broker for the clients of one :class:`kafka_kip.ClientFactory`.

A stock broker carries no consistency token, so a client cannot tell stale metadata from fresh in general. What
it can tell is whether metadata reflects writes it knows were made: a factory's admin clients record each topic
they created, grew or deleted (:class:`TopicWrite`) in the factory's :class:`WrittenTopics`, and the metadata
caches of the factory's producers and consumers (:class:`kafka_kip.metadata.KipClusterMetadata`) do not apply a
response that contradicts one (:meth:`TopicWrite.reflected_by`) - for a while at most (the client's
``max_block_ms``) - and drop a cached topic a new write contradicts, so a producer waits for the new metadata
as for an unknown topic instead of partitioning with the old count.
"""
from __future__ import annotations

import enum
import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_key import ApiKey


class WriteKind(enum.Enum):
    """What an admin client did to a topic."""

    CREATED = 'created'
    GROWN = 'grown'
    DELETED = 'deleted'


def _known(topic_id: uuid.UUID | None) -> bool:
    return topic_id is not None and topic_id.int != 0


@dataclass(frozen=True)
class TopicWrite:
    """The latest write to ``topic``: created or grown to at least ``partitions`` partitions, or deleted;
    ``topic_id`` is the created (or deleted) incarnation's id when the broker reported it."""

    topic: str
    kind: WriteKind
    partitions: int = 0
    topic_id: uuid.UUID | None = None

    def reflected_by(self, partitions: int | None, topic_id: uuid.UUID | None) -> bool:
        """True if metadata showing the topic with ``partitions`` partitions (None: not there) and ``topic_id``
        reflects this write."""
        if self.kind is WriteKind.DELETED:
            return partitions is None or (_known(topic_id) and _known(self.topic_id) and topic_id != self.topic_id)
        if partitions is None:
            return False
        other_incarnation = _known(topic_id) and _known(self.topic_id) and topic_id != self.topic_id
        return partitions >= self.partitions and not (self.kind is WriteKind.CREATED and other_incarnation)

    def __str__(self) -> str:
        if self.kind is WriteKind.DELETED:
            return f'topic {self.topic!r} deleted'
        return f'topic {self.topic!r} {self.kind.value} with {self.partitions} partitions'


class WrittenTopics:
    """The latest write to each topic made by a factory's admin clients, shared by the factory's clients.

    Caches that :meth:`follow` it hear of every write (``on_write(write)``) as it is recorded; thread-safe.
    """

    def __init__(self) -> None:
        self._latest: dict[str, TopicWrite] = {}
        self._lock = threading.Lock()
        self._followers: weakref.WeakSet[Any] = weakref.WeakSet()

    def record(self, write: TopicWrite) -> None:
        """Record ``write`` as the latest to its topic and tell every follower."""
        with self._lock:
            self._latest[write.topic] = write
            followers = list(self._followers)
        for follower in followers:
            follower.on_write(write)

    def latest(self, topic: str) -> TopicWrite | None:
        """The latest write to ``topic``, None if none was recorded."""
        return self._latest.get(topic)

    def writes(self) -> list[TopicWrite]:
        """The latest write to every topic written."""
        with self._lock:
            return list(self._latest.values())

    def follow(self, follower: Any) -> None:
        """Tell ``follower`` (with an ``on_write(write)`` method) of every write recorded so far and from now on."""
        with self._lock:
            self._followers.add(follower)
            writes = list(self._latest.values())
        for write in writes:
            follower.on_write(write)


def writes_of_response(request: Any, response: Any, topic_id_of: Callable[[str], uuid.UUID | None]) -> list[TopicWrite]:
    """The writes an admin request made, by its response: each CreateTopics, CreatePartitions or DeleteTopics
    topic answered without error (none for a ``validate_only`` request or another API). ``topic_id_of(name)``
    gives the id of a deleted topic the response does not name."""
    if getattr(request, 'validate_only', False):
        return []
    api_key = request.API_KEY
    if api_key == ApiKey.CreateTopics:
        wanted = {t.name: t.num_partitions if t.num_partitions > 0 else len(t.assignments or ()) for t in request.topics}
        return [TopicWrite(t.name, WriteKind.CREATED, max(getattr(t, 'num_partitions', -1), wanted.get(t.name, 0)),
                           getattr(t, 'topic_id', None))
                for t in response.topics if t.error_code == 0]
    if api_key == ApiKey.CreatePartitions:
        counts = {t.name: t.count for t in request.topics}
        return [TopicWrite(r.name, WriteKind.GROWN, counts[r.name]) for r in response.results if r.error_code == 0]
    if api_key == ApiKey.DeleteTopics:
        return [TopicWrite(r.name, WriteKind.DELETED, topic_id=getattr(r, 'topic_id', None) or topic_id_of(r.name))
                for r in response.responses if r.error_code == 0 and r.name is not None]
    return []


__all__ = ['TopicWrite', 'WriteKind', 'WrittenTopics', 'writes_of_response']
