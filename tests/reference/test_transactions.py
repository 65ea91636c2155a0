"""Transactions on the reference cluster as Kafka runs them: transactional ids and epochs, markers, the last
stable offset, read_committed fetches, transactional offset commits, fencing and timeouts.

Stock kafka-python and confluent-kafka clients drive the round trips; the wire tests pin Kafka's answers.
"""
from __future__ import annotations

import time
import uuid
from typing import Any

import kafka.errors as errors
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.protocol.api_key import ApiKey
from kafka.record import MemoryRecords

from kafka_kip.protocol.constants import CLUSTER_AUTHORIZATION_FAILED, NONE, UNKNOWN_TOPIC_ID
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import fetch_request, list_offsets_request, produce_request
from kafka_kip.state_machine import InvalidTransition
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.kafka_features import ALL_FAILED
from kafka_kip_reference.broker.transactions import Transaction, TxnState
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.support.clusters import cluster_with_topic_t
from tests.support.consuming import confluent_messages

TP = TopicPartition('t', 0)
INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN = ApiKey.InitProducerId, ApiKey.AddPartitionsToTxn, ApiKey.EndTxn
OFFSET_FETCH, FIND_COORDINATOR = ApiKey.OffsetFetch, ApiKey.FindCoordinator
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
CONCURRENT_TRANSACTIONS = errors.ConcurrentTransactionsError.errno
INVALID_PRODUCER_EPOCH = errors.InvalidProducerEpochError.errno
INVALID_PRODUCER_ID_MAPPING = errors.InvalidProducerIdMappingError.errno
INVALID_TXN_STATE = errors.InvalidTxnStateError.errno
PRODUCER_FENCED = errors.ProducerFencedError.errno
INVALID_UPDATE_VERSION = errors.InvalidUpdateVersionError.errno
UPDATE_FEATURES = ApiKey.UpdateFeatures
UPGRADE, SAFE_DOWNGRADE = 1, 2


cluster = cluster_with_topic_t(brokers=3, partitions=2, replication_factor=3)


def consumed(cluster: ReferenceCluster, isolation_level: str, end: int, tp: TopicPartition = TP) -> list:
    """``(offset, value)`` a stock consumer at ``isolation_level`` reads from offset 0 until its position is ``end``."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, isolation_level=isolation_level,
                             enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        records = []

        def at_end() -> bool:
            records.extend((r.offset, r.value) for r in consumer.poll(timeout_ms=100).get(tp, []))
            return consumer.position(tp) >= end
        wait_until(at_end, f'a {isolation_level} consumer at offset {end}')
        return records
    finally:
        consumer.close()


def transactional_producer(cluster: ReferenceCluster, transactional_id: str = 'tx', **configs) -> KafkaProducer:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, transactional_id=transactional_id, **configs)
    producer.init_transactions()
    return producer


def coordinator(cluster: ReferenceCluster, transactional_id: str) -> int:
    with WireClient(cluster.brokers()[0]) as wire:
        return wire.request(REQUESTS[FIND_COORDINATOR](version=3, key=transactional_id, key_type=1)).node_id


class Txn:
    """A transactional id spoken to on the wire, at its coordinator."""

    def __init__(self, cluster: ReferenceCluster, transactional_id: str, timeout_ms: int = 60_000) -> None:
        self.id = transactional_id
        self.wire = WireClient(cluster.brokers()[coordinator(cluster, transactional_id)])
        answer = self.init(timeout_ms)
        assert answer.error_code == NONE
        self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch

    def init(self, timeout_ms: int = 60_000, version: int = 4):
        return self.wire.request(REQUESTS[INIT_PRODUCER_ID](
            version=version, transactional_id=self.id, transaction_timeout_ms=timeout_ms, producer_id=-1,
            producer_epoch=-1))

    def add(self, partitions: dict[str, list[int]], version: int = 3, epoch: int | None = None) -> dict:
        topic = REQUESTS[ADD_PARTITIONS].AddPartitionsToTxnTopic
        answer = self.wire.request(REQUESTS[ADD_PARTITIONS](
            version=version, v3_and_below_transactional_id=self.id, v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
            v3_and_below_topics=[topic(name=t, partitions=p) for t, p in partitions.items()]))
        return {(t.name, p.partition_index): p.partition_error_code
                for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}

    def end(self, commit: bool, version: int = 3) -> int:
        return self.end_answer(commit, version)[0]

    def end_answer(self, commit: bool, version: int = 5, epoch: int | None = None) -> tuple[int, int, int]:
        """EndTxn's (error, producer id, producer epoch); v5 names the bumped epoch (KIP-890 part 2)."""
        answer = self.wire.request(REQUESTS[END_TXN](
            version=version, transactional_id=self.id, producer_id=self.producer_id,
            producer_epoch=self.epoch if epoch is None else epoch, committed=commit))
        return answer.error_code, answer.producer_id, answer.producer_epoch

    def produce(self, cluster: ReferenceCluster, tp: TopicPartition, values: list[bytes], sequence: int = 0,
                version: int = 9, epoch: int | None = None) -> int:
        batch = build_batch([(None, v) for v in values], producer_id=self.producer_id,
                            producer_epoch=self.epoch if epoch is None else epoch, base_sequence=sequence,
                            transactional=True)
        with WireClient(cluster.brokers()[cluster.leader(tp)]) as wire:
            return wire.request(produce_request(tp.topic, tp.partition, batch, transactional_id=self.id,
                                                version=version)).responses[0].partition_responses[0].error_code

    def close(self) -> None:
        self.wire.close()


