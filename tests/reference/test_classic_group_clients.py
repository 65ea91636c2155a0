"""Classic consumer groups on the reference cluster with unmodified kafka-python and confluent-kafka clients
over sockets: balancing, session expiry, commits with leader epochs, the admin clients, a moving
coordinator, partition-epoch checks.
"""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import KafkaException as ConfluentKafkaException
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient as ConfluentAdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.messages import REQUESTS, RESPONSES
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.reference.group_harness import offset_rows
from tests.support.consuming import confluent_messages

WAIT_S = 30.0
STOCK_POLL_MS = 500
#: Sessions of 2 s need a lower group.min.session.timeout.ms than Kafka's default 6000, as on a real broker.
SHORT_SESSIONS = {'group.min.session.timeout.ms': 1000}


class ConsumerThread:
    """An unmodified kafka-python KafkaConsumer, created, polled and closed in its own thread."""

    def __init__(self, bootstrap: str, topic: str, group_id: str, **config: Any) -> None:
        self.assignment: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self._args = (topic,)
        self._config = {'bootstrap_servers': bootstrap, 'group_id': group_id, 'session_timeout_ms': 6000,
                        'heartbeat_interval_ms': 500, **config}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            consumer = KafkaConsumer(*self._args, **self._config)
            try:
                while not self._stop.is_set():
                    # polls longer than a join: kafka-python 3.0.12 can leave a join unfinished for good when a
                    # poll() times out while a leader rejoins for new metadata
                    consumer.poll(timeout_ms=STOCK_POLL_MS)
                    self.assignment = frozenset(tp.partition for tp in consumer.assignment())
            finally:
                consumer.close()
        except BaseException as exc:  # reported by close()
            self.error = exc

    def close(self) -> None:
        """Stop polling and close the consumer (a dynamic member sends LeaveGroup)."""
        self._stop.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive() and self.error is None, self.error


def assignments(consumers: list[ConsumerThread]) -> list[list[int]] | None:
    """The members' partitions, sorted, when they are disjoint and non-empty; else None."""
    parts = sorted(sorted(c.assignment) for c in consumers)
    flat = [p for part in parts for p in part]
    return parts if all(parts) and len(flat) == len(set(flat)) else None


def send(address: Any, request: Any, version: int) -> Any:
    """One request to one broker over a plain socket; the decoded response."""
    request.with_header(correlation_id=7, client_id='test')
    with socket.create_connection((address.host, address.port), timeout=10) as sock:
        sock.sendall(request.encode(version=version, header=True, framed=True))
        reader = sock.makefile('rb')
        size = int.from_bytes(reader.read(4), 'big')
        response = RESPONSES[request.API_KEY].decode(reader.read(size), version=version, header=True)
    assert response.header.correlation_id == 7
    return response


def find_coordinator(address: Any, group_id: str) -> int:
    """Ask one broker for the group's coordinator (FindCoordinator v2)."""
    response = send(address, REQUESTS[ApiKey.FindCoordinator](key=group_id, key_type=0), 2)
    assert response.error_code == 0
    return response.node_id


@pytest.fixture(scope='module')
def cluster() -> Iterator[ReferenceCluster]:
    with ReferenceCluster(brokers=3) as running:
        yield running
        assert running.internal_errors == []


def test_kafka_python_group_balances_and_rebalances_when_a_member_leaves(cluster: ReferenceCluster) -> None:
    cluster.create_topic('balance', partitions=6, replication_factor=3)
    consumers = [ConsumerThread(cluster.bootstrap_servers, 'balance', 'g-balance', client_id=f'kp-{i}')
                 for i in range(3)]
    try:
        wait_until(lambda: assignments(consumers) == [[0, 1], [2, 3], [4, 5]], 'three balanced members')
        consumers.pop(1).close()
        wait_until(lambda: assignments(consumers) == [[0, 1, 2], [3, 4, 5]], 'two members, six partitions')
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            described = admin.describe_groups(['g-balance'])['g-balance']
        finally:
            admin.close()
        assert (described['group_state'], described['protocol_type'], described['protocol_data']) == (
            'Stable', 'consumer', 'range')
        assert sorted(m['client_id'] for m in described['members']) == ['kp-0', 'kp-2']
        assert sorted(p for m in described['members'] for a in m['member_assignment']['assigned_partitions']
                      for p in a['partitions']) == [0, 1, 2, 3, 4, 5]
    finally:
        for consumer in consumers:
            consumer.close()


