"""Fetching by topic id (KIP-516, FetchRequest v13+): the broker answers for the incarnation a position belongs to.

A fetch by name (v12 and before, all kafka-python sends) reads whatever the name stands for when the broker
reads it: after the topic was deleted and recreated, the new incarnation's records at the old position. A
fetch by topic id is answered for that id only: UNKNOWN_TOPIC_ID (or INCONSISTENT_TOPIC_ID) once the
incarnation is gone, never another incarnation's records.

:class:`TopicIdAddressing` turns the requests kafka-python's fetcher built into requests by topic id, per
broker (node): a request goes by id when every partition it fetches has a topic id, and every partition it
tells the broker's fetch session to forget was added to that session under one; otherwise it stays by
name, as kafka-python built it (and a broker without v13 negotiates it down to a version that names topics,
so the names stay in it). The topic ids come from the caller (the fetcher: the incarnation the position is
tied to). A v13 response carries topic ids only; :meth:`name_topics` puts the names back for kafka-python.

Fetch sessions (KIP-227) hold partitions by topic id. kafka-python's session handler knows partitions by name
only, so when the id a partition is fetched by changes while it is in a session (a new position tied to
another incarnation, or a switch between names and ids), :meth:`restart_changed_sessions` makes the next
request a full one: the broker then replaces the session, as the Java client's handler does by forgetting
and re-adding the partition.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafka.protocol.consumer import FetchRequest
from kafka.structs import TopicPartition

from kafka_kip._patch import fetch_version

log = logging.getLogger(__name__)

#: The first FetchRequest version that names topics by id.
TOPIC_ID_VERSION = 13

_raise_cap = fetch_version.install()
_FetchTopic = FetchRequest.FetchTopic
_ForgottenTopic = FetchRequest.ForgottenTopic
_FULL_SESSION_EPOCHS = (0, -1)   # INITIAL (create a session) and FINAL (sessionless): the request is full

TopicIdOf = Callable[[TopicPartition], 'uuid.UUID | None']


def known_topic_id(topic_id: uuid.UUID | None) -> uuid.UUID | None:
    """``topic_id`` if it is a real one (brokers send the nil UUID for a topic without an id), else None."""
    return topic_id if topic_id is not None and topic_id.int else None


class TopicIdAddressing:
    """The topic ids one consumer's fetch requests name, per broker (see the module docstring)."""

    def __init__(self) -> None:
        # node -> the id each partition was last sent under in that node's fetch session (None: by name)
        self._sessions: dict[Any, dict[TopicPartition, uuid.UUID | None]] = {}
        # node -> topic names of the ids its request in flight names (a response carries ids only)
        self._names: dict[Any, dict[uuid.UUID, str]] = {}
        # partition -> the topic id its last v13+ answer was for, until the fetcher reads it
        self._answered: dict[TopicPartition, uuid.UUID] = {}

    def restart_changed_sessions(self, handlers: Mapping[Any, Any], topic_id_of: TopicIdOf) -> None:
        """Make the next request to a node a full one if a partition of its session would now be fetched by
        another topic id (or by name instead of an id, or the other way round) than the session holds it by.

        ``handlers``: kafka-python's fetch session handlers by node; ``topic_id_of(tp)``: the id ``tp`` is
        fetched by now.
        """
        for node_id, held in self._sessions.items():
            handler = handlers.get(node_id)
            if handler is None or handler.next_metadata.is_full:
                continue
            in_session = handler.session_partitions
            if any(tp in in_session and topic_id_of(tp) != topic_id for tp, topic_id in held.items()):
                log.debug('Restarting the fetch session with node %s: a partition is fetched by another topic id',
                          node_id)
                handler.next_metadata = handler.next_metadata.next_close_existing()

    def address(self, node_id: Any, request: Any, topic_ids: Mapping[TopicPartition, uuid.UUID | None]) -> None:
        """Name the topics of ``request`` (built by kafka-python for ``node_id``) by topic id where it can go
        by id (see the module docstring); ``topic_ids`` holds the id (or None) of every partition it fetches,
        whether sent in it or implied by the node's fetch session."""
        full = request.session_epoch in _FULL_SESSION_EPOCHS
        held = {} if full else self._sessions.get(node_id, {})
        forgotten = [TopicPartition(topic.topic, p) for topic in request.forgotten_topics_data for p in topic.partitions]
        by_id = (all(topic_id is not None for topic_id in topic_ids.values())
                 and all(held.get(tp) is not None for tp in forgotten))
        if by_id:
            request.topics = _by_topic_id(request.topics, topic_ids, 'partition', _FetchTopic)
            request.forgotten_topics_data = _by_topic_id(request.forgotten_topics_data, held, None, _ForgottenTopic)
            _raise_cap(request, TOPIC_ID_VERSION)
            self._names[node_id] = {topic_id: tp.topic for tp, topic_id in topic_ids.items()}
        else:
            self._names.pop(node_id, None)
        session = dict(held)
        for tp in forgotten:
            session.pop(tp, None)
        for topic in request.topics:
            for partition in topic.partitions:
                tp = TopicPartition(topic.topic, partition.partition)
                session[tp] = topic_ids.get(tp)
        self._sessions[node_id] = session

    def name_topics(self, node_id: Any, response: Any) -> bool:
        """Give the topics of a v13+ ``response`` from ``node_id`` their names (it carries ids only).

        A topic whose id the request did not name cannot be told apart from the others and is dropped (Tansu
        answers an unknown topic id with the nil id and UNKNOWN_TOPIC_OR_PARTITION); returns False then.
        """
        if response.API_VERSION < TOPIC_ID_VERSION:
            return True
        names = self._names.get(node_id, {})
        named = []
        for topic in response.responses:
            topic.topic = names.get(topic.topic_id)
            if topic.topic is None:
                errors = sorted({partition.error_code for partition in topic.partitions})
                log.info('Dropping the answer for topic id %s (error codes %s) from node %s: the request named no '
                         'such topic id', topic.topic_id, errors, node_id)
                continue
            named.append(topic)
            for partition in topic.partitions:
                self._answered[TopicPartition(topic.topic, partition.partition_index)] = topic.topic_id
        if len(named) == len(response.responses):
            return True
        response.responses = named
        return False

    def answered_for(self, tp: TopicPartition) -> uuid.UUID | None:
        """The topic id the last v13+ answer for ``tp`` was for (None: none since the last call)."""
        return self._answered.pop(tp, None)


def _by_topic_id(topics: Iterable[Any], topic_ids: Mapping[TopicPartition, uuid.UUID | None],
                 partition_field: str | None, make: Callable[..., Any]) -> list[Any]:
    """``topics`` (FetchTopic or ForgottenTopic entries, by name) regrouped by (name, topic id), each entry
    carrying both: the partitions of one name can belong to two incarnations (two positions tied to each)."""
    grouped: dict[tuple[str, uuid.UUID | None], list[Any]] = {}
    for topic in topics:
        for partition in topic.partitions:
            index = partition if partition_field is None else getattr(partition, partition_field)
            key = (topic.topic, topic_ids.get(TopicPartition(topic.topic, index)))
            grouped.setdefault(key, []).append(partition)
    return [make(topic=name, topic_id=topic_id, partitions=partitions)
            for (name, topic_id), partitions in grouped.items()]


__all__ = ['TOPIC_ID_VERSION', 'TopicIdAddressing', 'known_topic_id']
