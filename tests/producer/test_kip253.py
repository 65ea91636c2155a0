"""KIP-253 in the producer: the partition count travels with every batch for a kip.253 leader, and records a
leader refuses for a stale count are re-partitioned with the new one, in order, with valid idempotent sequences.

The faults are real: the partition expansion happens while the producer's requests are held at the broker (a
``Delay`` control), so they arrive after it and are refused, and while more records wait in the accumulator
partitioned for the old count.
"""
from __future__ import annotations

import logging
import re
import threading

import pytest
from kafka.partitioner.default import murmur2
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip import KafkaConsumer, KafkaProducer
from kafka_kip_reference.broker.control import Delay
from kafka_kip_reference.fixtures.conditions import wait_until

pytestmark = pytest.mark.kip253

KEYS = [b'key-%d' % i for i in range(24)]


def partition_for(key: bytes, count: int) -> int:
    """Kafka's default partitioner (murmur2), as kafka-python computes it."""
    return (murmur2(key) & 0x7FFFFFFF) % count


def log_of(cluster, topic: str, count: int) -> dict[bytes, list[tuple[int, int, int]]]:
    """Per value: (partition, offset, leader epoch) of every record in the topic's partitions."""
    found = {}
    for partition in range(count):
        for record in cluster.records(TopicPartition(topic, partition)):
            assert record.value not in found, f'{record.value!r} is in the log twice'
            found[record.value] = (partition, record.offset, record.leader_epoch)
    return found


def send_round(producer, tag: str, keys=KEYS, **kwargs) -> list[tuple[bytes, bytes, object]]:
    return [(key, b'%s-%d' % (tag.encode(), i), producer.send('t', key=key, value=b'%s-%d' % (tag.encode(), i),
                                                              **kwargs))
            for i, key in enumerate(keys)]


def expand_while_requests_wait(cluster, total: int, during) -> tuple[threading.Event, object]:
    """Hold every Produce request at the brokers, run ``during()`` (which sends), grow 't' to ``total`` while the
    requests wait, then let them go: they reach the brokers after the expansion."""
    release = threading.Event()
    held = cluster.control(ApiKey.Produce, lambda request: Delay(until=release), keep=True)
    during()
    wait_until(lambda: held.fired, 'a Produce request held at a broker')
    cluster.create_partitions('t', total)
    return release, held


def test_records_partitioned_for_the_old_count_are_refused_and_re_partitioned_in_order(reference_cluster, caplog):
    caplog.set_level(logging.INFO, logger='kafka_kip.producer')
    cluster = reference_cluster
    cluster.create_topic('t', 2, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0, acks='all')
    try:
        first = send_round(producer, 'a')
        producer.flush()
        in_flight = []
        release, held = expand_while_requests_wait(cluster, 4,
                                                   lambda: in_flight.extend(send_round(producer, 'b')))
        # sent after the expansion returned, partitioned by the producer for its (still old) 2 partitions
        queued = send_round(producer, 'c')
        release.set()
        producer.flush()
        held.remove()
        later = send_round(producer, 'd')
        producer.flush()
        sent = first + in_flight + queued + later
        assert all(future.is_done and future.succeeded() for _, _, future in sent)
        refused = {re.search(r"partition=(\d+)\) refused a batch partitioned for 2 partitions", r.getMessage())
                   for r in caplog.records}
        assert {match.group(1) for match in refused if match} == {'0', '1'}
        written = log_of(cluster, 't', 4)
        assert len(written) == len(sent) == 4 * len(KEYS)
        for key, value, future in sent:
            partition, offset, _ = written[value]
            expected = partition_for(key, 2 if value.startswith(b'a-') else 4)
            assert (future.value.partition, future.value.offset) == (partition, offset)
            assert partition == expected, f'{value!r} of {key!r} is in partition {partition}, not {expected}'
        # one key's records are in the log in send order: by era (epoch 0 of partitions 0-1 before the
        # expansion, everything after it), then by offset within the key's single partition of each era
        for key in KEYS:
            values = [value for k, value, _ in sent if k == key]
            in_log = sorted(values, key=lambda v: (written[v][2] > 0 or written[v][0] >= 2, written[v][1]))
            assert in_log == values
    finally:
        producer.close()


