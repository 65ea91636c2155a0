"""The reference cluster's controller: topics, partitions, leadership, replication and the broker lifecycle.

:class:`ClusterState` is the whole cluster's state (the controller's view of topics and partitions,
every replica's log, the brokers) and lives on one asyncio loop thread.

Replication is synchronous and in-process: the true leader's append is copied at once to every
follower in the ISR. A follower that stops copying (paused, stopped broker, delayed metadata)
leaves the ISR at once, as ``replica.lag.time.max.ms`` would make it; when it copies again it
first truncates by the leader epoch rule (KIP-101/KIP-279) and catches up, then rejoins the ISR.
So the high watermark (min log end offset of the ISR) always equals the leader's log end offset.

Every metadata change appends a record to the cluster metadata log (:mod:`kafka_kip_reference.broker.metadata_log`);
an image contains the log up to its ``offset`` (KIP-1243's consistency token). A broker with delayed metadata
keeps the :class:`MetadataImage` it had, offset included: it answers Metadata from it and, if it led a partition, keeps acting as that partition's leader at the old leader epoch (a
"zombie", KAFKA-6880) with an ISR of itself. On release it learns the current state and truncates
by the epoch rule like any follower.
"""
from __future__ import annotations

import asyncio
import time
import uuid
import zlib
from collections.abc import Callable

from kafka.structs import TopicPartition

from kafka_kip.protocol import constants
from kafka_kip.protocol.features import KIP_253
from kafka_kip_reference.broker.acl import Authorizer
from kafka_kip_reference.broker.batches import BatchHeader, build_control_batch, parse_header, rewrite
from kafka_kip_reference.broker.byte_rates import QuotaSensors
from kafka_kip_reference.broker.client_quotas import ClientQuotas
from kafka_kip_reference.broker.config import BrokerConfig, validate_topic_configs
from kafka_kip_reference.broker.kafka_features import FinalizedFeatures
from kafka_kip_reference.broker.log import PartitionLog
from kafka_kip_reference.broker.metadata_log import MetadataLog
from kafka_kip_reference.broker.model import (
    MAX_PARTITIONS,
    NO_LEADER,
    BrokerAddress,
    ClusterError,
    MetadataImage,
    Partition,
    PartitionView,
    Reassignment,
    Topic,
    TopicView,
    validate_topic_name,
)
from kafka_kip_reference.broker.scram_credentials import ScramCredentials


