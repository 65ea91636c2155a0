"""kafka.errors plus the extension error codes.

Every public name of :mod:`kafka.errors` is re-exported unchanged except :func:`for_code`, so
``kafka_kip.errors`` is a superset of it. The extension error codes live in one table,
:data:`EXTENSION_ERRORS`, in the range 10001-10008 that no Apache Kafka error code uses (10004 retired); :func:`for_code`
knows them as well as kafka-python's codes. kafka-python's own table (``kafka.errors.kafka_errors``) is left
as it is: kafka_kip's clients handle every extension code a broker can answer to their extension requests
themselves. Where Apache Kafka already has an error with the same meaning, its code and kafka-python's class
are used (``InconsistentClusterIdError`` is kafka-python's, code 104), and every extension class is a
subclass of the kafka-python class a kafka-python user would already catch for that situation, if any
(see docs/PROTOCOL.md).

kafka-python's generic error paths instantiate a broker error with the broker's error message (or with
nothing), so every class here also accepts a plain message in place of its structured first argument.
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import kafka.errors as _stock
from kafka.errors import *
from kafka.errors import (
    BrokerResponseError,
    InconsistentClusterIdError,
    InvalidMetadataError,
    LogTruncationError,
    OffsetOutOfRangeError,
    UnsupportedVersionError,
)
from kafka.structs import OffsetAndMetadata


class InvalidPartitionEpochError(BrokerResponseError):
    """KIP-232: the partition a position or commit belongs to no longer exists (topic deleted/recreated).

    ``partition_epochs`` maps each affected ``TopicPartition`` to the partition epoch the client held (-1 on a
    broker without partition epochs); ``topic_ids`` maps it to the topic id (KIP-516) of the incarnation the
    position belonged to (``None`` if unknown), which is what identifies it on stock brokers.
    """

    errno = 10001
    message = 'INVALID_PARTITION_EPOCH'
    description = 'The partition epoch does not match the current partition: the partition was recreated.'

    def __init__(self, partition_epochs: Mapping[Any, Any] | str | None = None, *args: Any,
                 topic_ids: Mapping[Any, Any] | None = None) -> None:
        if isinstance(partition_epochs, Mapping):
            self.partition_epochs = dict(partition_epochs)
            args = args or (f'Partition epoch changed for {self.partition_epochs}',)
        else:
            self.partition_epochs = {}
            args = (partition_epochs,) + args if partition_epochs is not None else args
        self.topic_ids = dict(topic_ids or {})
        super().__init__(*args)


class InvalidProduceOffsetError(BrokerResponseError):
    """KIP-391: a record's requested offset is below the partition's log end offset.

    ``log_end_offset`` is the broker's log end offset (-1 when the broker did not report it); the
    producer can continue from there.
    """

    errno = 10002
    message = 'INVALID_PRODUCE_OFFSET'
    description = 'The offset requested for a produced record is smaller than the log end offset.'

    def __init__(self, log_end_offset: int | str | None = -1, message: str | None = None) -> None:
        if not isinstance(log_end_offset, int):
            log_end_offset, message = -1, log_end_offset if message is None else message
        self.log_end_offset = log_end_offset
        if message is None:
            message = f'Produce offset is below the log end offset {log_end_offset}'
        super().__init__(message)


class StaleMetadataError(InvalidMetadataError, BrokerResponseError):
    """KIP-1243: the broker's metadata is older than the consistency token the client sent. Retriable."""

    errno = 10003
    message = 'STALE_METADATA'
    description = "The broker's cluster metadata is older than the client's consistency token."


class InvalidPartitionCountError(InvalidMetadataError, BrokerResponseError):
    """KIP-253: the producer partitioned with a partition count the broker no longer has. Retriable."""

    errno = 10005
    message = 'INVALID_PARTITION_COUNT'
    description = "The partition count in the produce request does not match the topic's partition count."


