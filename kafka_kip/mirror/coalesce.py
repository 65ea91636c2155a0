"""Per-partition questions to a broker, sent together: one request per broker and kind per loop turn.

The mirror's partition tasks each ask about their own partition (an end offset, a log start, the records at
an offset, where an epoch ends). Asked one by one, a mirror of 1,000 partitions would send thousands of
requests at start-up. A :class:`Coalescer` gathers the questions asked during one turn of the event loop and
sends one request per ``(cluster, node, kind)`` carrying every partition asked about; each asker gets its
own partition's answer (or the request's failure). A partition asked about twice in one turn goes in a
second request (Kafka refuses a partition listed twice).

A kind is a :class:`Kind`: how to build the request from the entries and how to find each partition's
answer in the response. The kinds the mirror uses are defined here too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka.future import Future
from kafka.net.selector import NetworkSelector
from kafka.structs import TopicPartition

from kafka_kip.mirror import answers
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.protocol import constants, requests

#: One partition's entry in a request: the partition, its current leader epoch, then the kind's values.
Entry = tuple


class Kind(Protocol):
    """A per-partition question that can be asked for many partitions in one request (hashable)."""

    def build(self, entries: list[Entry]) -> Any: ...

    def answers(self, response: Any) -> dict[tuple[str, int], Any]: ...


@dataclass(frozen=True)
class ListOffsetsKind:
    """ListOffsets at ``timestamp``; entries ``(tp, leader_epoch)``."""

    timestamp: int
    isolation_level: int = constants.READ_UNCOMMITTED

    def build(self, entries: list[Entry]) -> Any:
        return requests.list_offsets([(tp, epoch) for tp, epoch in entries], self.timestamp, self.isolation_level)

    @staticmethod
    def answers(response: Any) -> dict[tuple[str, int], Any]:
        return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


@dataclass(frozen=True)
class FetchKind:
    """A one-off Fetch (min_bytes 0); entries ``(tp, leader_epoch, offset)``."""

    isolation_level: int
    partition_max_bytes: int
    max_bytes: int

    def build(self, entries: list[Entry]) -> Any:
        by_topic: dict[str, list[tuple[int, int, int, int]]] = {}
        for tp, epoch, offset in entries:
            by_topic.setdefault(tp.topic, []).append((tp.partition, epoch, offset, -1))
        return requests.fetch(by_topic, max_wait_ms=answers.SINGLE_READ_MAX_WAIT_MS, max_bytes=self.max_bytes,
                          partition_max_bytes=self.partition_max_bytes, isolation_level=self.isolation_level,
                          min_bytes=0)

    @staticmethod
    def answers(response: Any) -> dict[tuple[str, int], Any]:
        return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


@dataclass(frozen=True)
class EpochEndKind:
    """OffsetForLeaderEpoch; entries ``(tp, current_leader_epoch, epoch)``."""

    def build(self, entries: list[Entry]) -> Any:
        return requests.offset_for_leader_epoch([(tp, current, epoch) for tp, current, epoch in entries])

    @staticmethod
    def answers(response: Any) -> dict[tuple[str, int], Any]:
        return {(t.topic, p.partition): p for t in response.topics for p in t.partitions}


@dataclass
class _Request:
    """Entries gathered for one request, with the futures of their askers."""

    entries: list[Entry] = field(default_factory=list)
    futures: dict[tuple[str, int], Future] = field(default_factory=dict)
    sealed: bool = False  # no other partition joins


class Coalescer:
    """Gathers per-partition questions and sends them per broker (see the module docstring)."""

    def __init__(self, net: NetworkSelector) -> None:
        self._net = net
        self._pending: dict[tuple[int, Any, Kind], list[_Request]] = {}
        self._clients: dict[int, ClusterClient] = {}
        self._scheduled = False

    def ask(self, client: ClusterClient, node: Any, kind: Kind, entry: Entry, *, alone: bool = False) -> Future:
        """A future of ``entry``'s partition answer (``entry[0]`` is its TopicPartition) from ``node``
        (``alone``: in a request of its own)."""
        tp: TopicPartition = entry[0]
        key = (tp.topic, tp.partition)
        self._clients[id(client)] = client
        requests = self._pending.setdefault((id(client), node, kind), [])
        request = None if alone else next((r for r in requests if not r.sealed and key not in r.futures), None)
        if request is None:
            request = _Request(sealed=alone)
            requests.append(request)
        future = Future()
        request.entries.append(entry)
        request.futures[key] = future
        if not self._scheduled:
            self._scheduled = True
            self._net.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        for (client_id, node, kind), asked in pending.items():
            client = self._clients[client_id]
            for request in asked:
                client.send(kind.build(request.entries), node).add_both(self._answered, kind, request.futures)

    @staticmethod
    def _answered(kind: Kind, futures: dict[tuple[str, int], Future], result: Any) -> None:
        if isinstance(result, BaseException):
            for future in futures.values():
                future.failure(result)
            return
        by_key = kind.answers(result)
        for key, future in futures.items():
            future.success(by_key.get(key))

