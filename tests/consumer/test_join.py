"""A group member joins once it knows the partitions of the topics it subscribed to.

kafka-python joins at once: a leader without the topic's metadata assigns nothing of it, and only a second
rebalance, after the metadata arrived, assigns the partitions (the "No partition metadata for topic" empty
assignment seen on slow machines).
"""
from __future__ import annotations

import threading

from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

import kafka_kip
from kafka_kip_reference import Delay
from kafka_kip_reference.fixtures.conditions import wait_until

JOIN_GROUP = ApiKey.JoinGroup
METADATA = ApiKey.Metadata
SYNC_GROUP = ApiKey.SyncGroup


def test_a_member_joins_once_the_metadata_of_its_topics_arrived(reference_cluster_factory, caplog):
    cluster = reference_cluster_factory(1, broker_config={'group.initial.rebalance.delay.ms': 0,
                                                          'group.min.session.timeout.ms': 1000})
    cluster.create_topic('t', partitions=2)
    released = threading.Event()
    asked: list[str] = []
    joins: list[int] = []

    def hold_topic_metadata(request):
        topics = [topic.name for topic in request.request.topics or ()]
        asked.extend(topics)
        return Delay(until=released) if 't' in topics else None

    cluster.control(METADATA, hold_topic_metadata, keep=True)
    cluster.control(JOIN_GROUP, lambda request: joins.append(request.api_version), keep=True)
    consumer = kafka_kip.KafkaConsumer('t', bootstrap_servers=cluster.bootstrap_servers, group_id='g',
                                       session_timeout_ms=3000, heartbeat_interval_ms=1000)
    try:
        wait_until(lambda: consumer.poll(timeout_ms=100) == {} and 't' in asked, "a Metadata request naming 't'")
        for _ in range(5):
            assert consumer.poll(timeout_ms=100) == {}
        assert (joins, consumer.assignment()) == ([], set())   # not joined without the topic's partitions
        released.set()
        wait_until(lambda: consumer.poll(timeout_ms=100) == {} and consumer.assignment(), 'an assignment')
        assert consumer.assignment() == {TopicPartition('t', 0), TopicPartition('t', 1)}
        assert consumer._coordinator._generation.generation_id == 1   # one rebalance, not two
        assert 'No partition metadata for topic t' not in caplog.text
    finally:
        released.set()
        consumer.close()


def test_a_join_that_completes_after_poll_timed_out_is_taken_by_the_next_poll(reference_cluster_factory):
    """kafka-python 3.0.12 starts another JoinGroup when the join it kept in flight across a timed-out poll()
    finished meanwhile: the leader's JoinGroup to the stable group is a second rebalance (generation 2)."""
    cluster = reference_cluster_factory(1, broker_config={'group.initial.rebalance.delay.ms': 0,
                                                          'group.min.session.timeout.ms': 1000})
    cluster.create_topic('t', partitions=2)
    released = threading.Event()
    joins: list[str] = []
    syncs = cluster.control(SYNC_GROUP, lambda request: Delay(until=released), keep=True)
    cluster.control(JOIN_GROUP, lambda request: joins.append(request.request.member_id), keep=True)
    consumer = kafka_kip.KafkaConsumer('t', bootstrap_servers=cluster.bootstrap_servers, group_id='g',
                                       session_timeout_ms=3000, heartbeat_interval_ms=1000)
    try:
        wait_until(lambda: consumer.poll(timeout_ms=100) == {} and syncs.fired == 1, 'a SyncGroup held')
        assert consumer.poll(timeout_ms=100) == {} and consumer.assignment() == set()   # timed out mid-join
        released.set()
        join = consumer._coordinator._join_task
        wait_until(lambda: join.succeeded(), 'the join in flight completed (no poll under way)')
        wait_until(lambda: consumer.poll(timeout_ms=100) == {} and consumer.assignment(), 'an assignment')
        assert consumer.assignment() == {TopicPartition('t', 0), TopicPartition('t', 1)}
        member_id = consumer._coordinator._generation.member_id
        assert (consumer._coordinator._generation.generation_id, joins, syncs.fired) == (1, ['', member_id], 1)
    finally:
        released.set()
        consumer.close()


def test_a_leader_whose_poll_timed_out_mid_rebalance_completes_it_at_the_next_poll(reference_cluster_factory):
    """A rebalance the leader starts because its topic grew: kafka-python 3.0.12 stops wanting to rejoin once
    the assignment is performed, so when poll() times out before the SyncGroup answer, no later poll finished
    that join (no assignment, no heartbeats: expelled at session timeout)."""
    cluster = reference_cluster_factory(1, broker_config={'group.initial.rebalance.delay.ms': 0,
                                                          'group.min.session.timeout.ms': 1000})
    cluster.create_topic('t', partitions=2)
    joins: list[str] = []
    cluster.control(JOIN_GROUP, lambda request: joins.append(request.request.member_id), keep=True)
    consumer = kafka_kip.KafkaConsumer('t', bootstrap_servers=cluster.bootstrap_servers, group_id='g',
                                       session_timeout_ms=3000, heartbeat_interval_ms=1000, metadata_max_age_ms=200)
    released = threading.Event()
    try:
        wait_until(lambda: consumer.poll(timeout_ms=100) == {} and len(consumer.assignment()) == 2, 'an assignment')
        syncs = cluster.control(SYNC_GROUP, lambda request: Delay(until=released), keep=True)
        cluster.create_partitions('t', 4)
        wait_until(lambda: consumer.poll(timeout_ms=100) == {} and syncs.fired == 1, "the leader's SyncGroup held")
        released.set()
        join = consumer._coordinator._join_task
        wait_until(lambda: join.succeeded(), 'the join in flight completed (no poll under way)')
        wait_until(lambda: consumer.poll(timeout_ms=100) == {} and len(consumer.assignment()) == 4,
                   'the assignment of the grown topic')
        assert consumer.assignment() == {TopicPartition('t', p) for p in range(4)}
        member_id = consumer._coordinator._generation.member_id
        assert (consumer._coordinator._generation.generation_id, joins, syncs.fired) == (
            2, ['', member_id, member_id], 1)
    finally:
        released.set()
        consumer.close()