# -- round trips with stock clients -------------------------------------------------------------------


def test_read_committed_consumers_see_committed_records_only(cluster):
    producer = transactional_producer(cluster)
    try:
        producer.begin_transaction()
        for i in range(3):
            producer.send('t', b'c%d' % i, partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(2):
            producer.send('t', b'a%d' % i, partition=0)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send('t', b'c3', partition=0)
        producer.commit_transaction()
    finally:
        producer.close()

    # each transaction ends with its marker: commit at 3, abort at 6, commit at 8
    assert (cluster.high_watermark(TP), cluster.last_stable_offset(TP)) == (9, 9)
    assert consumed(cluster, 'read_committed', 9) == [(0, b'c0'), (1, b'c1'), (2, b'c2'), (7, b'c3')]
    assert consumed(cluster, 'read_uncommitted', 9) == [(0, b'c0'), (1, b'c1'), (2, b'c2'), (4, b'a0'),
                                                        (5, b'a1'), (7, b'c3')]
    assert [r.offset for r in cluster.records(TP, broker_id=cluster.replicas(TP)[2])] == [0, 1, 2, 4, 5, 7]


def test_an_open_transaction_holds_the_last_stable_offset(cluster):
    plain = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    plain.send('t', b'before', partition=0).get(10)
    producer = transactional_producer(cluster)
    try:
        producer.begin_transaction()
        producer.send('t', b'open-0', partition=0)
        producer.send('t', b'open-1', partition=0)
        producer.flush()
        plain.send('t', b'after', partition=0).get(10)  # at 3, behind the open transaction
        with WireClient(cluster.brokers()[cluster.leader(TP)]) as wire:
            def latest(isolation_level: int) -> int:
                request = list_offsets_request('t', 0, -1)
                request.isolation_level = isolation_level
                return wire.request(request).topics[0].partitions[0].offset

            def fetch(isolation_level: int):
                request = fetch_request('t', 0, 0)
                request.isolation_level = isolation_level
                return wire.request(request).responses[0].partitions[0]

            assert (latest(READ_UNCOMMITTED), latest(READ_COMMITTED)) == (4, 1)
            committed_view = fetch(READ_COMMITTED)
            assert (committed_view.high_watermark, committed_view.last_stable_offset) == (4, 1)
            assert [r.offset for r in _records(committed_view.records)] == [0]
            producer.abort_transaction()  # the abort marker at 4
            committed_view = fetch(READ_COMMITTED)
            assert (committed_view.high_watermark, committed_view.last_stable_offset) == (5, 5)
            assert [(a.producer_id, a.first_offset) for a in committed_view.aborted_transactions] == [
                (producer._transaction_manager.producer_id_and_epoch.producer_id, 1)]
            assert fetch(READ_UNCOMMITTED).aborted_transactions is None
    finally:
        producer.close()
        plain.close()
    assert consumed(cluster, 'read_committed', 5) == [(0, b'before'), (3, b'after')]


def _records(data: bytes) -> list:
    records, batches = MemoryRecords(data), []
    while records.has_next():
        batches.extend(records.next_batch())
    return batches


def test_a_new_producer_with_the_same_transactional_id_fences_the_old_one(cluster):
    old = transactional_producer(cluster)
    old.begin_transaction()
    old.send('t', b'zombie', partition=0)
    old.flush()
    new = transactional_producer(cluster)  # aborts the old producer's transaction
    try:
        with pytest.raises(errors.ProducerFencedError):
            old.commit_transaction()
        new.begin_transaction()
        new.send('t', b'new', partition=0)
        new.commit_transaction()
        old_epoch = old._transaction_manager.producer_id_and_epoch
        new_epoch = new._transaction_manager.producer_id_and_epoch
        assert (new_epoch.producer_id, new_epoch.epoch) == (old_epoch.producer_id, old_epoch.epoch + 2)
    finally:
        new.close()
        old.close(timeout=1)
    # zombie at 0, abort marker at 1, new at 2, commit marker at 3
    assert consumed(cluster, 'read_committed', 4) == [(2, b'new')]


def test_a_transaction_open_longer_than_its_timeout_is_aborted_and_its_producer_fenced(reference_cluster_factory):
    cluster = reference_cluster_factory(
        1, broker_config={'transaction.abort.timed.out.transaction.cleanup.interval.ms': 50})
    cluster.create_topic('t', 1, 1)
    producer = transactional_producer(cluster, transaction_timeout_ms=300)
    try:
        producer.begin_transaction()
        producer.send('t', b'slow', partition=0)
        producer.flush()
        started = time.monotonic()
        wait_until(lambda: cluster.last_stable_offset(TP) == cluster.high_watermark(TP) == 2, 'the abort marker')
        assert time.monotonic() - started >= 0.25  # not before the timeout (less the producer's flush time)
        with pytest.raises((errors.ProducerFencedError, errors.InvalidProducerEpochError)):
            producer.commit_transaction()
    finally:
        producer.close(timeout=1)
    assert consumed(cluster, 'read_committed', 2) == []


def test_consume_transform_produce_commits_the_groups_offsets_with_the_transaction(cluster):
    plain = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    for i in range(4):
        plain.send('t', b'in-%d' % i, partition=1).get(10)
    plain.close()
    source = TopicPartition('t', 1)
    producer = transactional_producer(cluster)
    try:
        producer.begin_transaction()
        producer.send('t', b'out', partition=0)
        producer.send_offsets_to_transaction({source: OffsetAndMetadata(2, 'half', -1)}, 'app')
        assert _committed(cluster, 'app', source, require_stable=True) == (errors.UnstableOffsetCommitError.errno, -1)
        assert _committed(cluster, 'app', source, require_stable=False) == (NONE, -1)
        producer.abort_transaction()
        assert _committed(cluster, 'app', source, require_stable=True) == (NONE, -1)
        producer.begin_transaction()
        producer.send('t', b'out', partition=0)
        producer.send_offsets_to_transaction({source: OffsetAndMetadata(4, 'all', -1)}, 'app')
        producer.commit_transaction()
    finally:
        producer.close()
    assert _committed(cluster, 'app', source, require_stable=True) == (NONE, 4)


def _committed(cluster: ReferenceCluster, group: str, tp: TopicPartition, require_stable: bool) -> tuple[int, int]:
    request_class = REQUESTS[OFFSET_FETCH]
    with WireClient(cluster.brokers()[coordinator(cluster, group)]) as wire:
        answer = wire.request(request_class(version=7, group_id=group, require_stable=require_stable, topics=[
            request_class.OffsetFetchRequestTopic(name=tp.topic, partition_indexes=[tp.partition])]))
    partition = answer.topics[0].partitions[0]
    return partition.error_code, partition.committed_offset


def test_confluent_kafka_transactional_round_trip_unmodified(cluster):
    confluent = pytest.importorskip('confluent_kafka')
    producer = confluent.Producer({'bootstrap.servers': cluster.bootstrap_servers, 'transactional.id': 'ck'})
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(3):
        producer.produce('t', b'c%d' % i, partition=0)
    producer.commit_transaction(20)
    producer.begin_transaction()
    producer.produce('t', b'aborted', partition=0)
    producer.flush(20)
    producer.abort_transaction(20)
    producer.begin_transaction()
    producer.produce('t', b'last', partition=0)
    producer.commit_transaction(20)
    consumer = confluent.Consumer({'bootstrap.servers': cluster.bootstrap_servers, 'group.id': 'ck',
                                   'isolation.level': 'read_committed', 'enable.auto.commit': False})
    try:
        consumer.assign([confluent.TopicPartition('t', 0, 0)])
        got = [(m.offset(), m.value()) for m in confluent_messages(consumer, 4, 'the committed records')]
    finally:
        consumer.close()
    assert got == [(0, b'c0'), (1, b'c1'), (2, b'c2'), (6, b'last')]


# -- Kafka's answers on the wire ----------------------------------------------------------------------


def test_init_producer_id_answers(cluster):
    txn = Txn(cluster, 'wire')
    try:
        assert txn.epoch == 0
        assert txn.init(timeout_ms=900_001).error_code == errors.InvalidTransactionTimeoutError.errno
        again = txn.init()
        assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, txn.producer_id, 1)
        elsewhere = next(b for b in cluster.brokers() if b.node_id != coordinator(cluster, 'wire'))
        with WireClient(elsewhere) as wire:
            assert wire.request(REQUESTS[INIT_PRODUCER_ID](
                version=4, transactional_id='wire', transaction_timeout_ms=1000, producer_id=-1,
                producer_epoch=-1)).error_code == errors.NotCoordinatorError.errno
        fenced = txn.wire.request(REQUESTS[INIT_PRODUCER_ID](
            version=4, transactional_id='wire', transaction_timeout_ms=1000, producer_id=txn.producer_id + 1,
            producer_epoch=0))
        assert fenced.error_code == PRODUCER_FENCED
    finally:
        txn.close()


