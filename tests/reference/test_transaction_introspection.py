"""DescribeTransactions, ListTransactions and DescribeProducers (KIP-664) with kafka-python's admin calls, against the
reference cluster and Apache Kafka 4.4 with the same results, through one transaction's life: Empty, Ongoing,
CompleteCommit."""
from __future__ import annotations

import uuid

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic, TransactionState
from kafka.errors import TransactionalIdNotFoundError
from kafka.structs import TopicPartition

from kafka_kip_reference.fixtures.conditions import wait_until

TIMEOUT_MS = 45_000


@pytest.fixture(params=['reference', 'apache-kafka'])
def bootstrap(request, reference_cluster_factory) -> str:
    if request.param == 'reference':
        return reference_cluster_factory(3).bootstrap_servers
    return request.getfixturevalue('apache_kafka').bootstrap_servers


def listed(admin: KafkaAdminClient, transactional_id: str, **filters) -> list[tuple[str, str]]:
    """``[(state, producer id)]`` of ``transactional_id`` in ListTransactions with ``filters`` (merged over brokers)."""
    return [(listing.state.value, listing.producer_id) for listings in admin.list_transactions(**filters).values()
            for listing in listings if listing.transactional_id == transactional_id]


def producers(admin: KafkaAdminClient, partitions: list[TopicPartition]) -> dict[TopicPartition, list[tuple]]:
    """``{partition: [(producer id, epoch, last sequence, open transaction's first offset)]}`` (timestamps and the
    coordinator epoch are the broker's own)."""
    return {tp: [(p.producer_id, p.producer_epoch, p.last_sequence, p.current_transaction_start_offset)
                 for p in state.active_producers] for tp, state in admin.describe_producers(partitions).items()}


def test_a_transaction_described_and_listed_through_its_life(bootstrap):
    """Describe and list its transaction, and the producer state of its partitions, as it goes."""
    topic, transactional_id = f'txn-{uuid.uuid4().hex[:8]}', f'tid-{uuid.uuid4().hex[:8]}'
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                             transaction_timeout_ms=TIMEOUT_MS)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
        producer.init_transactions()
        empty = admin.describe_transactions([transactional_id])[transactional_id]
        producer_id = empty.producer_id
        assert (empty.state, empty.transaction_timeout_ms, empty.transaction_start_time_ms, empty.topic_partitions) \
            == (TransactionState.EMPTY, TIMEOUT_MS, -1, set())
        producer.begin_transaction()
        for partition in (0, 1):
            producer.send(topic, b'v', partition=partition)
        producer.flush()
        ongoing = admin.describe_transactions([transactional_id])[transactional_id]
        assert (ongoing.state, ongoing.producer_id, ongoing.producer_epoch, ongoing.topic_partitions) == (
            TransactionState.ONGOING, producer_id, empty.producer_epoch,
            {TopicPartition(topic, 0), TopicPartition(topic, 1)})
        assert ongoing.transaction_start_time_ms > 0
        partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        epoch = ongoing.producer_epoch
        assert producers(admin, partitions) == {tp: [(producer_id, epoch, 0, 0)] for tp in partitions}
        assert listed(admin, transactional_id) == [('Ongoing', producer_id)]
        assert listed(admin, transactional_id, state_filters=['Ongoing', 'PrepareCommit']) == [('Ongoing', producer_id)]
        assert listed(admin, transactional_id, state_filters=['Empty']) == []
        assert listed(admin, transactional_id, producer_id_filters=[producer_id]) == [('Ongoing', producer_id)]
        assert listed(admin, transactional_id, producer_id_filters=[producer_id + 1]) == []
        assert listed(admin, transactional_id, duration_filter_ms=3_600_000) == []  # not running that long
        assert listed(admin, transactional_id, duration_filter_ms=0) == [('Ongoing', producer_id)]
        assert listed(admin, transactional_id, transactional_id_pattern='tid-.*') == [('Ongoing', producer_id)]
        assert listed(admin, transactional_id, transactional_id_pattern='tid-') == []  # the whole id must match
        producer.commit_transaction()

        def completed() -> bool:
            return admin.describe_transactions([transactional_id])[transactional_id].state is \
                TransactionState.COMPLETE_COMMIT
        wait_until(completed, f'{transactional_id} committed')
        done = admin.describe_transactions([transactional_id])[transactional_id]
        assert (done.topic_partitions, done.transaction_start_time_ms) == (set(), ongoing.transaction_start_time_ms)
        assert producers(admin, partitions) == {tp: [(producer_id, epoch, 0, -1)] for tp in partitions}
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions([f'never-{transactional_id}'])
    finally:
        producer.close()
        admin.delete_topics([topic])
        admin.close()
