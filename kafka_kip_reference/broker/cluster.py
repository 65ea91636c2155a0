"""ReferenceCluster: the reference cluster's lifecycle and its synchronous public API.

The brokers (:mod:`kafka_kip_reference.broker.broker`), the controller state (:mod:`kafka_kip_reference.broker.state`) and the
group coordinator (:mod:`kafka_kip_reference.broker.groups`) run on one asyncio loop in a background thread;
:class:`ReferenceCluster` starts and stops them and offers a synchronous API for tests and tools.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kafka.structs import TopicPartition

from kafka_kip.protocol import constants
from kafka_kip_reference.broker.acl import AclBinding, Authorizer, principal, replicator_acl
from kafka_kip_reference.broker.advertised import advertised_api_versions, implemented_features
from kafka_kip_reference.broker.apis import HANDLERS
from kafka_kip_reference.broker.broker import Broker
from kafka_kip_reference.broker.config import STANDARD_AUTHORIZER, BrokerConfig
from kafka_kip_reference.broker.consumer_group_coordinator import consumer_group_config
from kafka_kip_reference.broker.control import ControlFn, ControlHandle, Controls
from kafka_kip_reference.broker.data_dir import load as data_dir_load
from kafka_kip_reference.broker.data_dir import save as data_dir_save
from kafka_kip_reference.broker.groups import GroupCoordinator
from kafka_kip_reference.broker.log import LogRecord, PartitionLog
from kafka_kip_reference.broker.metadata_log import MetadataRecord
from kafka_kip_reference.broker.model import BrokerAddress, ClusterError
from kafka_kip_reference.broker.retention import RetentionTask
from kafka_kip_reference.broker.state import ClusterState
from kafka_kip_reference.broker.tls import KeystoreCertificates, TestCertificates
from kafka_kip_reference.broker.transactions import TransactionCoordinator

T = TypeVar('T')


def _with_flags(broker_config: Mapping[str, object] | None, flags: dict[str, object | None]) -> dict[str, object]:
    """``broker_config`` plus the constructor flags that are set; a flag and a config of the same key conflict."""
    config = dict(broker_config or {})
    for name, value in flags.items():
        if value is None:
            continue
        if name in config:
            raise ValueError(f'{name} is given both in broker_config and as a constructor argument')
        config[name] = value
    return config


class ReferenceCluster:
    """A multi-broker Kafka cluster in this process, for tests, demos and tools.

    Each broker listens on ``host`` with an ephemeral port (or ``ports[i]``); the brokers run on an
    asyncio loop in a background thread, so synchronous clients work in the same process. Broker ids
    are ``0 .. brokers-1``. Use as a context manager (or call :meth:`start` / :meth:`close`).

    ``broker_config`` takes Kafka broker configs as ``server.properties`` does (see
    :mod:`kafka_kip_reference.broker.config`): unset keys have Apache Kafka's defaults, e.g. topics are auto-created
    (``auto.create.topics.enable=true``) with ``num.partitions=1`` and ``default.replication.factor=1``.
    ``auto_create_topics``, ``default_partitions`` and ``default_replication_factor`` set those three.

    ``features`` are the extensions the brokers advertise in ApiVersions and honour (default: every one the
    reference cluster implements, ``kip.232``, ``kip.253``, ``kip.391`` and ``kip.1243``); ``features=()`` makes
    stock brokers, which ignore the extension fields of requests as Kafka ignores unknown tagged fields. ``api_versions``
    (``{api_key: (min, max)}``, or ``None`` to leave an API out) narrows what the brokers advertise and accept.

    ``users`` (``{name: password}``) makes every listener require SASL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512,
    as the client chooses). ``replicator_principals``
    limits KIP-391 produce-with-offsets to those SASL users (default: everyone may).

    ``authorizer=True`` checks every request against ACLs, as Kafka's StandardAuthorizer with
    ``allow.everyone.if.no.acl.found=false`` (:mod:`kafka_kip_reference.broker.acl`, :mod:`kafka_kip_reference.broker.authorization`):
    nothing is allowed until ACLs allow it, except to ``super_users`` (user names, or principals such as
    ``User:admin``); clients manage ACLs with CreateAcls / DescribeAcls / DeleteAcls (kafka-python's and kafka_kip's
    admin clients). Producing with offsets then needs KIP-391's REPLICATOR_WRITE on the cluster, which
    ``replicator_principals`` are granted as ACLs. Without an authorizer every connection may do everything, as on
    Kafka without ``authorizer.class.name``; producing with offsets included, unless ``replicator_principals`` are
    named.

    ``data_dir`` (a directory) keeps what Kafka keeps across a restart: written at :meth:`close`, read back here
    (:mod:`kafka_kip_reference.broker.data_dir`).

    ``tls=True`` makes the listeners TLS (SSL, or SASL_SSL with ``users``) with a certificate of a test CA made for
    this cluster; clients trust :attr:`ssl_cafile` (:mod:`kafka_kip_reference.broker.tls`). ``tls`` may instead be a
    :class:`~kafka_kip_reference.broker.tls.KeystoreCertificates`: a Kafka keystore's certificate (``ssl_cafile`` None).
    """

    def __init__(self, brokers: int = 3, *, host: str = '127.0.0.1', ports: list[int] | None = None,
                 broker_config: Mapping[str, object] | None = None, features: Iterable[str] | None = None,
                 api_versions: Mapping[int, tuple[int, int] | None] | None = None,
                 users: dict[str, str] | None = None, replicator_principals: set[str] | None = None,
                 auto_create_topics: bool | None = None, default_partitions: int | None = None,
                 default_replication_factor: int | None = None, cluster_id: str | None = None,
                 tls: bool | KeystoreCertificates = False, authorizer: bool = False, super_users: Iterable[str] = (),
                 data_dir: str | os.PathLike[str] | None = None) -> None:
        if brokers < 1:
            raise ValueError('a cluster needs at least one broker')
        if ports is not None and len(ports) != brokers:
            raise ValueError('ports must list one port per broker')
        if isinstance(super_users, str):
            raise TypeError(f'super_users must be a collection of user names, not the string {super_users!r}: '
                            f'use {{{super_users!r}}}')
        config = _with_flags(broker_config, {'auto.create.topics.enable': auto_create_topics,
                                             'num.partitions': default_partitions,
                                             'default.replication.factor': default_replication_factor,
                                             'authorizer.class.name': STANDARD_AUTHORIZER if authorizer else None,
                                             'super.users': ';'.join(principal(u) for u in sorted(super_users))
                                             or None})
        chosen = implemented_features(features)
        self.state = ClusterState(brokers, host=host, users=users, replicator_principals=replicator_principals,
                                  config=BrokerConfig(config), features=chosen,
                                  api_versions=advertised_api_versions(HANDLERS.versions(), api_versions, chosen),
                                  cluster_id=cluster_id)
        broker_config = self.state.config
        super_users = [name for name in (broker_config['super.users'] or '').split(';') if name.strip()]
        if broker_config['authorizer.class.name'] == STANDARD_AUTHORIZER:
            self.state.authorizer = Authorizer(
                super_users, allow_everyone_if_no_acl_found=broker_config.bool('allow.everyone.if.no.acl.found'),
                on_change=self.state.record_change)
            for user in sorted(replicator_principals or ()):
                self.state.authorizer.create(replicator_acl(user))
        elif super_users:
            raise ValueError('super users need an authorizer (authorizer=True or authorizer.class.name='
                             f'{STANDARD_AUTHORIZER}): without one every user may do everything')
        self.groups = GroupCoordinator(
            self.state, initial_rebalance_delay_ms=broker_config.int('group.initial.rebalance.delay.ms'),
            min_session_timeout_ms=broker_config.int('group.min.session.timeout.ms'),
            max_session_timeout_ms=broker_config.int('group.max.session.timeout.ms'),
            offset_metadata_max_bytes=broker_config.int('offset.metadata.max.bytes'),
            consumer_config=consumer_group_config(broker_config))
        self.state.on_topic_deleted(self.groups.forget_topic)  # Kafka drops the offsets of deleted partitions
        self.transactions = TransactionCoordinator(self.state, self.groups)
        self.retention = RetentionTask(self.state)
        self._data_dir = data_dir
        if data_dir is not None:
            data_dir_load(data_dir, self.state, self.groups, self.transactions, cluster_id_given=cluster_id is not None)
        self._controls = Controls()
        self._tls = (tls if isinstance(tls, KeystoreCertificates) else TestCertificates(host)) if tls else None
        self._ports = list(ports) if ports else [0] * brokers
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._brokers: dict[int, Broker] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> ReferenceCluster:
        """Start every broker; returns self. Idempotent."""
        if self._loop is not None:
            return self
        self._loop = asyncio.new_event_loop()
        self.state.loop = self._loop
        self._thread = threading.Thread(target=self._loop.run_forever, name='kafka-kip-reference-cluster',
                                        daemon=True)
        self._thread.start()
        ssl_context = self._tls.server_context() if self._tls else None
        self._brokers = {b: Broker(self.state, self.groups, self.transactions, self._controls, b, self.state.host,
                                   port, ssl_context)
                         for b, port in zip(self.state.broker_ids, self._ports, strict=True)}
        try:
            for broker in self._brokers.values():
                self._run(broker.start())
            self._call(self.transactions.start)
            self._call(self.retention.start)
            self._call(self.transactions.resume_markers)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every broker, close every socket and end the loop thread. Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            for broker in self._brokers.values():
                self._run(broker.stop())
            self._call(self.groups.close)
            self._call(self.transactions.close)
            self._call(self.retention.close)
            if self._data_dir is not None:
                self._call(data_dir_save, self._data_dir, self.state, self.groups, self.transactions)
            self._run(self._cancel_remaining_tasks())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._loop = self._thread = None
            self.state.loop = None

    @staticmethod
    async def _cancel_remaining_tasks() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __enter__(self) -> ReferenceCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, coro: Any) -> Any:
        if self._loop is None:
            coro.close()
            raise RuntimeError('the reference cluster is not running')
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the loop thread and return its result (state is single-threaded)."""
        if self._loop is None:
            raise RuntimeError('the reference cluster is not running')
        if threading.current_thread() is self._thread:
            return fn(*args)
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the calling thread
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return future.result()

    # -- addresses ----------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``"host:port,host:port,..."`` of every broker (stopped ones included)."""
        return ','.join(f'{a.host}:{a.port}' for a in self.brokers())

    def brokers(self) -> list[BrokerAddress]:
        """Every broker's address, by id."""
        return [self.state.addresses[b] for b in self.state.broker_ids]

    def add_acls(self, *acls: AclBinding) -> None:
        """Store ``acls`` (``authorizer=True``), as CreateAcls would; InvalidAcl for one Kafka would not store."""
        if self.state.authorizer is None:
            raise ValueError('the cluster has no authorizer: ReferenceCluster(authorizer=True)')
        for acl in acls:
            self._call(self.state.authorizer.create, acl)

    def acls(self) -> list[AclBinding]:
        """Every stored ACL, in creation order ([] without an authorizer)."""
        return self._call(lambda: self.state.authorizer.acls() if self.state.authorizer else [])

    @property
    def ssl_cafile(self) -> str | None:
        """The PEM file of the CA that signed the listeners' certificate (``tls=True``), None without TLS."""
        return self._tls.cafile if self._tls else None

    @property
    def security_protocol(self) -> str:
        """What clients set as ``security_protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        if self._tls:
            return 'SASL_SSL' if self.state.users else 'SSL'
        return 'SASL_PLAINTEXT' if self.state.users else 'PLAINTEXT'

    @property
    def cluster_id(self) -> str:
        return self.state.cluster_id

    # -- topics -------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: dict[str, str] | None = None) -> uuid.UUID:
        """Create a topic (replicas spread round-robin from broker 0); returns its topic id."""
        topic = self._call(self.state.create_topic, name, partitions, replication_factor, configs)
        return topic.topic_id

    def delete_topic(self, name: str) -> None:
        self._call(self.state.delete_topic, name)

    def create_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions."""
        self._call(self.state.create_partitions, name, total)

    def topic_id(self, name: str) -> uuid.UUID | None:
        return self._call(self.state.topic_id, name)

    def partition_epoch(self, tp: TopicPartition) -> int:
        """The KIP-232 partition epoch of ``tp``."""
        return self._call(lambda: self.state.require_partition(tp).partition_epoch)

    def max_partition_epoch(self) -> int:
        return self._call(lambda: self.state.max_partition_epoch)

    # -- partition state ----------------------------------------------------------------------

    def leader(self, tp: TopicPartition) -> int:
        """The leader's broker id (-1 while the partition is offline)."""
        return self._call(lambda: self.state.require_partition(tp).leader)

    def replicas(self, tp: TopicPartition) -> list[int]:
        return self._call(lambda: list(self.state.require_partition(tp).replicas))

    def isr(self, tp: TopicPartition) -> list[int]:
        return self._call(lambda: list(self.state.require_partition(tp).isr))

    def leader_epoch(self, tp: TopicPartition) -> int:
        return self._call(lambda: self.state.require_partition(tp).leader_epoch)

    def epochs(self, tp: TopicPartition, broker_id: int | None = None) -> list[tuple[int, int]]:
        """The leader epoch cache ``[(epoch, start_offset), ...]`` of the leader (or that replica)."""
        return self._call(lambda: [tuple(e) for e in self._log(tp, broker_id).epochs])

    def _log(self, tp: TopicPartition, broker_id: int | None) -> PartitionLog:
        partition = self.state.require_partition(tp)
        broker = partition.leader if broker_id is None else broker_id
        if broker not in partition.logs:
            raise ClusterError(constants.INVALID_REPLICA_ASSIGNMENT,
                               f'broker {broker} has no replica of {tp}')
        return partition.logs[broker]

    def records(self, tp: TopicPartition, broker_id: int | None = None) -> list[LogRecord]:
        """``[(offset, leader_epoch, key, value), ...]`` in the leader's log (or that replica's), without
        transaction markers (their offsets are the gaps)."""
        return self._call(lambda: self._log(tp, broker_id).records())

    def log_end_offset(self, tp: TopicPartition, broker_id: int | None = None) -> int:
        return self._call(lambda: self._log(tp, broker_id).log_end_offset)

    def high_watermark(self, tp: TopicPartition, broker_id: int | None = None) -> int:
        return self._call(lambda: self._log(tp, broker_id).high_watermark)

    def last_stable_offset(self, tp: TopicPartition, broker_id: int | None = None) -> int:
        """Where read_committed consumers stop: the first offset of the oldest open transaction, else the HW."""
        return self._call(lambda: self._log(tp, broker_id).last_stable_offset)

    def log_start_offset(self, tp: TopicPartition, broker_id: int | None = None) -> int:
        return self._call(lambda: self._log(tp, broker_id).log_start_offset)

    # -- fault injection ----------------------------------------------------------------------

    def pause_replication(self, tp: TopicPartition, broker_id: int) -> None:
        """Follower ``broker_id`` stops copying ``tp`` and leaves its ISR."""
        self._call(self.state.pause_replication, tp, broker_id)

    def resume_replication(self, tp: TopicPartition, broker_id: int) -> None:
        """Follower ``broker_id`` truncates by the epoch rule, catches up and rejoins the ISR."""
        self._call(self.state.resume_replication, tp, broker_id)

    def elect_leader(self, tp: TopicPartition, broker_id: int, unclean: bool = False) -> int:
        """Make ``broker_id`` the leader of ``tp`` with a new leader epoch (returned).

        Without ``unclean`` the broker must be in the ISR. Every other copying replica truncates to
        the new leader's log by the OffsetForLeaderEpoch rule.
        """
        return self._call(self.state.elect_leader, tp, broker_id, unclean)

    def stop_broker(self, broker_id: int) -> None:
        """Close the broker's listener and connections; its partitions get new leaders if possible."""
        self._run(self._brokers[broker_id].stop())

    def start_broker(self, broker_id: int) -> None:
        """Restart a stopped broker on its old port; it catches up and rejoins ISRs."""
        self._run(self._brokers[broker_id].start())

    def delay_metadata(self, broker_id: int) -> None:
        """Freeze the broker's metadata and partition state (stale metadata, zombie leadership)."""
        self._call(self.state.delay_metadata, broker_id)

    def release_metadata(self, broker_id: int) -> None:
        """The broker learns the current state; old leaderships become follower truncations."""
        self._call(self.state.release_metadata, broker_id)

    def metadata_offset(self, broker_id: int | None = None) -> int:
        """The last metadata log offset broker ``broker_id``'s image contains (None: the current image's), the
        consistency token its responses carry (KIP-1243)."""
        if broker_id is not None and broker_id not in self.state.broker_ids:
            raise ValueError(f'unknown broker id {broker_id}; the brokers are {self.state.broker_ids}')
        return self._call(lambda: (self.state.image() if broker_id is None else self.state.view(broker_id)).offset)

    def metadata_log(self, start: int = 0) -> list[MetadataRecord]:
        """The cluster metadata log from offset ``start``: ``[MetadataRecord(offset, change), ...]``."""
        return self._call(self.state.metadata_log.records, start)

    def control(self, api_key: int | None, fn: ControlFn, *, broker_id: int | None = None,
                keep: bool = False) -> ControlHandle:
        """Let ``fn`` answer, delay, drop or pass requests of ``api_key`` (None: every API) reaching
        ``broker_id`` (None: any broker); see :mod:`kafka_kip_reference.broker.control`. It acts once unless ``keep``."""
        if broker_id is not None and broker_id not in self.state.broker_ids:
            raise ValueError(f'unknown broker id {broker_id}; the brokers are {self.state.broker_ids}')
        return self._controls.add(api_key, fn, broker_id, keep)

    @property
    def broker_config(self) -> BrokerConfig:
        """The brokers' configs (Kafka's defaults plus ``broker_config``)."""
        return self.state.config

    @property
    def features(self) -> frozenset[str]:
        """The extensions the brokers advertise and honour."""
        return self.state.features

    @property
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """``{api_key: (min, max)}`` the brokers advertise and accept."""
        return dict(self.state.api_versions)

    @property
    def internal_errors(self) -> list[BaseException]:
        """Unexpected exceptions raised by request handlers (each is a broker bug)."""
        return list(self.state.internal_errors)