def test_add_partitions_and_end_txn_answers(cluster):
    txn = Txn(cluster, 'wire')
    try:
        assert txn.end(commit=True) == INVALID_TXN_STATE  # nothing was added: no transaction is open
        assert txn.add({'t': [0, 5]}) == {('t', 0): errors.OperationNotAttemptedError.errno,
                                          ('t', 5): errors.UnknownTopicOrPartitionError.errno}
        assert txn.add({'t': [0]}) == {('t', 0): NONE}
        assert txn.add({'t': [1]}, epoch=txn.epoch + 1) == {('t', 1): PRODUCER_FENCED}
        assert txn.add({'t': [1]}, version=1, epoch=txn.epoch + 1) == {('t', 1): INVALID_PRODUCER_EPOCH}
        assert txn.produce(cluster, TopicPartition('t', 1), [b'not-added']) == INVALID_TXN_STATE
        assert txn.produce(cluster, TP, [b'added']) == NONE
        assert txn.end(commit=True) == NONE
        assert txn.end(commit=True) == NONE  # a retry of the decision
        assert txn.end(commit=False) == INVALID_TXN_STATE
        txn.producer_id += 1
        assert txn.end(commit=True) == INVALID_PRODUCER_ID_MAPPING
    finally:
        txn.close()
    assert consumed(cluster, 'read_committed', 2) == [(0, b'added')]


