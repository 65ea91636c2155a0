"""Broker targets for the conformance matrix: one interface over independent Kafka implementations.

A :class:`BrokerTarget` is a running broker (or cluster) that tests and tools talk to with ordinary
clients. Every target has a ``name``, ``bootstrap_servers``, ``create_topic(name, partitions)``,
``capabilities`` (what the target can express; a test that needs a missing capability is skipped with
:meth:`BrokerTarget.missing`, never passed), ``client_config`` (public kafka-python settings the target
needs, empty for most), ``describe_partition`` (what its Metadata says, read on a raw connection), optional
fault hooks and ``logs()`` (shown when a test fails).

Capabilities follow from the API keys and features a target advertises (``create_topics``,
``delete_topics``, ``create_partitions``, ``offset_for_leader_epoch``, ``groups``, ``topic_ids``,
``kip.232``, ``kip.391``, ``kip.1243``) or from the fault hooks it implements:

==================  ============================================================================
hook capability     methods
==================  ============================================================================
leader_epoch_bumps  :meth:`~BrokerTarget.bump_leader_epoch`
topic_recreation    :meth:`~BrokerTarget.recreate_topic`
unclean_election    :meth:`~BrokerTarget.pause_follower`, :meth:`~BrokerTarget.elect_uncleanly`
stale_metadata      :meth:`~BrokerTarget.hold_metadata`, :meth:`~BrokerTarget.release_metadata`
==================  ============================================================================

The targets themselves live in one module each (reference, tansu, librdkafka_mock, apache_kafka);
:mod:`integration.registry` names them and starts one by name.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import TopicAlreadyExistsError
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.protocol.messages import MetadataResponse
from kafka_kip.protocol.requests import metadata_request
from kafka_kip_reference.external.probe import kafka_request

# Capabilities that follow from the API keys a target advertises in ApiVersions.
_API_CAPABILITIES: dict[str, tuple[ApiKey, ...]] = {
    'create_topics': (ApiKey.CreateTopics,),
    'delete_topics': (ApiKey.DeleteTopics,),
    'create_partitions': (ApiKey.CreatePartitions,),
    'offset_for_leader_epoch': (ApiKey.OffsetForLeaderEpoch,),
    'groups': (ApiKey.OffsetCommit, ApiKey.OffsetFetch, ApiKey.FindCoordinator, ApiKey.JoinGroup, ApiKey.Heartbeat,
               ApiKey.LeaveGroup, ApiKey.SyncGroup),
}
_METADATA_KEY = ApiKey.Metadata
_METADATA_TOPIC_IDS_VERSION = 10  # MetadataResponse carries topic ids from v10 (KIP-516)
_METADATA_DESCRIBE_VERSION = 12  # kafka-python's newest: topic ids, flexible (so KIP-232 tags decode)

#: Why a target lacks a capability, unless the target says more precisely (``BrokerTarget.limits``).
MISSING: dict[str, str] = {
    'create_topics': 'does not implement CreateTopics (API 19)',
    'delete_topics': 'does not implement DeleteTopics (API 20)',
    'create_partitions': 'does not implement CreatePartitions (API 37)',
    'offset_for_leader_epoch': 'does not implement OffsetForLeaderEpoch (API 23)',
    'groups': 'does not implement the classic group APIs (8-14)',
    'topic_ids': 'serves no topic ids (Metadata v10+, KIP-516)',
    'kip.232': "does not advertise 'kip.232' (partition epochs)",
    'kip.391': "does not advertise 'kip.391' (produce at given offsets)",
    'kip.1243': "does not advertise 'kip.1243' (consistency tokens in headers)",
    'leader_epoch_bumps': 'has no way to move a partition leader, so its leader epochs stay 0',
    'topic_recreation': 'has no way to delete a topic',
    'unclean_election': 'has no way to make a replica lose acknowledged records (unclean leader election)',
    'stale_metadata': 'has no way to make its brokers serve stale metadata',
}

_RECREATE_TIMEOUT = 10.0  # Apache Kafka deletes topics asynchronously


class TargetUnavailable(Exception):
    """A target cannot run here; the message is the reason (shown as the skip reason)."""


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as the target's Metadata describes it (-1 / ``None`` where it says nothing)."""

    topic_id: uuid.UUID | None
    leader_id: int
    leader_epoch: int
    partition_epoch: int