class ClusterState:
    """All state of a reference cluster. Use only on the cluster's loop thread.

    The read API for handlers is documented in :mod:`kafka_kip_reference.broker.context`.
    """

    def __init__(self, broker_count: int, *, host: str = '127.0.0.1', users: dict[str, str] | None = None,
                 replicator_principals: set[str] | None = None, config: BrokerConfig | None = None,
                 features: frozenset[str] = frozenset(), api_versions: dict[int, tuple[int, int]] | None = None,
                 cluster_id: str | None = None) -> None:
        self.cluster_id = cluster_id or 'ref-' + uuid.uuid4().hex[:18]
        self.host = host
        self.users = dict(users or {})
        #: SCRAM credentials by user and mechanism: ``users`` at start, then AlterUserScramCredentials
        self.scram_credentials = ScramCredentials(self.users)
        #: client quotas (AlterClientQuotas) and the byte rates each broker measures against them
        self.client_quotas = ClientQuotas()
        self.quota_sensors = QuotaSensors()
        #: the ACL authorizer (``ReferenceCluster(authorizer=True)``); None: every request is allowed, as on Kafka
        #: without ``authorizer.class.name``
        self.authorizer: Authorizer | None = None
        self.replicator_principals = None if replicator_principals is None else set(replicator_principals)
        self.config = config or BrokerConfig()
        #: the extensions (``kip.*``) the brokers advertise and honour; a request's other extension fields
        #: are ignored, as a stock broker ignores unknown tagged fields
        self.features = frozenset(features)
        #: api_key -> (min, max) the brokers advertise and accept
        self.api_versions: dict[int, tuple[int, int]] = dict(api_versions or {})
        #: Kafka's own features (transaction.version, group.version) as finalized by UpdateFeatures
        self.kafka_features = FinalizedFeatures()
        self.broker_ids: list[int] = list(range(broker_count))
        self.addresses: dict[int, BrokerAddress] = {}
        self.running: set[int] = set()
        self.delayed: dict[int, MetadataImage] = {}
        self.topics: dict[str, Topic] = {}
        self.max_partition_epoch = 0
        #: the metadata quorum's leader (the lowest live broker id) and how often it changed
        self.controller_id = NO_LEADER
        self.controller_epoch = 0
        #: each broker's log directory id (DescribeQuorum reports it; KIP-858)
        self.directory_ids = {b: uuid.uuid4() for b in range(broker_count)}
        self._next_producer_id = 1000
        self._image: MetadataImage | None = None
        #: topics changed since ``_image`` was built (None: rebuild every topic's view)
        self._changed_topics: set[str] | None = None
        self._image_current = False
        self._topic_names: dict[uuid.UUID, str] = {}
        #: the cluster metadata log; an image built now contains it up to its last offset
        self.metadata_log = MetadataLog()
        self._metadata_advanced: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        #: unexpected handler exceptions (each one is a broker bug); tests assert it stays empty
        self.internal_errors: list[BaseException] = []
        #: held while a produced batch larger than one decompressed piece is validated (one at a time)
        self.large_batch_lock = asyncio.Lock()
        self._topic_deleted: list[Callable[[str], None]] = []

    def on_topic_deleted(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(name)`` after a topic is deleted (the group coordinator drops its offsets)."""
        self._topic_deleted.append(listener)

    # -- read API for handlers (see kafka_kip_reference.broker.context) -----------------------------------

    def live_broker_ids(self) -> list[int]:
        return sorted(self.running)

    def broker(self, broker_id: int) -> BrokerAddress:
        return self.addresses[broker_id]

    def coordinator_for(self, group_id: str) -> int:
        """Rendezvous hash of the group over live brokers: only groups of a stopped broker move."""
        live = self.live_broker_ids()
        if not live:
            return NO_LEADER
        return max(live, key=lambda b: zlib.crc32(f'{group_id}\0{b}'.encode()))

    def topic_id(self, name: str) -> uuid.UUID | None:
        topic = self.topics.get(name)
        return topic.topic_id if topic else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._topic_names.get(topic_id)

    def partitions(self, topic: str) -> int | None:
        found = self.topics.get(topic)
        return len(found.partitions) if found else None

    def partition(self, topic: str, index: int) -> Partition | None:
        found = self.topics.get(topic)
        if found is None or not 0 <= index < len(found.partitions):
            return None
        return found.partitions[index]

    def partition_epoch(self, topic: str, partition: int) -> int:
        found = self.partition(topic, partition)
        return found.partition_epoch if found else constants.UNKNOWN_EPOCH

    def leader_epoch(self, topic: str, partition: int) -> int:
        found = self.partition(topic, partition)
        return found.leader_epoch if found else constants.UNKNOWN_EPOCH

    def high_watermark(self, topic: str, partition: int) -> int:
        found = self.partition(topic, partition)
        if found is None or found.leader == NO_LEADER:
            return constants.UNKNOWN_OFFSET
        return found.logs[found.leader].high_watermark

    def log_start_offset(self, topic: str, partition: int) -> int:
        found = self.partition(topic, partition)
        if found is None or found.leader == NO_LEADER:
            return constants.UNKNOWN_OFFSET
        return found.logs[found.leader].log_start_offset

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def honours(self, feature: str) -> bool:
        """True if the brokers implement extension ``feature`` (``kip.232``, ...) in this cluster."""
        return feature in self.features

    # -- metadata images ----------------------------------------------------------------------

    def image(self) -> MetadataImage:
        """The current metadata. Built lazily after controller changes; only the views of the topics changed
        since the last image are rebuilt (a change costs what it changes, not the whole image)."""
        if self._image is not None and self._image_current:
            return self._image
        previous, changed = self._image, self._changed_topics
        if previous is None or changed is None:
            topics = {name: _topic_view(topic) for name, topic in self.topics.items()}
        else:
            topics = dict(previous.topics)
            for name in changed:
                topic = self.topics.get(name)
                if topic is None:
                    topics.pop(name, None)
                else:
                    topics[name] = _topic_view(topic)
        live = self.live_broker_ids()
        self._image = MetadataImage(
            topics=topics, topic_names=dict(self._topic_names),
            brokers=tuple(self.addresses[b] for b in live if b in self.addresses),
            controller_id=live[0] if live else NO_LEADER, max_partition_epoch=self.max_partition_epoch,
            offset=self.metadata_log.last_offset)
        self._image_current, self._changed_topics = True, set()
        return self._image

    def view(self, broker_id: int) -> MetadataImage:
        """The metadata broker ``broker_id`` acts on: frozen while its metadata is delayed."""
        return self.delayed.get(broker_id) or self.image()

    def record_change(self, change: str) -> None:
        """A metadata change made outside this class (an ACL): logged and seen by the next images."""
        self._changed(change, topics=())

    def _changed(self, change: str, topics: tuple[str, ...] | None = None) -> None:
        """A metadata change of ``topics`` (None: of any topic): recorded in the metadata log; images built from
        now on contain it."""
        self.metadata_log.append(change)
        self._image_current = False
        if topics is None:
            self._changed_topics = None
        elif self._changed_topics is not None:
            self._changed_topics.update(topics)
        live = self.live_broker_ids()
        controller = live[0] if live else NO_LEADER
        if controller != self.controller_id:
            self.controller_id = controller
            self.controller_epoch += controller != NO_LEADER
        self._wake_metadata_waiters()

    @property
    def metadata_offset(self) -> int:
        """The metadata log's end offset (the offset its next record gets): where Kafka's KRaft log would be."""
        return self.metadata_log.last_offset + 1

    def _wake_metadata_waiters(self) -> None:
        event, self._metadata_advanced = self._metadata_advanced, None
        if event is not None:
            event.set()

    async def wait_for_metadata(self, broker_id: int, offset: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until broker ``broker_id``'s image contains metadata log ``offset``; True if
        it does (at once when it already does), False when the time ran out first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.view(broker_id).offset < offset:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            if self._metadata_advanced is None:
                self._metadata_advanced = asyncio.Event()
            try:
                await asyncio.wait_for(self._metadata_advanced.wait(), remaining)
            except TimeoutError:
                return False
        return True

    # -- topics -------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None,
                     assignments: list[list[int]] | None = None, validate_only: bool = False) -> Topic | None:
        """Create a topic; raises ClusterError with Kafka's error code when Kafka would refuse."""
        validate_topic_name(name)
        if name in self.topics:
            raise ClusterError(constants.TOPIC_ALREADY_EXISTS, f'topic {name!r} already exists')
        configs = validate_topic_configs({k: v for k, v in (configs or {}).items() if k is not None and v is not None},
                                         lambda message: ClusterError(constants.INVALID_CONFIG, message))
        if assignments:
            replica_sets = self._validate_assignments(assignments)
        else:
            if not 0 < partitions <= MAX_PARTITIONS:
                raise ClusterError(constants.INVALID_PARTITIONS,
                                   f'number of partitions must be in 1..{MAX_PARTITIONS}')
            replica_sets = self._assign(partitions, replication_factor, start=0)
        if validate_only:
            return None
        topic = Topic(name, self._new_topic_id(), [], configs, self.config.shared_topic_defaults)
        self._add_partitions(topic, replica_sets)
        self.topics[name] = topic
        self._topic_names[topic.topic_id] = name
        self._changed(f'create topic {name} ({len(replica_sets)} partitions)', topics=(name,))
        return topic

    def restore_topic(self, topic: Topic) -> None:
        """Add a topic read back from a data directory (:mod:`kafka_kip_reference.broker.data_dir`)."""
        self.topics[topic.name] = topic
        self._topic_names[topic.topic_id] = topic.name
        self._changed(f'restore topic {topic.name} ({len(topic.partitions)} partitions)', topics=(topic.name,))

    def _validate_assignments(self, assignments: list[list[int]]) -> list[list[int]]:
        if len(assignments) > MAX_PARTITIONS:
            raise ClusterError(constants.INVALID_PARTITIONS, f'more than {MAX_PARTITIONS} partitions')
        sizes = {len(replicas) for replicas in assignments}
        for replicas in assignments:
            if not replicas or len(set(replicas)) != len(replicas) or len(sizes) != 1 \
                    or not set(replicas) <= set(self.broker_ids):
                raise ClusterError(constants.INVALID_REPLICA_ASSIGNMENT,
                                   f'invalid replica assignment {assignments}')
        return [list(r) for r in assignments]

    def _assign(self, count: int, replication_factor: int, start: int) -> list[list[int]]:
        live = self.live_broker_ids()
        if replication_factor <= 0 or replication_factor > len(live):
            raise ClusterError(constants.INVALID_REPLICATION_FACTOR,
                               f'replication factor {replication_factor} with {len(live)} live brokers')
        return [[live[(start + p + k) % len(live)] for k in range(replication_factor)] for p in range(count)]

    def _new_topic_id(self) -> uuid.UUID:
        while True:
            topic_id = uuid.uuid4()
            if topic_id not in self._topic_names:
                return topic_id

    def _add_partitions(self, topic: Topic, replica_sets: list[list[int]],
                        prior_epochs: dict[int, int] | None = None) -> None:
        for replicas in replica_sets:
            self.max_partition_epoch += 1
            partition = Partition(topic.name, topic.topic_id, len(topic.partitions), list(replicas),
                                  self.max_partition_epoch, prior_epochs=dict(prior_epochs or {}))
            partition.logs = {b: new_log(topic, b) for b in replicas}
            partition.isr = [b for b in replicas if self._replicating(partition, b)]
            if partition.isr:
                partition.leader = partition.isr[0]
                partition.logs[partition.leader].assign_epoch(0, 0)
            else:
                partition.isr = [replicas[0]]  # offline until a replica starts (Kafka keeps the last ISR)
            topic.partitions.append(partition)

    def delete_topic(self, name: str) -> Topic:
        if not self.config.bool('delete.topic.enable'):
            raise ClusterError(constants.TOPIC_DELETION_DISABLED,
                               'topic deletion is disabled (delete.topic.enable=false)')
        topic = self.topics.pop(name, None)
        if topic is None:
            raise ClusterError(constants.UNKNOWN_TOPIC_OR_PARTITION, f'unknown topic {name!r}')
        self.max_partition_epoch += 1
        for partition in topic.partitions:
            partition.deleted = True
            partition.notify()
        del self._topic_names[topic.topic_id]
        self._changed(f'delete topic {name}', topics=(name,))
        for listener in self._topic_deleted:
            listener(name)
        return topic

    def create_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None,
                          validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise ClusterError(constants.UNKNOWN_TOPIC_OR_PARTITION, f'unknown topic {name!r}')
        current = len(topic.partitions)
        if not current < total <= MAX_PARTITIONS:
            raise ClusterError(constants.INVALID_PARTITIONS,
                               f'topic {name!r} has {current} partitions; the new count '
                               f'must be larger and at most {MAX_PARTITIONS}')
        if assignments:
            replica_sets = self._validate_assignments(assignments)
            if len(replica_sets) != total - current:
                raise ClusterError(constants.INVALID_REPLICA_ASSIGNMENT,
                                   'one assignment per new partition is required')
        else:
            replica_sets = self._assign(total - current, len(topic.partitions[0].replicas), start=current)
        if not validate_only:
            prior_epochs = self._bump_leader_epochs(topic) if self.honours(KIP_253) else {}
            self._add_partitions(topic, replica_sets, prior_epochs)
            self._changed(f'create partitions of {name}: {current} -> {total}', topics=(name,))

    def _bump_leader_epochs(self, topic: Topic) -> dict[int, int]:
        """KIP-253's expansion step: every existing partition gets a new leader epoch (same leader, a new
        epoch-cache entry at its log end), in the same metadata change as the new partitions; returns each one's
        leader epoch from before the bump."""
        before = {partition.index: partition.leader_epoch for partition in topic.partitions}
        for partition in topic.partitions:
            self._next_leader_epoch(partition, partition.leader)
        return before

    # -- producer ids -------------------------------------------------------------------------

    def allocate_producer_id(self) -> int:
        self._next_producer_id += 1
        return self._next_producer_id

    def allocate_producer_ids_from(self, producer_id: int) -> None:
        """Allocate no producer id below ``producer_id`` (a data directory read back)."""
        self._next_producer_id = max(self._next_producer_id, producer_id - 1)

    # -- replication --------------------------------------------------------------------------

    def _replicating(self, partition: Partition, broker_id: int) -> bool:
        """True if ``broker_id`` copies from the leader right now."""
        return (broker_id in self.running and broker_id not in self.delayed
                and broker_id not in partition.paused)

    def is_current_leader(self, view: PartitionView, broker_id: int) -> bool:
        """True unless ``view`` is a zombie: leadership the controller has moved or a deleted topic."""
        partition = view.partition
        return (not partition.deleted and partition.leader == broker_id
                and partition.leader_epoch == view.leader_epoch)

    def append(self, view: PartitionView, broker_id: int, batch: bytes, header: BatchHeader) -> None:
        """Leader append of a stored batch on ``broker_id``, replicated to the ISR at once."""
        partition = view.partition
        leader_log = partition.logs[broker_id]
        leader_log.append(batch, header)
        if self.is_current_leader(view, broker_id):
            for follower in partition.isr:
                if follower != broker_id:
                    follower_log = partition.logs[follower]
                    follower_log.append(batch, header)
                    follower_log.high_watermark = follower_log.log_end_offset
                    follower_log.notify()
        leader_log.high_watermark = leader_log.log_end_offset
        leader_log.notify()

    def write_marker(self, tp: TopicPartition, commit: bool, producer_id: int, producer_epoch: int,
                     coordinator_epoch: int) -> bool:
        """Append a transaction marker at the current leader of ``tp`` (replicated like any batch).

        True when written or when the partition no longer exists (nothing to mark); False while it has no
        leader (the coordinator retries, as Kafka's marker channel does).
        """
        partition = self.partition(tp.topic, tp.partition)
        if partition is None or partition.deleted:
            return True
        if partition.leader == NO_LEADER:
            return False
        log = partition.logs[partition.leader]
        marker = build_control_batch(commit, producer_id, producer_epoch, coordinator_epoch, self.now_ms())
        stored = rewrite(marker, log.log_end_offset, partition.leader_epoch)
        self.append(self.image().partition(tp.topic, tp.partition), partition.leader, stored, parse_header(stored))
        return True

    def delete_records(self, view: PartitionView, broker_id: int, offset: int) -> int:
        """Advance the log start offset on the leader and the replicas copying it; returns it."""
        partition = view.partition
        copying = partition.isr if self.is_current_leader(view, broker_id) else [broker_id]
        for replica in {broker_id, *copying}:
            partition.logs[replica].advance_log_start(offset)
        return partition.logs[broker_id].log_start_offset

    def effective_isr(self, view: PartitionView, broker_id: int) -> int:
        """ISR size the leader acts on (a zombie has shrunk its ISR to itself)."""
        return len(view.partition.isr) if self.is_current_leader(view, broker_id) else 1

    def _catch_up(self, partition: Partition, follower: int) -> None:
        """Truncate ``follower`` by the leader epoch rule, copy what it misses, add it to the ISR."""
        leader_log = partition.logs[partition.leader]
        log = partition.logs[follower]
        truncate_by_epoch(log, leader_log)
        if log.log_end_offset < leader_log.log_start_offset:
            log.truncate_fully_and_start_at(leader_log.log_start_offset)
        for batch, header in leader_log.batches_from(log.log_end_offset):
            log.append(batch, header)
        log.advance_log_start(leader_log.log_start_offset)
        log.high_watermark = min(leader_log.high_watermark, log.log_end_offset)
        if follower not in partition.isr:
            partition.isr = [b for b in partition.replicas if b in partition.isr or b == follower]
        log.notify()

    def _reconcile(self, partition: Partition) -> None:
        """After a leader change: followers that copy truncate and catch up; others leave the ISR."""
        if partition.leader == NO_LEADER:
            return
        partition.isr = [partition.leader]
        leader_log = partition.logs[partition.leader]
        leader_log.high_watermark = leader_log.log_end_offset  # every copying follower reaches it below
        for replica in partition.replicas:
            if replica != partition.leader and self._replicating(partition, replica):
                self._catch_up(partition, replica)
        partition.notify()

    def _elect(self, partition: Partition, leader: int) -> None:
        self._next_leader_epoch(partition, leader)
        self._changed(f'{partition.tp}: leader {leader} at epoch {partition.leader_epoch}', topics=(partition.topic,))

    def _next_leader_epoch(self, partition: Partition, leader: int) -> None:
        """``leader`` leads ``partition`` at a new leader epoch (not yet a metadata change of its own)."""
        partition.leader_epoch += 1
        partition.leader = leader
        if leader != NO_LEADER:
            log = partition.logs[leader]
            log.assign_epoch(partition.leader_epoch, log.log_end_offset)
            self._reconcile(partition)
        else:
            partition.notify()

    # -- fault injection ----------------------------------------------------------------------

    def require_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partition(tp.topic, tp.partition)
        if partition is None:
            raise ClusterError(constants.UNKNOWN_TOPIC_OR_PARTITION, f'unknown partition {tp}')
        return partition

    def elect_leader(self, tp: TopicPartition, broker_id: int, unclean: bool = False) -> int:
        partition = self.require_partition(tp)
        if broker_id not in partition.replicas:
            raise ClusterError(constants.INVALID_REPLICA_ASSIGNMENT,
                               f'broker {broker_id} is not a replica of {tp}')
        if broker_id not in self.running:
            raise ClusterError(constants.BROKER_NOT_AVAILABLE, f'broker {broker_id} is stopped')
        if not unclean and broker_id not in partition.isr:
            raise ClusterError(constants.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                               f'broker {broker_id} is not in the ISR {partition.isr} of {tp}')
        self._elect(partition, broker_id)
        return partition.leader_epoch

    # -- elections and reassignments (ElectLeaders, AlterPartitionReassignments) -------------------

    def elect_preferred_leader(self, partition: Partition) -> int:
        """ElectLeaders PREFERRED: the first assigned replica leads, if it is live and in the ISR."""
        preferred = partition.replicas[0]
        if partition.leader == preferred:
            return constants.ELECTION_NOT_NEEDED
        if preferred not in partition.isr or not self._replicating(partition, preferred):
            return constants.PREFERRED_LEADER_NOT_AVAILABLE
        self._elect(partition, preferred)
        return constants.NONE

    def elect_unclean_leader(self, partition: Partition) -> int:
        """ElectLeaders UNCLEAN: a partition without a leader gets one, from the ISR if possible, else any
        live replica (it may have lost records)."""
        if partition.leader != NO_LEADER:
            return constants.ELECTION_NOT_NEEDED
        live = [b for b in partition.replicas if b in self.running and b not in self.delayed]
        candidates = [b for b in live if b in partition.isr] or live
        if not candidates:
            return constants.ELIGIBLE_LEADERS_NOT_AVAILABLE
        self._elect(partition, candidates[0])
        return constants.NONE

    def reassign(self, partition: Partition, target: list[int] | None, allow_replication_factor_change: bool) -> None:
        """Move the partition to the ``target`` replicas (None: cancel the reassignment in progress).

        New replicas copy the leader's log; the reassignment completes once every target replica is in the ISR
        (at once when they are all running), the leader moving to the target's first ISR member if it leaves.
        """
        current = partition.reassignment
        original = list(current.original) if current else list(partition.replicas)
        if target is None:
            if current is None:
                raise ClusterError(constants.NO_REASSIGNMENT_IN_PROGRESS,
                                   f'no reassignment of {partition.tp} is in progress')
            target = original
        if not target or len(set(target)) != len(target) or not set(target) <= set(self.broker_ids):
            raise ClusterError(constants.INVALID_REPLICA_ASSIGNMENT,
                               f'invalid replica assignment {target} for {partition.tp}')
        if not allow_replication_factor_change and len(target) != len(original):
            raise ClusterError(constants.INVALID_REPLICATION_FACTOR,
                               f'the reassignment of {partition.tp} changes its '
                               f'replication factor from {len(original)} to {len(target)}')
        partition.reassignment = Reassignment(tuple(original), tuple(target))
        partition.replicas = list(target) + [b for b in original if b not in target]
        for broker_id in partition.replicas:
            if broker_id not in partition.logs:
                partition.logs[broker_id] = new_log(self.topics[partition.topic], broker_id)
                if partition.leader != NO_LEADER and self._replicating(partition, broker_id):
                    self._catch_up(partition, broker_id)
        self._complete_reassignment(partition)
        self._changed(f'{partition.tp}: reassigning replicas to {list(target)}', topics=(partition.topic,))

    def _complete_reassignment(self, partition: Partition) -> None:
        reassignment = partition.reassignment
        if reassignment is None or not set(reassignment.target) <= set(partition.isr):
            return
        partition.reassignment = None
        partition.replicas = list(reassignment.target)
        partition.isr = [b for b in partition.isr if b in reassignment.target]
        for removed in reassignment.removing:
            partition.logs.pop(removed).notify()
        if partition.leader not in reassignment.target:
            self._elect(partition, partition.isr[0])

    def pause_replication(self, tp: TopicPartition, broker_id: int) -> None:
        partition = self.require_partition(tp)
        if broker_id not in partition.replicas or broker_id == partition.leader:
            raise ClusterError(constants.INVALID_REPLICA_ASSIGNMENT,
                               f'broker {broker_id} is not a follower of {tp}')
        partition.paused = partition.paused | {broker_id}
        self._leave_isr(partition, broker_id)

    def resume_replication(self, tp: TopicPartition, broker_id: int) -> None:
        partition = self.require_partition(tp)
        partition.paused = partition.paused - {broker_id}
        if partition.leader not in (NO_LEADER, broker_id) and self._replicating(partition, broker_id):
            self._catch_up(partition, broker_id)
            self._complete_reassignment(partition)
            self._changed(f'{partition.tp}: ISR {partition.isr}', topics=(partition.topic,))

    def _leave_isr(self, partition: Partition, broker_id: int) -> None:
        if broker_id in partition.isr and broker_id != partition.leader:
            partition.isr = [b for b in partition.isr if b != broker_id]
            self._changed(f'{partition.tp}: ISR {partition.isr}', topics=(partition.topic,))

    def _all_partitions(self) -> list[Partition]:
        return [p for topic in self.topics.values() for p in topic.partitions]

    def broker_stopped(self, broker_id: int) -> None:
        """Controller reaction to a broker going away: leadership moves to a copying ISR member."""
        self.running.discard(broker_id)
        self.delayed.pop(broker_id, None)
        for partition in self._all_partitions():
            if partition.leader == broker_id:
                candidates = [b for b in partition.isr if b != broker_id and self._replicating(partition, b)]
                if candidates:
                    self._elect(partition, candidates[0])
                else:
                    self._elect(partition, NO_LEADER)
            else:
                self._leave_isr(partition, broker_id)
        self._changed(f'broker {broker_id} stopped')

    def broker_started(self, broker_id: int) -> None:
        self.running.add(broker_id)
        self._changed(f'broker {broker_id} started')
        self._rejoin(broker_id)

    def _rejoin(self, broker_id: int) -> None:
        for partition in self._all_partitions():
            if broker_id not in partition.replicas:
                continue
            if partition.leader == NO_LEADER:
                if broker_id in partition.isr:
                    self._elect(partition, broker_id)
            elif partition.leader != broker_id and self._replicating(partition, broker_id):
                self._catch_up(partition, broker_id)
            self._complete_reassignment(partition)
        self._changed(f'broker {broker_id} rejoined')

    def delay_metadata(self, broker_id: int) -> None:
        if broker_id not in self.running:
            raise ClusterError(constants.BROKER_NOT_AVAILABLE, f'broker {broker_id} is stopped')
        if broker_id in self.delayed:
            return
        self.delayed[broker_id] = self.image()
        for partition in self._all_partitions():
            self._leave_isr(partition, broker_id)

    def release_metadata(self, broker_id: int) -> None:
        image = self.delayed.pop(broker_id, None)
        if image is None:
            return
        for topic in image.topics.values():
            for view in topic.partitions:
                if view.partition.deleted:
                    view.partition.notify()
        self._rejoin(broker_id)  # a metadata change: wakes waiters, which now see the current image


def new_log(topic: Topic, broker_id: int, log_start_offset: int = 0) -> PartitionLog:
    """An empty replica log of ``topic`` on broker ``broker_id``, rolling segments at its current ``segment.bytes``
    / ``segment.ms`` there."""
    return PartitionLog(log_start_offset, lambda: (int(topic.config('segment.bytes', broker_id)),
                                                   int(topic.config('segment.ms', broker_id))))


def _topic_view(topic: Topic) -> TopicView:
    views = tuple(PartitionView(p, p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr), p.partition_epoch)
                  for p in topic.partitions)
    return TopicView(topic.name, topic.topic_id, views, topic)


def truncate_by_epoch(log: PartitionLog, leader_log: PartitionLog) -> None:
    """Follower truncation by OffsetForLeaderEpoch (Kafka's getOffsetTruncationState loop): while the
    follower's epoch for the leader's answer is an older one, truncate to its end and ask again; then
    truncate to the divergence point (the rule the mirror applies to its source too)."""
    while True:
        leader_epoch, leader_end = leader_log.end_offset_for_epoch(log.latest_epoch())
        if leader_end == constants.UNKNOWN_OFFSET:
            log.truncate_to(log.high_watermark)
            return
        follower_epoch, follower_end = log.end_offset_for_epoch(leader_epoch)
        if follower_end != constants.UNKNOWN_OFFSET and follower_epoch != leader_epoch:
            log.truncate_to(min(follower_end, log.log_end_offset))
            continue
        log.truncate_to(log.epoch_cache.divergence_point(log.log_end_offset, leader_epoch, leader_end))
        return