class TruncatedPartitionError(OffsetOutOfRangeError, LogTruncationError):
    """KIP-320: the log was truncated below the consumer's position (client-side; never sent by a broker).

    ``truncated_offsets`` maps each ``TopicPartition`` to the offset where its log diverged, or ``None``
    when the divergence point is unknown. ``divergent_offsets`` (kafka-python's LogTruncationError field)
    holds the same information as ``OffsetAndMetadata`` values unless given explicitly.
    """

    errno = 10006
    message = 'TRUNCATED_PARTITION'
    description = "The partition's log was truncated below the consumer's position."

    def __init__(self, truncated_offsets: Mapping[Any, int | None] | str | None = None,
                 divergent_offsets: Mapping[Any, OffsetAndMetadata | None] | None = None,
                 message: str | None = None) -> None:
        if not isinstance(truncated_offsets, Mapping):
            truncated_offsets, message = {}, truncated_offsets if message is None else message
        self.truncated_offsets = dict(truncated_offsets)
        if divergent_offsets is None:
            divergent_offsets = {tp: None if offset is None else OffsetAndMetadata(offset, '', -1)
                                 for tp, offset in self.truncated_offsets.items()}
        if message is None:
            message = f'Detected truncated partitions: {self.truncated_offsets}'
        LogTruncationError.__init__(self, dict(divergent_offsets), message)


class UnsupportedFeatureError(UnsupportedVersionError):
    """An extension was needed but the broker did not advertise its feature in ApiVersionsResponse.

    A subclass of kafka-python's ``UnsupportedVersionError`` (what kafka-python raises when a broker is too
    old for a request), so ``except kafka.errors.UnsupportedVersionError`` catches it.
    """

    errno = 10007
    message = 'UNSUPPORTED_FEATURE'
    description = 'The broker did not advertise the feature this request needs.'

    def __init__(self, feature: str | None = None, node_id: Any = None) -> None:
        self.feature = feature
        self.node_id = node_id
        broker = 'The broker' if node_id is None else f'Broker {node_id}'
        super().__init__(f'{broker} did not advertise feature {feature!r} '
                         'in ApiVersionsResponse SupportedFeatures')


class InvalidLeaderEpochError(BrokerResponseError):
    """KIP-232: an offset commit carried a leader epoch older than the one of the offset committed before.

    Not retriable (unlike Kafka's FENCED_LEADER_EPOCH): retrying the same commit can never succeed.
    """

    errno = 10008
    message = 'INVALID_LEADER_EPOCH'
    description = 'The leader epoch of the committed offset is older than the last committed leader epoch.'


#: The extension error table: code -> class. The one place the codes are assigned. 10004 is retired (it was
#: INCONSISTENT_CLUSTER_ID, which is Apache Kafka's 104) and never reused.
EXTENSION_ERRORS: dict[int, type[BrokerResponseError]] = {
    cls.errno: cls for cls in (
        InvalidPartitionEpochError, InvalidProduceOffsetError, StaleMetadataError, InvalidPartitionCountError,
        TruncatedPartitionError, UnsupportedFeatureError, InvalidLeaderEpochError,
    )
}


def inconsistent_cluster_id(expected_cluster_id: str, cluster_id: str, where: str) -> InconsistentClusterIdError:
    """kafka-python's ``InconsistentClusterIdError`` (Apache Kafka's code 104) naming both cluster ids: the one the
    client's consistency context belongs to (``expected_cluster_id``) and the one ``where`` (e.g. ``'broker 2 at
    host:port'``) belongs to (``cluster_id``); both are also attributes of the error."""
    error = InconsistentClusterIdError(
        f'{where} belongs to cluster {cluster_id!r}, but the consistency context store holds a context of cluster '
        f'{expected_cluster_id!r}: a client never talks to another cluster than its context\'s')
    error.expected_cluster_id = expected_cluster_id
    error.cluster_id = cluster_id
    return error


def for_code(error_code: int) -> type[BrokerResponseError]:
    """The error class of ``error_code``: an extension code's class, else kafka-python's ``for_code``."""
    extension = EXTENSION_ERRORS.get(error_code)
    return extension if extension is not None else _stock.for_code(error_code)


__all__ = sorted({name for name, obj in vars(_stock).items()
                  if not name.startswith('_') and not inspect.ismodule(obj)}
                 | {cls.__name__ for cls in EXTENSION_ERRORS.values()}
                 | {'EXTENSION_ERRORS'})
