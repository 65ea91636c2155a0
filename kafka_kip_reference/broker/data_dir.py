"""The reference cluster's data directory: what a restart keeps (``ReferenceCluster(data_dir=...)``,
``kafka-kip broker --data-dir``).

A cluster with a data directory writes it when it closes and reads it back when it is created, so a cluster
stopped and started again (in a new process) keeps what Apache Kafka keeps across a restart:

- topics with their ids and configs; each partition's replicas, ISR, partition and leader epochs; each replica's
  log: its records (batches as stored), log start offset, high watermark and leader epoch cache (idempotent
  producer state and aborted transactions are rebuilt from the batches, as Kafka rebuilds them from its logs);
- the committed offsets of every group (members rejoin after a restart; a group comes back empty, and a KIP-848
  member's first heartbeat turns it into a consumer group with its offsets), transactional offsets of open
  transactions included;
- every transactional id's producer id, epoch, state and open transaction (an open one times out as before; one
  that was writing its markers writes the rest once the cluster runs);
- SCRAM credentials as stored (salt, iterations, keys; those AlterUserScramCredentials changed included), the SASL
  users' passwords (PLAIN; the constructor's win for a name given again), client quotas, ACLs, dynamic broker
  configs, the next producer id, the cluster id and the metadata log (consistency tokens keep growing across the
  restart).

Layout (``format`` 1)::

    <data_dir>/cluster.json                               everything above but the records
    <data_dir>/logs/<topic id>-<partition>/<broker id>.log  one replica's batches back to back, as Kafka's segments

``cluster.json`` holds the constructor's SASL users' passwords as the cluster holds them (in clear text, beside
the salted SCRAM credentials Kafka keeps), so every file is readable by its owner only. It is written only by a clean close (Ctrl-C / SIGTERM for ``kafka-kip broker``): a process killed with SIGKILL
keeps what the previous close wrote, unlike Kafka, which writes as it goes. Segments are cut again at load
(:mod:`kafka_kip_reference.broker.log`); group memberships, connections and ``control()`` hooks are not kept.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import os
import struct
import uuid
from pathlib import Path
from typing import Any

from kafka.structs import TopicPartition

from kafka_kip_reference.broker.acl import AclBinding
from kafka_kip_reference.broker.batches import parse_header
from kafka_kip_reference.broker.client_quotas import Alteration
from kafka_kip_reference.broker.committed_offsets import CommittedOffset
from kafka_kip_reference.broker.groups import Group, GroupCoordinator
from kafka_kip_reference.broker.model import NO_LEADER, Partition, Topic
from kafka_kip_reference.broker.sasl_mechanisms import ScramCredential
from kafka_kip_reference.broker.state import ClusterState, new_log
from kafka_kip_reference.broker.transactions import Transaction, TransactionCoordinator, TxnState

FORMAT = 1
_CLUSTER_FILE = 'cluster.json'
_BATCH_LENGTH = struct.Struct('>qi')  # base offset, batch length (bytes after this field)


class DataDirError(ValueError):
    """A data directory this cluster cannot use (another cluster's, another format, unreadable)."""


def save(path: str | os.PathLike[str], state: ClusterState, groups: GroupCoordinator,
         transactions: TransactionCoordinator) -> None:
    """Write the cluster's data directory (on the cluster's loop, once its brokers have stopped)."""
    root = Path(path)
    (root / 'logs').mkdir(parents=True, exist_ok=True)
    topics = []
    for topic in state.topics.values():
        partitions = []
        for partition in topic.partitions:
            replicas = {}
            for broker_id, log in partition.logs.items():
                log_dir = root / 'logs' / f'{topic.topic_id}-{partition.index}'
                log_dir.mkdir(exist_ok=True)
                _write(log_dir / f'{broker_id}.log', b''.join(batch for batch, _ in log.batches_from(0)))
                replicas[str(broker_id)] = {'log_start_offset': log.log_start_offset,
                                            'log_end_offset': log.log_end_offset,
                                            'high_watermark': log.high_watermark,
                                            'epochs': [list(entry) for entry in log.epochs]}
            partitions.append({'replicas': partition.replicas, 'isr': partition.isr, 'leader': partition.leader,
                               'leader_epoch': partition.leader_epoch, 'partition_epoch': partition.partition_epoch,
                               'prior_epochs': {str(k): v for k, v in partition.prior_epochs.items()},
                               'logs': replicas})
        topics.append({'name': topic.name, 'id': str(topic.topic_id), 'configs': topic.configs,
                       'partitions': partitions})
    snapshot = {
        'format': FORMAT,
        'cluster_id': state.cluster_id,
        'brokers': len(state.broker_ids),
        'next_producer_id': state.allocate_producer_id(),  # unused: the next start allocates from it
        'max_partition_epoch': state.max_partition_epoch,
        'metadata_log': [record.change for record in state.metadata_log.records()],
        'users': state.users,
        'scram_credentials': [[user, mechanism, *_scram_fields(credential)]
                              for user in state.scram_credentials.users()
                              for mechanism, credential in state.scram_credentials.of(user).items()],
        'client_quotas': [[dict(entity), values] for entity, values in state.client_quotas.describe([], strict=False)],
        'acls': [dataclasses.asdict(acl) for acl in state.authorizer.acls()] if state.authorizer else [],
        'dynamic_broker_configs': {'': state.config.dynamic(None),
                                   **{str(b): state.config.dynamic(b) for b in state.broker_ids}},
        'topics': topics,
        'groups': {group_id: {'offsets': _offsets({(topic, partition): committed
                                                   for topic, partitions in group.offsets.all().items()
                                                   for partition, committed in partitions.items()}),
                              'pending': {str(pid): _offsets(held) for pid, held in group.offsets.pending().items()}}
                   for group_id, group in groups.groups.items() if group.offsets},
        'transactions': [_transaction(txn) for txn in transactions.transactions.values()],
    }
    _write(root / _CLUSTER_FILE, json.dumps(snapshot, indent=1).encode())


def load(path: str | os.PathLike[str], state: ClusterState, groups: GroupCoordinator,
         transactions: TransactionCoordinator, cluster_id_given: bool) -> bool:
    """Read the cluster's data directory into a cluster not yet started; False if it holds none yet."""
    file = Path(path) / _CLUSTER_FILE
    if not file.exists():
        return False
    try:
        snapshot = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise DataDirError(f'cannot read {file}: {exc}') from None
    if snapshot.get('format') != FORMAT:
        raise DataDirError(f'{file} has format {snapshot.get("format")!r}; this version reads format {FORMAT}')
    if cluster_id_given and snapshot['cluster_id'] != state.cluster_id:
        raise DataDirError(f'{path} belongs to cluster {snapshot["cluster_id"]!r}, not {state.cluster_id!r}')
    if snapshot['brokers'] != len(state.broker_ids):
        raise DataDirError(f'{path} holds a cluster of {snapshot["brokers"]} brokers, not {len(state.broker_ids)}')
    state.cluster_id = snapshot['cluster_id']
    state.users = {**snapshot['users'], **state.users}
    for user, mechanism, salt, iterations, stored_key, server_key in snapshot['scram_credentials']:
        state.scram_credentials.restore(user, mechanism, ScramCredential(
            base64.b64decode(salt), iterations, base64.b64decode(stored_key), base64.b64decode(server_key)))
    state.client_quotas.alter([Alteration(entity, list(values.items())) for entity, values in snapshot['client_quotas']],
                              validate_only=False)
    for name, values in snapshot['dynamic_broker_configs'].items():
        state.config.set_dynamic(int(name) if name else None, values)
    if state.authorizer is not None:
        for acl in snapshot['acls']:
            state.authorizer.create(AclBinding(**acl))
    for change in snapshot['metadata_log']:
        state.metadata_log.append(change)
    state.max_partition_epoch = snapshot['max_partition_epoch']
    state.allocate_producer_ids_from(snapshot['next_producer_id'])
    for saved in snapshot['topics']:
        state.restore_topic(_topic(Path(path), saved, state))
    for group_id, saved in snapshot['groups'].items():
        group = Group(group_id, state, groups.initial_rebalance_delay_ms, groups.offset_metadata_max_bytes)
        group.offsets.restore(_committed(saved['offsets']),
                              {int(pid): _committed(held) for pid, held in saved['pending'].items()})
        groups.groups[group_id] = group
    for saved in snapshot['transactions']:
        txn = Transaction(**{**saved, 'state': TxnState(saved['state']),
                             **{key: {TopicPartition(*tp) for tp in saved[key]}
                                for key in ('partitions', 'pending_markers')},
                             'groups': set(saved['groups'])})
        transactions.transactions[txn.transactional_id] = txn
    return True


def _write(file: Path, data: bytes) -> None:
    """Replace ``file`` whole (a crash mid-write leaves the previous version), readable by its owner only."""
    partial = file.with_name(file.name + '.partial')
    with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 'wb') as out:
        out.write(data)
    os.replace(partial, file)