def test_markers_wait_for_a_leader_and_the_producer_is_told_to_wait(reference_cluster_factory):
    cluster = reference_cluster_factory(2)
    cluster.create_topic('t', 2, 1)  # partition 0 on broker 0, partition 1 on broker 1
    tp = TopicPartition('t', 1 - coordinator(cluster, 'late'))  # on the broker that is not the coordinator
    txn = Txn(cluster, 'late')
    try:
        assert txn.add({'t': [tp.partition]}) == {tuple(tp): NONE}
        assert txn.produce(cluster, tp, [b'v']) == NONE
        cluster.stop_broker(cluster.replicas(tp)[0])
        assert txn.end(commit=True) == NONE  # decided; the marker waits for the partition's leader
        assert txn.end(commit=True) == CONCURRENT_TRANSACTIONS
        assert txn.init().error_code == CONCURRENT_TRANSACTIONS
        cluster.start_broker(cluster.replicas(tp)[0])
        wait_until(lambda: txn.end(commit=True) == NONE, 'the commit to complete')
    finally:
        txn.close()
    assert (cluster.high_watermark(tp), cluster.last_stable_offset(tp)) == (2, 2)


def test_the_transaction_state_machine_refuses_invalid_transitions():
    txn = Transaction('x', producer_id=1, producer_epoch=0, timeout_ms=1000)
    with pytest.raises(InvalidTransition) as raised:
        txn.transition(TxnState.PREPARE_COMMIT)
    assert str(raised.value) == "transaction 'x': no transition from Empty to PrepareCommit"
    assert (raised.value.current, raised.value.wanted) == (TxnState.EMPTY, TxnState.PREPARE_COMMIT)
    txn.transition(TxnState.ONGOING)
    txn.transition(TxnState.PREPARE_ABORT)
    with pytest.raises(InvalidTransition, match='from PrepareAbort to CompleteCommit'):
        txn.transition(TxnState.COMPLETE_COMMIT)
    txn.transition(TxnState.COMPLETE_ABORT)
    assert txn.state is TxnState.COMPLETE_ABORT


