"""librdkafka's mock cluster (inside the confluent-kafka wheel), driven through ctypes.

:class:`MockCluster` owns a librdkafka producer handle and the mock cluster created on it
(``rd_kafka_mock_cluster_new``); it exposes the mock's fault hooks. :class:`LibrdkafkaMockTarget`
wraps it as a conformance :class:`BrokerTarget`.

Findings that shape the target (see integration/test_wire.py for the reproductions):

- The mock implements ApiVersions up to v2 and answers a v3+ request with UNSUPPORTED_VERSION in
  an encoding that is not the v0 layout Kafka requires, so kafka-python's default negotiation (which
  starts at v4) cannot bootstrap. The public ``api_version=(2, 2)`` setting makes kafka-python start
  at ApiVersions v2 and keeps every other request inside the mock's implemented ranges (with 2.3 it
  would send OffsetForLeaderEpoch v3, which the mock does not implement). kafka-python then keeps to
  its 2.2 table although the mock advertises more, so clients see Metadata v7: no topic ids, and
  leader epochs that kafka-python (and kafka_kip's metadata cache) do not trust before v9 (KAFKA-9212).
  Records, commits and OffsetForLeaderEpoch still carry leader epochs.
- JoinGroup v6, SyncGroup v4 and LeaveGroup v3+ are mis-parsed, so the target caps those APIs to
  their last non-flexible versions, which work (the flexible Heartbeat v4 works and is left alone).
"""
from __future__ import annotations

import ctypes
import importlib.util
import time
from pathlib import Path

from kafka.protocol.metadata import MetadataResponse
from kafka.structs import TopicPartition

from integration.targets import BrokerTarget, TargetUnavailable
from kafka_kip.protocol.requests import metadata_request
from kafka_kip_reference.external.probe import kafka_request, wait_until_ready

_RD_KAFKA_PRODUCER = 0
_ERRSTR_SIZE = 512

# (api_key, max_version) caps applied by the target: JoinGroup, SyncGroup, LeaveGroup.
GROUP_API_CAPS: tuple[tuple[int, int], ...] = ((11, 5), (14, 3), (13, 2))
# Public kafka-python configuration that makes it talk to the mock (ApiVersions v2, 2.2-era versions).
CLIENT_CONFIG = {'api_version': (2, 2)}
# What clients cannot use on the mock, and why (see the module docstring).
LIMITS = {
    'topic_ids': 'is reached with api_version=(2, 2) because of its ApiVersions bug, so clients use Metadata v7, '
                 'which has no topic ids',
    'create_topics': 'does not implement CreateTopics (API 19); the target creates topics through the mock C API',
}


def librdkafka_path() -> Path:
    """The librdkafka shared library bundled in the confluent-kafka wheel."""
    spec = importlib.util.find_spec('confluent_kafka')
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError('confluent-kafka is not installed')
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    candidates = sorted(package_dir.parent.joinpath('confluent_kafka.libs').glob('librdkafka*.so*'))
    if not candidates:
        raise FileNotFoundError(f'no bundled librdkafka next to {package_dir}')
    return candidates[0]


