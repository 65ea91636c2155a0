"""The reference cluster's data model: brokers, topics, partitions and the metadata images brokers act on.

:class:`Partition` and :class:`Topic` are the controller's live state (a partition holds the logs of its
replicas); :class:`MetadataImage` is an immutable snapshot of it, the metadata one broker serves and acts on
(:class:`PartitionView`, :class:`TopicView`). :class:`ClusterError` carries Kafka's error code for a refusal.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafka.structs import TopicPartition

from kafka_kip.protocol import constants
from kafka_kip_reference.broker.log import PartitionLog

if TYPE_CHECKING:
    from kafka_kip_reference.broker.config import TopicDefaults

NO_LEADER = -1
#: What a partition without paused replicas holds (an empty set would be one more object per partition for the
#: garbage collector to walk; ``paused`` is replaced, never changed).
NOT_PAUSED: frozenset[int] = frozenset()
#: Partitions per topic the reference cluster agrees to hold (keeps a bad request from exhausting memory).
MAX_PARTITIONS = 10_000


@dataclass(frozen=True)
class BrokerAddress:
    """Where a broker listens."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class Reassignment:
    """A replica reassignment in progress: from ``original`` to ``target`` (Kafka's adding / removing sets)."""

    original: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def adding(self) -> list[int]:
        return [b for b in self.target if b not in self.original]

    @property
    def removing(self) -> list[int]:
        return [b for b in self.original if b not in self.target]


@dataclass
class Partition:
    """Controller state of one partition plus the logs of its replicas."""

    topic: str
    topic_id: uuid.UUID
    index: int
    replicas: list[int]
    partition_epoch: int
    leader: int = NO_LEADER
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    #: replicas whose copying is paused (replaced, never changed in place)
    paused: frozenset[int] = NOT_PAUSED
    logs: dict[int, PartitionLog] = field(default_factory=dict)
    deleted: bool = False
    reassignment: Reassignment | None = None
    #: KIP-253: for a partition created by a partition expansion, each prior partition (the partitions that
    #: existed before it) -> its leader epoch just before the expansion bumped it; empty otherwise.
    prior_epochs: dict[int, int] = field(default_factory=dict)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.index)

    def notify(self) -> None:
        """Wake fetches waiting on any replica of this partition."""
        for log in self.logs.values():
            log.notify()


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition]
    configs: dict[str, str]
    """The topic's config overrides."""
    defaults: TopicDefaults
    """Every topic config's default (from the broker configs; one object all topics share)."""

    def config(self, name: str, broker_id: int | None = None) -> str:
        """``name``'s value for this topic as broker ``broker_id`` applies it (None: its cluster-wide value); a
        broker's own dynamic configs change the defaults on that broker only."""
        value = self.configs.get(name)
        return value if value is not None else self.defaults.get(name, broker_id)


@dataclass(frozen=True)
class PartitionView:
    """A partition as one broker's metadata sees it; ``partition`` is the live object with the logs."""

    partition: Partition
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True)
class TopicView:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionView, ...]
    topic: Topic


@dataclass(frozen=True)
class MetadataImage:
    """An immutable snapshot of the cluster metadata (what a broker serves and acts on).

    ``offset`` is the last metadata log offset it contains (KIP-1243's consistency token; -1: none).
    """

    topics: dict[str, TopicView]
    topic_names: dict[uuid.UUID, str]
    brokers: tuple[BrokerAddress, ...]
    controller_id: int
    max_partition_epoch: int
    offset: int

    def partition(self, topic: str, index: int) -> PartitionView | None:
        view = self.topics.get(topic)
        if view is None or not 0 <= index < len(view.partitions):
            return None
        return view.partitions[index]


class ClusterError(ValueError):
    """A ReferenceCluster call that Kafka would refuse; ``error_code`` is Kafka's error for it."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


_LEGAL_TOPIC_CHARS = frozenset('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-')


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules."""
    if not name or name in ('.', '..') or len(name) > 249 or not set(name) <= _LEGAL_TOPIC_CHARS:
        raise ClusterError(constants.INVALID_TOPIC_EXCEPTION, f'invalid topic name {name!r}')