# -- transaction.version 2 (KIP-890 part 2) -----------------------------------------------------------


def update_features(cluster: ReferenceCluster, level: int, upgrade_type: int, version: int = 1,
                    validate_only: bool = False, feature: str = 'transaction.version') -> Any:
    update = REQUESTS[UPDATE_FEATURES].FeatureUpdateKey
    with WireClient(cluster.brokers()[0]) as wire:
        return wire.request(REQUESTS[UPDATE_FEATURES](
            version=version, timeout_ms=1000, validate_only=validate_only, feature_updates=[update(
                feature=feature, max_version_level=level, allow_downgrade=upgrade_type != 1,
                upgrade_type=upgrade_type)]))


def test_end_txn_v5_bumps_the_epoch_of_every_commit_and_abort(cluster):
    """Produce v12 adds its partition (no AddPartitionsToTxn); EndTxn v5 ends under the next epoch, names it, and
    answers a retry with the epoch before it as Kafka's TV2 table does; the markers carry the new epoch. Every answer
    is Apache Kafka 4.4's to the same requests (once its asynchronous markers are written)."""
    txn = Txn(cluster, 'v2')
    try:
        assert txn.produce(cluster, TP, [b'first'], version=12) == NONE
        assert txn.end_answer(commit=True) == (NONE, txn.producer_id, 1)
        assert cluster._log(TP, None).producer_epoch(txn.producer_id) == 1  # the commit marker's epoch
        assert txn.end_answer(commit=True, epoch=0) == (NONE, txn.producer_id, 1)  # a retry
        assert txn.end_answer(commit=False, epoch=0)[0] == INVALID_TXN_STATE  # a retry of the other decision
        txn.epoch = 1
        assert txn.end_answer(commit=True)[0] == INVALID_TXN_STATE  # nothing open to commit
        assert txn.end_answer(commit=False) == (NONE, txn.producer_id, 2)  # aborting nothing bumps the epoch
        assert txn.produce(cluster, TP, [b'zombie'], version=12) == INVALID_PRODUCER_EPOCH
        txn.epoch = 2
        assert txn.produce(cluster, TP, [b'aborted'], version=12) == NONE
        assert txn.end_answer(commit=False) == (NONE, txn.producer_id, 3)
        assert txn.end_answer(commit=False, epoch=1)[0] == PRODUCER_FENCED  # neither current nor the one before
        assert txn.end_answer(commit=True, version=4, epoch=3) == (INVALID_TXN_STATE, -1, -1)  # v4: no id, epoch
    finally:
        txn.close()
    assert consumed(cluster, 'read_committed', 4) == [(0, b'first')]  # first, commit marker, aborted, marker
    assert cluster.transactions.transactions['v2'].state is TxnState.COMPLETE_ABORT