def test_kafka_python_member_that_stops_heartbeating_expires_after_its_session_timeout(
        reference_cluster_factory) -> None:
    cluster = reference_cluster_factory(3, broker_config=SHORT_SESSIONS)
    cluster.create_topic('expiry', partitions=2, replication_factor=3)
    # A static member does not send LeaveGroup on close: the coordinator must notice the silence.
    silent = ConsumerThread(cluster.bootstrap_servers, 'expiry', 'g-expiry', group_instance_id='silent',
                            session_timeout_ms=2000)
    other = ConsumerThread(cluster.bootstrap_servers, 'expiry', 'g-expiry', session_timeout_ms=2000)
    try:
        wait_until(lambda: assignments([silent, other]) == [[0], [1]], 'two members')
        silent.close()
        closed = time.monotonic()
        wait_until(lambda: other.assignment == {0, 1}, 'the survivor owning both partitions')
        assert time.monotonic() - closed >= 1.9   # not before the silent member's session timeout
    finally:
        other.close()


def test_kafka_python_commit_and_committed_round_trip_with_leader_epochs(cluster: ReferenceCluster) -> None:
    tp = TopicPartition('commits', 0)
    cluster.create_topic('commits', partitions=1, replication_factor=3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        for i in range(5):
            producer.send('commits', b'a%d' % i, partition=0)
        producer.flush()
        leader = cluster.leader(tp)
        assert cluster.elect_leader(tp, (leader + 1) % 3) == 1
        for i in range(3):
            producer.send('commits', b'b%d' % i, partition=0)
        producer.flush()
    finally:
        producer.close()
    assert [(offset, epoch) for offset, epoch, _, _ in cluster.records(tp)] == [
        (0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 1), (6, 1), (7, 1)]
    consumer = KafkaConsumer('commits', bootstrap_servers=cluster.bootstrap_servers, group_id='g-commit',
                             enable_auto_commit=False, auto_offset_reset='earliest', session_timeout_ms=6000,
                             heartbeat_interval_ms=500)
    try:
        seen: list[int] = []
        # >= : a record read twice (a rebalance re-delivering it) fails the assertion below, not the wait
        wait_until(lambda: seen.extend(r.offset for rs in consumer.poll(timeout_ms=STOCK_POLL_MS).values() for r in rs)
                   or len(seen) >= 8, 'eight records')
        assert seen == list(range(8))
        consumer.commit()
        assert consumer.committed(tp) == 8
        assert consumer.committed(tp, metadata=True) == OffsetAndMetadata(8, '', 1)
        # A stock client sends no partition epoch, so the broker checks no epochs, as Apache Kafka does:
        # rewinding the group to an earlier offset (with its earlier leader epoch) is accepted.
        consumer.commit({tp: OffsetAndMetadata(3, 'rewind', 0)})
        assert consumer.committed(tp, metadata=True) == OffsetAndMetadata(3, 'rewind', 0)
        consumer.commit({tp: OffsetAndMetadata(6, 'meta', 1)})
        assert consumer.committed(tp, metadata=True) == OffsetAndMetadata(6, 'meta', 1)
    finally:
        consumer.close()
    successor = KafkaConsumer('commits', bootstrap_servers=cluster.bootstrap_servers, group_id='g-commit',
                              enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
    try:
        records = wait_until(lambda: successor.poll(timeout_ms=STOCK_POLL_MS).get(tp), 'records after the commit')
        assert [(r.offset, r.value) for r in records] == [(6, b'b1'), (7, b'b2')]
    finally:
        successor.close()


def test_confluent_consumer_group_commit_and_committed(cluster: ReferenceCluster) -> None:
    cluster.create_topic('ck-commits', partitions=3, replication_factor=3)
    producer = ConfluentProducer({'bootstrap.servers': cluster.bootstrap_servers})
    for i in range(9):
        producer.produce('ck-commits', value=b'v%d' % i, partition=i % 3)
    assert producer.flush(10) == 0
    consumer = ConfluentConsumer({'bootstrap.servers': cluster.bootstrap_servers, 'group.id': 'g-ck',
                                  'auto.offset.reset': 'earliest', 'enable.auto.commit': False,
                                  'session.timeout.ms': 6000, 'heartbeat.interval.ms': 500})
    try:
        consumer.subscribe(['ck-commits'])
        seen = [(m.partition(), m.offset()) for m in confluent_messages(consumer, 9, 'nine records')]
        assert sorted(seen) == [(p, o) for p in range(3) for o in range(3)]
        consumer.commit(asynchronous=False)
        wanted = [ConfluentTopicPartition('ck-commits', p) for p in range(3)]
        assert [(c.partition, c.offset, c.leader_epoch, c.error)
                for c in consumer.committed(wanted, timeout=10)] == [(p, 3, 0, None) for p in range(3)]
        consumer.commit(offsets=[ConfluentTopicPartition('ck-commits', 1, 1, leader_epoch=0)],
                        asynchronous=False)
        assert [(c.partition, c.offset, c.leader_epoch)
                for c in consumer.committed(wanted, timeout=10)] == [(0, 3, 0), (1, 1, 0), (2, 3, 0)]
    finally:
        consumer.close()


def test_admin_clients_list_describe_and_delete_groups(cluster: ReferenceCluster) -> None:
    cluster.create_topic('admin', partitions=2, replication_factor=3)
    active = ConsumerThread(cluster.bootstrap_servers, 'admin', 'g-active', client_id='kp-active')
    simple = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id='g-simple',
                           enable_auto_commit=False)
    kp_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    ck_admin = ConfluentAdminClient({'bootstrap.servers': cluster.bootstrap_servers})
    try:
        simple.assign([TopicPartition('admin', 1)])
        simple.commit({TopicPartition('admin', 1): OffsetAndMetadata(4, 'x', -1)})
        wait_until(lambda: active.assignment == {0, 1}, 'the active member')

        listed = {g['group_id']: g for g in kp_admin.list_groups()}
        assert listed['g-active'] == {'group_id': 'g-active', 'protocol_type': 'consumer',
                                      'group_state': 'Stable', 'group_type': 'classic'}
        assert listed['g-simple'] == {'group_id': 'g-simple', 'protocol_type': '', 'group_state': 'Empty',
                                      'group_type': 'classic'}
        described = kp_admin.describe_groups(['g-active', 'g-none'])
        [member] = described['g-active']['members']
        assert (described['g-active']['group_state'], described['g-active']['protocol_data'],
                described['g-active']['error']) == ('Stable', 'range', None)
        assert (member['client_id'], member['client_host'], member['member_metadata']['topics'],
                member['member_assignment']['assigned_partitions']) == (
            'kp-active', '/127.0.0.1', ['admin'], [{'topic': 'admin', 'partitions': [0, 1]}])
        assert (described['g-none']['group_state'], described['g-none']['error']) == (
            'Dead', '[Error 69] GroupIdNotFoundError: Group g-none not found.')
        assert kp_admin.list_group_offsets(['g-simple']) == {
            'g-simple': {TopicPartition('admin', 1): OffsetAndMetadata(4, 'x', -1)}}

        ck_listed = {g.group_id: g for g in ck_admin.list_consumer_groups().result(timeout=10).valid}
        assert (ck_listed['g-active'].state.name, ck_listed['g-active'].is_simple_consumer_group) == (
            'STABLE', False)
        assert (ck_listed['g-simple'].state.name, ck_listed['g-simple'].is_simple_consumer_group) == (
            'EMPTY', True)
        ck_active = ck_admin.describe_consumer_groups(['g-active'])['g-active'].result(timeout=10)
        [ck_member] = ck_active.members
        assert (ck_active.state.name, ck_active.partition_assignor, ck_member.client_id, ck_member.host,
                sorted(tp.partition for tp in ck_member.assignment.topic_partitions)) == (
            'STABLE', 'range', 'kp-active', '/127.0.0.1', [0, 1])

        ck_deleted = ck_admin.delete_consumer_groups(['g-simple', 'g-active'])
        assert ck_deleted['g-simple'].result(timeout=10) is None
        with pytest.raises(ConfluentKafkaException) as not_empty:
            ck_deleted['g-active'].result(timeout=10)
        assert not_empty.value.args[0].code() == ConfluentKafkaError.NON_EMPTY_GROUP
        assert kp_admin.delete_groups(['g-simple']) == {'g-simple': 'GroupIdNotFoundError'}
        remaining = {g['group_id'] for g in kp_admin.list_groups()}
        assert 'g-simple' not in remaining and 'g-active' in remaining
    finally:
        simple.close()
        kp_admin.close()
        active.close()


@pytest.mark.reference_cluster(brokers=3, broker_config=SHORT_SESSIONS)
def test_coordinator_moves_when_its_broker_stops_and_the_group_carries_on(reference_cluster) -> None:
    reference_cluster.create_topic('moving', partitions=3, replication_factor=3)
    group = 'g-moving'
    consumer = ConsumerThread(reference_cluster.bootstrap_servers, 'moving', group, enable_auto_commit=False,
                              session_timeout_ms=2000)
    try:
        wait_until(lambda: consumer.assignment == {0, 1, 2}, 'the member')
        brokers = reference_cluster.brokers()
        before = find_coordinator(brokers[0], group)
        admin = KafkaAdminClient(bootstrap_servers=reference_cluster.bootstrap_servers)
        try:
            [member] = admin.describe_groups([group])[group]['members']
        finally:
            admin.close()
        heartbeats: list[float] = []   # when the member's heartbeats reached a live broker
        reference_cluster.control(ApiKey.Heartbeat, lambda request: heartbeats.append(time.monotonic()) if
                        request.request.member_id == member['member_id'] else None, keep=True)
        reference_cluster.stop_broker(before)
        stopped = time.monotonic()
        alive = [b for b in brokers if b.node_id != before]
        after = find_coordinator(alive[0], group)
        assert after != before and after == find_coordinator(alive[1], group)
        # The member survives past its 2 s session only by heartbeating to the new coordinator: wait
        # until its heartbeats there span more than a session after the stop.
        wait_until(lambda: heartbeats and heartbeats[-1] - stopped > 2.5, 'heartbeats for 2.5 s after the stop')
        # A new admin client: kafka-python's admin keeps a cached coordinator after it stops.
        admin = KafkaAdminClient(bootstrap_servers=','.join(f'{b.host}:{b.port}' for b in alive))
        try:
            described = admin.describe_groups([group])[group]
            assert admin.list_groups(broker_ids=[after]) == [
                {'group_id': group, 'protocol_type': 'consumer', 'group_state': 'Stable',
                 'group_type': 'classic'}]
        finally:
            admin.close()
        assert (described['group_state'], [m['member_id'] for m in described['members']]) == (
            'Stable', [member['member_id']])
        assert consumer.assignment == {0, 1, 2}
    finally:
        consumer.close()
    assert reference_cluster.internal_errors == []


def test_commits_check_partition_epochs_and_die_with_their_topic(cluster: ReferenceCluster) -> None:
    tp = TopicPartition('doomed', 0)
    cluster.create_topic('doomed', partitions=1, replication_factor=3)
    old_epoch = cluster.partition_epoch(tp)
    coordinator = cluster.brokers()[find_coordinator(cluster.brokers()[0], 'g-doomed')]
    topic_cls = REQUESTS[ApiKey.OffsetCommit].OffsetCommitRequestTopic

    def commit(partition_epoch: int) -> int:
        request = REQUESTS[ApiKey.OffsetCommit](group_id='g-doomed', generation_id_or_member_epoch=-1, member_id='', topics=[
            topic_cls(name='doomed', partitions=[topic_cls.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=5, committed_leader_epoch=0, committed_metadata='',
                partition_epoch=partition_epoch, commit_timestamp=1000)])])
        [topic] = send(coordinator, request, 8).topics
        return topic.partitions[0].error_code

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        assert commit(old_epoch) == 0
        fetched = send(coordinator, REQUESTS[ApiKey.OffsetFetch](groups=[REQUESTS[ApiKey.OffsetFetch].OffsetFetchRequestGroup(
            group_id='g-doomed', topics=None)]), 8)
        assert offset_rows(fetched.groups[0].topics[0].partitions) == [(0, 5, 0, '', 0, old_epoch, 1000)]
        cluster.delete_topic('doomed')
        assert admin.list_group_offsets(['g-doomed']) == {'g-doomed': {}}
        cluster.create_topic('doomed', partitions=1, replication_factor=3)
        new_epoch = cluster.partition_epoch(tp)
        assert new_epoch != old_epoch
        assert commit(old_epoch) == 10001          # INVALID_PARTITION_EPOCH: the old incarnation
        assert admin.list_group_offsets(['g-doomed']) == {'g-doomed': {}}
        assert commit(new_epoch) == 0
        assert admin.list_group_offsets(['g-doomed']) == {
            'g-doomed': {tp: OffsetAndMetadata(5, '', 0)}}
    finally:
        admin.close()


def test_every_commit_is_checked_for_its_partition_then_its_metadata_size_transactional_or_not():
    from kafka_kip_reference.broker.committed_offsets import GroupOffsets

    offsets = GroupOffsets(SimpleNamespace(partitions=lambda topic: 1 if topic == 't' else None), metadata_max_bytes=4)
    for commit in (lambda *args: offsets.commit(*args), lambda *args: offsets.commit_transactional(7, *args, -1)):
        assert commit('t', 0, 5, -1, 'four') == 0
        assert commit('t', 0, 5, -1, None) == 0
        assert commit('t', 0, 5, -1, 'fives') == 12     # OFFSET_METADATA_TOO_LARGE
        assert commit('t', 1, 5, -1, 'fives') == 3      # UNKNOWN_TOPIC_OR_PARTITION, checked first
        assert commit('u', 0, 5, -1, 'four') == 3
    assert offsets.get('t', 0).metadata == ''