def _scram_fields(credential: ScramCredential) -> list[Any]:
    return [base64.b64encode(credential.salt).decode(), credential.iterations,
            base64.b64encode(credential.stored_key).decode(), base64.b64encode(credential.server_key).decode()]


def _offsets(offsets: dict[tuple[str, int], CommittedOffset]) -> list[list[Any]]:
    return [[topic, partition, dataclasses.asdict(committed)] for (topic, partition), committed in offsets.items()]


def _committed(saved: list[list[Any]]) -> dict[tuple[str, int], CommittedOffset]:
    return {(topic, partition): CommittedOffset(**fields) for topic, partition, fields in saved}


def _transaction(txn: Transaction) -> dict[str, Any]:
    fields = dataclasses.asdict(txn)
    fields['state'] = txn.state.value
    for key in ('partitions', 'pending_markers'):
        fields[key] = sorted([tp.topic, tp.partition] for tp in getattr(txn, key))
    fields['groups'] = sorted(txn.groups)
    return fields


def _topic(root: Path, saved: dict[str, Any], state: ClusterState) -> Topic:
    topic = Topic(saved['name'], uuid.UUID(saved['id']), [], dict(saved['configs']), state.config.shared_topic_defaults)
    for index, fields in enumerate(saved['partitions']):
        partition = Partition(topic.name, topic.topic_id, index, list(fields['replicas']), fields['partition_epoch'],
                              leader=NO_LEADER, leader_epoch=fields['leader_epoch'], isr=list(fields['isr']),
                              prior_epochs={int(k): v for k, v in fields['prior_epochs'].items()})
        for broker_id, replica in fields['logs'].items():
            log = new_log(topic, int(broker_id), replica['log_start_offset'])
            data = (root / 'logs' / f'{topic.topic_id}-{index}' / f'{broker_id}.log').read_bytes()
            position = 0
            while position < len(data):
                end = position + _BATCH_LENGTH.size + _BATCH_LENGTH.unpack_from(data, position)[1]
                batch = data[position:end]
                log.append(batch, parse_header(batch))
                position = end
            log.log_end_offset, log.high_watermark = replica['log_end_offset'], replica['high_watermark']
            log.epoch_cache.clear()
            for epoch, start_offset in replica['epochs']:
                log.assign_epoch(epoch, start_offset)
            partition.logs[int(broker_id)] = log
        if fields['leader'] != NO_LEADER:  # it led when the cluster closed: it leads again once it starts
            partition.isr = [fields['leader'], *(b for b in partition.isr if b != fields['leader'])]
        topic.partitions.append(partition)
    return topic