def test_a_v2_transaction_past_its_timeout_is_aborted_under_the_next_epoch(reference_cluster_factory):
    """As Apache Kafka 4.4 answers it: the coordinator aborts under the next epoch; the producer's EndTxn v5 with the
    epoch before is a retry: an abort is answered NONE with the new epoch, a commit INVALID_TXN_STATE."""
    cluster = reference_cluster_factory(
        1, broker_config={'transaction.abort.timed.out.transaction.cleanup.interval.ms': 50})
    cluster.create_topic('t', 1, 1)
    txn = Txn(cluster, 'slow', timeout_ms=300)
    try:
        assert txn.produce(cluster, TP, [b'slow'], version=12) == NONE
        wait_until(lambda: cluster.last_stable_offset(TP) == cluster.high_watermark(TP) == 2, 'the abort marker')
        assert cluster._log(TP, None).producer_epoch(txn.producer_id) == 1  # the marker's epoch
        assert txn.end_answer(commit=True)[0] == INVALID_TXN_STATE
        assert txn.end_answer(commit=False) == (NONE, txn.producer_id, 1)
    finally:
        txn.close()
    assert consumed(cluster, 'read_committed', 2) == []


def test_produce_v12_adds_its_partition_only_at_transaction_version_2(cluster):
    """Below v12, or with transaction.version finalized at 1, a partition must have been added first."""
    txn = Txn(cluster, 'old')
    try:
        assert txn.produce(cluster, TP, [b'v10'], version=10) == INVALID_TXN_STATE
        assert txn.produce(cluster, TP, [b'v11'], version=11) == errors.TransactionAbortableError.errno  # KIP-890 part 1
        assert update_features(cluster, 1, SAFE_DOWNGRADE).error_code == NONE
        assert txn.produce(cluster, TP, [b'v12'], version=12) == errors.TransactionAbortableError.errno
        assert txn.add({'t': [0]}) == {('t', 0): NONE}
        assert txn.produce(cluster, TP, [b'added'], version=12) == NONE
        assert txn.end_answer(commit=True, version=4) == (NONE, -1, -1)
        assert cluster.transactions.transactions['old'].producer_epoch == 0  # v4: no bump
    finally:
        txn.close()
    assert consumed(cluster, 'read_committed', 2) == [(0, b'added')]


@pytest.mark.parametrize('version', [5, 6])
def test_txn_offset_commit_v5_adds_the_group_to_the_transaction(cluster, version):
    """No AddOffsetsToTxn: TxnOffsetCommit v5+ joins the group to the transaction, its offsets commit with it;
    v6 names topics by id (UNKNOWN_TOPIC_ID for an id no topic has)."""
    txn = Txn(cluster, 'offsets')
    commit = REQUESTS[ApiKey.TxnOffsetCommit]
    unknown = uuid.UUID(int=1)
    topics = [commit.TxnOffsetCommitRequestTopic(name='t', topic_id=cluster.topic_id('t'), partitions=[
        commit.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata='')])]
    if version >= 6:
        topics.append(commit.TxnOffsetCommitRequestTopic(topic_id=unknown, partitions=[
            commit.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata='')]))
    try:
        with WireClient(cluster.brokers()[cluster.state.coordinator_for('g')]) as wire:
            answer = wire.request(commit(
                version=version, transactional_id='offsets', group_id='g', producer_id=txn.producer_id,
                producer_epoch=txn.epoch, generation_id=-1, member_id='', group_instance_id=None, topics=topics))
        partition_errors = [p.error_code for t in answer.topics for p in t.partitions]
        assert partition_errors == ([NONE] if version == 5 else [NONE, UNKNOWN_TOPIC_ID])
        if version >= 6:
            assert [t.topic_id for t in answer.topics] == [cluster.topic_id('t'), unknown]
        assert _committed(cluster, 'g', TP, require_stable=True) == (errors.UnstableOffsetCommitError.errno, -1)
        assert txn.end_answer(commit=True) == (NONE, txn.producer_id, 1)
    finally:
        txn.close()
    assert _committed(cluster, 'g', TP, require_stable=True) == (NONE, 5)