def counts_sent_while_pinned_records_cross_an_expansion(cluster) -> set[int]:
    """Keyed and explicitly partitioned records across an expansion of 't' (2 -> 3): the pinned ones stay in
    partition 1 in order; returns the partition counts the Produce requests carried."""
    cluster.create_topic('t', 2, 1)
    seen: list[int] = []
    cluster.control(ApiKey.Produce, lambda request: seen.extend(
        topic.partition_count for topic in request.request.topic_data), keep=True)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0)
    try:
        pinned = send_round(producer, 'p', keys=[b'k'] * 5, partition=1)
        keyed = send_round(producer, 'k', keys=[b'x', b'y'])
        producer.flush()
        release, held = expand_while_requests_wait(cluster, 3, lambda: pinned.extend(
            send_round(producer, 'q', keys=[b'k'] * 5, partition=1)))
        release.set()
        producer.flush()
        held.remove()
    finally:
        producer.close()
    assert all(future.value.partition == 1 for _, _, future in pinned)
    assert [r.value for r in cluster.records(TopicPartition('t', 1)) if r.key == b'k'] == [
        value for _, value, _ in pinned]
    assert {future.value.partition for _, _, future in keyed} <= {0, 1}
    return set(seen)


def test_explicit_partitions_stay_and_the_count_is_sent_only_to_kip253_leaders(reference_cluster_factory):
    # a kip.253 leader gets the count of keyed batches (none for explicitly partitioned ones); a stock one none
    assert counts_sent_while_pinned_records_cross_an_expansion(reference_cluster_factory(1)) == {-1, 2}
    assert counts_sent_while_pinned_records_cross_an_expansion(reference_cluster_factory(1, features=())) == {-1}


def test_a_transactional_producer_commits_re_partitioned_records(reference_cluster):
    cluster = reference_cluster
    cluster.create_topic('t', 2, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, transactional_id='tx', linger_ms=0)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        sent = []
        release, held = expand_while_requests_wait(cluster, 4,
                                                   lambda: sent.extend(send_round(producer, 'b')))
        sent.extend(send_round(producer, 'c'))
        release.set()
        producer.commit_transaction()
        held.remove()
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, isolation_level='read_committed',
                             auto_offset_reset='earliest', expansion_ordering=False)
    try:
        consumer.assign([TopicPartition('t', p) for p in range(4)])
        got = {}
        wait_until(lambda: got.update({r.value: r.partition for rs in consumer.poll(200).values() for r in rs})
                   or len(got) == len(sent), 'every committed record')
    finally:
        consumer.close()
    assert got == {value: partition_for(key, 4) for key, value, _ in sent}


@pytest.mark.parametrize('stale_thread_count', [2])
def test_a_batch_created_for_a_stale_count_holds_its_topic(reference_cluster, stale_thread_count):
    """A record partitioned for the count a send() read before the producer learnt the new one is never
    accepted for the new count: its batch is refused or re-partitioned (here: sent from several threads while
    the count changes)."""
    cluster = reference_cluster
    cluster.create_topic('t', 2, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=1, metadata_max_age_ms=100)
    sent, lock = [], threading.Lock()
    stop = threading.Event()

    def keep_sending(name: str) -> None:
        i = 0
        while not stop.is_set() or i < 200:
            key = KEYS[i % len(KEYS)]
            value = b'%s-%d' % (name.encode(), i)
            future = producer.send('t', key=key, value=value)
            with lock:
                sent.append((key, value, future))
            i += 1

    threads = [threading.Thread(target=keep_sending, args=(f's{n}',)) for n in range(stale_thread_count)]
    try:
        for thread in threads:
            thread.start()
        wait_until(lambda: len(sent) > 500, 'records sent before the expansion')
        cluster.create_partitions('t', 4)
        with lock:
            after_expansion = len(sent)
        wait_until(lambda: len(sent) > after_expansion + 1000, 'records sent after the expansion')
        stop.set()
        for thread in threads:
            thread.join()
        producer.flush()
    finally:
        stop.set()
        producer.close()
    written = log_of(cluster, 't', 4)
    assert len(written) == len(sent)
    epochs_at_expansion = {p: cluster.epochs(TopicPartition('t', p))[-1] for p in range(2)}  # (epoch 1, offset)
    for key, value, _ in sent:
        partition, offset, _ = written[value]
        after = partition >= 2 or offset >= epochs_at_expansion[partition][1]
        assert partition == partition_for(key, 4 if after else 2)
    assert all(written[value][0] == partition_for(key, 4) for key, value, _ in sent[after_expansion:])