def _load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    ptr, char_p, i16, i32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int16, ctypes.c_int32
    signatures = {
        'rd_kafka_conf_new': (ptr, []),
        'rd_kafka_conf_set': (ctypes.c_int, [ptr, char_p, char_p, char_p, ctypes.c_size_t]),
        'rd_kafka_new': (ptr, [ctypes.c_int, ptr, char_p, ctypes.c_size_t]),
        'rd_kafka_destroy': (None, [ptr]),
        'rd_kafka_err2name': (char_p, [ctypes.c_int]),
        'rd_kafka_version_str': (char_p, []),
        'rd_kafka_mock_cluster_new': (ptr, [ptr, ctypes.c_int]),
        'rd_kafka_mock_cluster_destroy': (None, [ptr]),
        'rd_kafka_mock_cluster_bootstraps': (char_p, [ptr]),
        'rd_kafka_mock_topic_create': (ctypes.c_int, [ptr, char_p, ctypes.c_int, ctypes.c_int]),
        'rd_kafka_mock_partition_set_leader': (ctypes.c_int, [ptr, char_p, i32, i32]),
        'rd_kafka_mock_set_apiversion': (ctypes.c_int, [ptr, i16, i16, i16]),
        'rd_kafka_mock_topic_delete': (ctypes.c_int, [ptr, char_p]),
        'rd_kafka_mock_group_initial_rebalance_delay_ms': (None, [ptr, i32]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class MockClusterError(RuntimeError):
    """A mock cluster call returned a librdkafka error code."""


class MockCluster:
    """A librdkafka mock cluster with ``brokers`` brokers (ids 1..brokers); a context manager."""

    def __init__(self, brokers: int = 3) -> None:
        self.broker_count = brokers
        self._lib = _load(librdkafka_path())
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        conf = self._lib.rd_kafka_conf_new()
        # The handle only hosts the mock cluster; it never connects anywhere.
        self._check_conf(conf, b'log_level', b'3', errstr)
        self._rk = self._lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not self._rk:
            raise MockClusterError(f'rd_kafka_new failed: {errstr.value.decode()}')
        self._mcluster = self._lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not self._mcluster:
            self._lib.rd_kafka_destroy(self._rk)
            raise MockClusterError('rd_kafka_mock_cluster_new failed')
        self.bootstrap_servers: str = self._lib.rd_kafka_mock_cluster_bootstraps(self._mcluster).decode()
        self.version: str = self._lib.rd_kafka_version_str().decode()

    def _check_conf(self, conf: int, name: bytes, value: bytes, errstr: ctypes.Array) -> None:
        if self._lib.rd_kafka_conf_set(conf, name, value, errstr, _ERRSTR_SIZE) != 0:
            raise MockClusterError(f'rd_kafka_conf_set {name.decode()}: {errstr.value.decode()}')

    def _check(self, err: int, what: str) -> None:
        if err:
            raise MockClusterError(f'{what}: {self._lib.rd_kafka_err2name(err).decode()}')

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        self._check(self._lib.rd_kafka_mock_topic_create(self._mcluster, name.encode(), partitions,
                                                          replication_factor), f'create topic {name}')

    def set_leader(self, tp: TopicPartition, broker_id: int) -> None:
        """Make ``broker_id`` the leader of ``tp`` (the mock bumps the leader epoch)."""
        err = self._lib.rd_kafka_mock_partition_set_leader(self._mcluster, tp.topic.encode(), tp.partition,
                                                           broker_id)
        self._check(err, f'set leader of {tp}')

    def set_api_version(self, api_key: int, min_version: int, max_version: int) -> None:
        """Advertise and accept only ``min_version..max_version`` of ``api_key`` (-1, -1 disables it)."""
        self._check(self._lib.rd_kafka_mock_set_apiversion(self._mcluster, api_key, min_version, max_version),
                    f'set versions of api {api_key}')

    def delete_topic(self, name: str) -> None:
        self._check(self._lib.rd_kafka_mock_topic_delete(self._mcluster, name.encode()), f'delete topic {name}')

    def set_initial_rebalance_delay(self, delay_ms: int) -> None:
        """The broker setting group.initial.rebalance.delay.ms (librdkafka's mock default is 3000)."""
        self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._mcluster, delay_ms)

    def close(self) -> None:
        """Destroy the mock cluster and its handle. Idempotent."""
        if self._mcluster:
            self._lib.rd_kafka_mock_cluster_destroy(self._mcluster)
            self._mcluster = None
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def partition_leader(bootstrap_servers: str, tp: TopicPartition) -> tuple[int, int]:
    """``(leader_id, leader_epoch)`` of ``tp`` from a Metadata v7 request to the first bootstrap broker."""
    response = kafka_request(bootstrap_servers.split(',')[0], metadata_request([tp.topic], version=7), MetadataResponse)
    for topic in response.topics:
        for partition in topic.partitions:
            if topic.name == tp.topic and partition.partition_index == tp.partition:
                return partition.leader_id, partition.leader_epoch
    raise LookupError(f'{tp} is not in the mock cluster metadata')


class LibrdkafkaMockTarget(BrokerTarget):
    """librdkafka's mock cluster (3 brokers, replication factor 3) as a conformance target."""

    name = 'librdkafka-mock'

    def __init__(self, brokers: int = 3) -> None:
        try:
            self._mock = MockCluster(brokers)
        except (FileNotFoundError, OSError, AttributeError) as exc:
            raise TargetUnavailable(f'librdkafka mock cluster unavailable: {exc}') from exc
        try:
            for api_key, max_version in GROUP_API_CAPS:
                self._mock.set_api_version(api_key, 0, max_version)
            # Kafka's default initial rebalance delay only slows tests down; no test depends on it.
            self._mock.set_initial_rebalance_delay(0)
            ranges, features = wait_until_ready(self._mock.bootstrap_servers.split(',')[0], timeout=10.0,
                                                version=2)
        except BaseException:
            self._mock.close()
            raise
        super().__init__(self._mock.bootstrap_servers, ranges, features,
                         hooks=frozenset({'leader_epoch_bumps', 'topic_recreation'}),
                         client_config=CLIENT_CONFIG, limits=LIMITS)
        self.version = f'librdkafka {self._mock.version}'

    @property
    def mock(self) -> MockCluster:
        """The underlying :class:`MockCluster` (for mock-only fault hooks)."""
        return self._mock

    def create_topic(self, name: str, partitions: int = 1) -> None:
        self._mock.create_topic(name, partitions, min(3, self._mock.broker_count))

    def bump_leader_epoch(self, tp: TopicPartition, timeout: float = 5.0) -> int:
        leader, epoch = partition_leader(self.bootstrap_servers, tp)
        self._mock.set_leader(tp, leader % self._mock.broker_count + 1)
        deadline = time.monotonic() + timeout
        while True:
            new_leader, new_epoch = partition_leader(self.bootstrap_servers, tp)
            if new_epoch != epoch:
                return new_epoch
            if time.monotonic() >= deadline:
                raise TimeoutError(f'leader epoch of {tp} still {epoch} after set_leader')
            time.sleep(0.01)

    def recreate_topic(self, name: str, partitions: int = 1) -> None:
        self._mock.delete_topic(name)
        self.create_topic(name, partitions)

    def close(self) -> None:
        self._mock.close()