class BrokerTarget:
    """A running broker implementation that tests talk to over real sockets."""

    name: str = ''
    #: The implementation and its version, for the conformance report.
    version: str = ''

    def __init__(self, bootstrap_servers: str, api_versions: Mapping[int, tuple[int, int]],
                 features: frozenset[str] = frozenset(), hooks: frozenset[str] = frozenset(),
                 client_config: Mapping[str, Any] | None = None, limits: Mapping[str, str] | None = None) -> None:
        """``limits``: capabilities the clients cannot use although the target advertises them, and why
        (or a more precise reason for a capability the target lacks)."""
        self.bootstrap_servers = bootstrap_servers
        self.api_versions: dict[int, tuple[int, int]] = dict(api_versions)  # as advertised: {key: (min, max)}
        self.limits: dict[str, str] = dict(limits or {})
        self.capabilities = (capabilities_from(api_versions, features) | hooks) - set(self.limits)
        self.client_config: dict[str, Any] = dict(client_config or {})

    def missing(self, capability: str) -> str:
        """Why this target lacks ``capability`` (the skip reason of tests that need it)."""
        return self.limits.get(capability) or MISSING.get(capability, f'lacks {capability}')

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create ``name`` with ``partitions`` partitions, ready for produce and fetch on return."""
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **self.client_config)
        try:
            admin.create_topics({name: {'num_partitions': partitions, 'replication_factor': 1}},
                                wait_for_metadata=True)
        finally:
            admin.close()

    def recreate_topic(self, name: str, partitions: int = 1) -> None:
        """Delete ``name`` and create it again: a new incarnation (new topic id, empty log).

        Clients that may send Metadata meanwhile must not auto-create topics (``allow_auto_create_topics``).
        """
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **self.client_config)
        try:
            admin.delete_topics([name])
        finally:
            admin.close()
        deadline = time.monotonic() + _RECREATE_TIMEOUT
        while True:
            try:
                return self.create_topic(name, partitions)
            except TopicAlreadyExistsError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    def describe_partition(self, tp: TopicPartition) -> PartitionInfo:
        """``tp`` as the first bootstrap broker's Metadata (v12 at most) describes it, read on a raw
        connection so that no client under test is involved."""
        version = min(self.api_versions[_METADATA_KEY][1], _METADATA_DESCRIBE_VERSION)
        response = kafka_request(self.bootstrap_servers.split(',')[0], metadata_request([tp.topic], version),
                                 MetadataResponse)
        for topic in response.topics:
            for partition in topic.partitions:
                if topic.name == tp.topic and partition.partition_index == tp.partition:
                    topic_id = getattr(topic, 'topic_id', None)
                    return PartitionInfo(None if topic_id in (None, uuid.UUID(int=0)) else topic_id,
                                         partition.leader_id, partition.leader_epoch,
                                         getattr(partition, 'partition_epoch', -1))
        raise LookupError(f'{tp} is not in the metadata of {self.name}')

    def bump_leader_epoch(self, tp: TopicPartition) -> int:
        """Move leadership of ``tp`` so its leader epoch grows by one; returns the new epoch."""
        raise NotImplementedError(f'{self.name} {self.missing("leader_epoch_bumps")}')

    def pause_follower(self, tp: TopicPartition) -> int:
        """A follower of ``tp`` stops copying it (and leaves the ISR); returns its broker id."""
        raise NotImplementedError(f'{self.name} {self.missing("unclean_election")}')

    def elect_uncleanly(self, tp: TopicPartition, broker_id: int) -> int:
        """Make the out-of-sync ``broker_id`` the leader of ``tp``: the records it lacks are lost and the
        other replicas truncate to it. Returns the new leader epoch."""
        raise NotImplementedError(f'{self.name} {self.missing("unclean_election")}')

    def hold_metadata(self) -> None:
        """Every broker keeps serving (and acting on) the metadata it has now, until :meth:`release_metadata`."""
        raise NotImplementedError(f'{self.name} {self.missing("stale_metadata")}')

    def release_metadata(self) -> None:
        """The brokers learn the current metadata again."""
        raise NotImplementedError(f'{self.name} {self.missing("stale_metadata")}')

    def heal(self) -> None:
        """Undo what fault hooks left behind (stopped brokers, held metadata); called after every test."""

    def logs(self) -> str:
        """What the target wrote (process log, internal errors); empty when there is nothing."""
        return ''

    def close(self) -> None:
        """Stop the target and release its ports. Idempotent."""

    def __enter__(self) -> BrokerTarget:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f'<{type(self).__name__} {self.name} {self.bootstrap_servers}>'


def capabilities_from(api_ranges: Mapping[int, tuple[int, int]], features: frozenset[str]) -> frozenset[str]:
    """The capabilities that follow from advertised API keys and supported features."""
    caps = {cap for cap, keys in _API_CAPABILITIES.items() if all(k in api_ranges for k in keys)}
    if api_ranges.get(_METADATA_KEY, (0, -1))[1] >= _METADATA_TOPIC_IDS_VERSION:
        caps.add('topic_ids')
    if {'create_topics', 'delete_topics'} <= caps:
        caps.add('topic_recreation')  # BrokerTarget.recreate_topic through the admin APIs
    return frozenset(caps | features)