def test_update_features_answers_as_kafka_4(cluster):
    """Kafka 4's controller, with Apache Kafka 4.4's answers and messages: all or none, the first refusal is the
    top-level error (v0-v1 list the features only on success); validate_only changes nothing; each change moves the
    finalized features epoch of ApiVersions."""
    def finalized() -> tuple[dict, int, dict]:
        with WireClient(cluster.brokers()[1]) as wire:
            answer = wire.request(REQUESTS[ApiKey.ApiVersions](version=4, client_software_name='t',
                                                              client_software_version='1'))
        return ({f.name: (f.min_version_level, f.max_version_level) for f in answer.finalized_features},
                answer.finalized_features_epoch,
                {f.name: (f.min_version, f.max_version) for f in answer.supported_features if '.' in f.name
                 and not f.name.startswith('kip.')})

    group = {'group.version': (1, 1)}  # KIP-848's, finalized while ConsumerGroupHeartbeat is served
    assert finalized() == ({**group, 'transaction.version': (2, 2)}, 0,
                           {'group.version': (0, 1), 'transaction.version': (0, 2)})
    answer = update_features(cluster, 1, SAFE_DOWNGRADE, validate_only=True)
    assert (answer.error_code, [(r.feature, r.error_code, r.error_message) for r in answer.results]) == (
        NONE, [('transaction.version', NONE, 'NONE')])  # Kafka 4.4's message of a success
    assert finalized()[:2] == ({**group, 'transaction.version': (2, 2)}, 0)
    controller = cluster.state.controller_id
    refusals = {  # the messages Apache Kafka 4.4's controller answers
        (1, UPGRADE, 2): "Can't downgrade the version of this feature without setting the upgrade type to either safe "
                         'or unsafe downgrade.',
        (0, SAFE_DOWNGRADE, 0): "Can't downgrade the version of this feature without setting the upgrade type to "
                                'either safe or unsafe downgrade.',  # v0: an UPGRADE whatever allow_downgrade says
        (3, UPGRADE, 2): f'Local controller {controller} only supports versions 0-2',
        (-1, SAFE_DOWNGRADE, 2): 'A feature version cannot be less than 0.',
        (2, 4, 2): 'The controller does not support the given upgrade type.',
    }
    for (level, upgrade_type, version), reason in refusals.items():
        answer = update_features(cluster, level, upgrade_type, version=version)
        assert (answer.error_code, answer.error_message, answer.results) == (
            INVALID_UPDATE_VERSION, f'{ALL_FAILED}Invalid update version {level} for feature transaction.version. '
                                    f'{reason}', [])
    unknown = update_features(cluster, 1, UPGRADE, version=2, feature='no.such.version')
    assert (unknown.error_code, unknown.error_message) == (
        INVALID_UPDATE_VERSION, f'{ALL_FAILED}Invalid update version 1 for feature no.such.version. '
                                f'Local controller {controller} does not support this feature.')
    assert update_features(cluster, 0, SAFE_DOWNGRADE).error_code == NONE
    assert finalized()[:2] == (group, 1)  # level 0: no longer finalized
    assert update_features(cluster, 2, UPGRADE).error_code == NONE
    assert finalized()[:2] == ({**group, 'transaction.version': (2, 2)}, 2)


def test_update_features_needs_alter_on_the_cluster(reference_cluster_factory):
    cluster = reference_cluster_factory(1, users={'admin': 'a', 'bob': 'b'}, authorizer=True,
                                        super_users=['User:admin'])
    for user, expected in (('bob', CLUSTER_AUTHORIZATION_FAILED), ('admin', NONE)):
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, security_protocol='SASL_PLAINTEXT',
                                 sasl_mechanism='PLAIN', sasl_plain_username=user,
                                 sasl_plain_password=user[0])
        try:
            if expected:
                with pytest.raises(errors.ClusterAuthorizationFailedError):
                    admin.update_features({'transaction.version': ('SAFE_DOWNGRADE', 1)})
            else:
                assert admin.update_features({'transaction.version': ('SAFE_DOWNGRADE', 1)}) == {
                    'transaction.version': 'OK'}
                assert admin.describe_features()['transaction.version'] == {
                    'supported': (0, 2), 'finalized': (1, 1), 'finalized_epoch': 1}
        finally:
            admin.close()
