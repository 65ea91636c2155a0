"""kafka_kip's KIP-848 consumer (``group_protocol='consumer'``) on the reference cluster and on Apache Kafka: groups
that read every record once while members join, leave and get fenced; the settings it refuses."""
from __future__ import annotations

import uuid
from typing import Any

import kafka.errors as Errors
import pytest
from kafka import ConsumerRebalanceListener
from kafka.admin import NewPartitions, NewTopic
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

import kafka_kip
from kafka_kip import OffsetAndMetadata
from kafka_kip.consumer.membership import MemberState
from kafka_kip.protocol.constants import NONE
from kafka_kip.protocol.requests import metadata_request
from kafka_kip.protocol.wire import WireClient
from kafka_kip_reference.broker.control import ControlledRequest
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.support.kip848_clusters import (
    FAST_CONSUMER_GROUP_HEARTBEATS,
    FenceOnceAfterCommits,
    LoseRevocationAck,
)

pytestmark = pytest.mark.kip848


class Recorder(ConsumerRebalanceListener):
    """Every listener call, as (method, sorted partition numbers)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, list[int]]] = []

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(('revoked', sorted(tp.partition for tp in revoked)))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(('assigned', sorted(tp.partition for tp in assigned)))

    def on_partitions_lost(self, lost: Any) -> None:
        self.events.append(('lost', sorted(tp.partition for tp in lost)))


def new_topic(bootstrap: str, partitions: int = 6) -> str:
    topic = f'kip848-{uuid.uuid4().hex[:8]}'
    admin = kafka_kip.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 3)])
    finally:
        admin.close()
    return topic


def known_to_every_broker(bootstrap: str, topic: str, partitions: int) -> None:
    """Wait until every broker's metadata lists ``topic`` with its ``partitions``: a group coordinator that has not
    seen the topic yet assigns nothing at the group's first epoch and bumps the epoch once it does."""
    with WireClient(bootstrap.split(',')[0]) as wire:
        addresses = [f'{b.host}:{b.port}' for b in wire.request(metadata_request([topic])).brokers]

    def listed(address: str) -> bool:
        with WireClient(address) as wire:
            found = wire.request(metadata_request([topic])).topics
        return found[0].error_code == NONE and len(found[0].partitions) == partitions

    wait_until(lambda: all(listed(address) for address in addresses), f'{topic} on every broker')


def produce(bootstrap: str, topic: str, start: int, end: int, partitions: int = 6) -> None:
    producer = kafka_kip.KafkaProducer(bootstrap_servers=bootstrap, acks='all')
    try:
        for i in range(start, end):
            producer.send(topic, key=b'k%d' % i, value=b'%d' % i, partition=i % partitions)
        producer.flush(30)
    finally:
        producer.close()


def member(bootstrap: str, topic: str, listener: Recorder | None = None, **configs: Any) -> kafka_kip.KafkaConsumer:
    consumer = kafka_kip.KafkaConsumer(bootstrap_servers=bootstrap, group_id=f'{topic}-g', group_protocol='consumer',
                                       **{'auto_offset_reset': 'earliest', **configs})
    consumer.subscribe([topic], listener=listener)
    return consumer


def poll_until(members: list, seen: list[int], count: int, sizes: list[int], timeout: float = 60) -> list[set[int]]:
    """Poll every member until ``seen`` holds ``count`` record values and the members own ``sizes`` partitions
    (sorted), every member stable."""
    def settled() -> list[set[int]] | None:
        for consumer in members:
            for records in consumer.poll(50).values():
                seen.extend(int(record.value) for record in records)
        owned = [{tp.partition for tp in consumer.assignment()} for consumer in members]
        stable = all(c._coordinator.membership.state is MemberState.STABLE for c in members)
        return owned if stable and len(seen) >= count and sorted(map(len, owned)) == sizes else None

    return wait_until(settled, f'{count} records and assignments {sizes}', timeout=timeout)


def third_member_joins(bootstrap: str, topic: str, listeners: list[Recorder],
                       members: list) -> tuple[list[int], list[set[int]]]:
    """2 members (auto-commit, no interval commit in the test's time) read 60 records, a 3rd joins, the three read the
    next 60; ``members`` gets the three: (the record values seen, the partitions each member owns)."""
    members += [member(bootstrap, topic, listeners[i], auto_commit_interval_ms=600000) for i in range(2)]
    seen: list[int] = []
    poll_until(members, seen, 0, [3, 3])
    produce(bootstrap, topic, 0, 60)
    poll_until(members, seen, 60, [3, 3])
    members.append(member(bootstrap, topic, listeners[2], auto_commit_interval_ms=600000))
    poll_until(members, seen, 60, [2, 2, 2])
    produce(bootstrap, topic, 60, 120)
    return seen, poll_until(members, seen, 120, [2, 2, 2])


def test_members_join_and_leave_with_every_record_read_once(bootstrap_848: str) -> None:
    """2 members (auto-commit, no interval commit in the test's time) read 60 records; a 3rd joins: each of the two
    revokes 1 partition after committing (nothing is read twice), the three hold 2 each, disjoint and complete, and
    read the next 60; ListGroups lists the group as 'consumer'; one closes (commits, revokes, leaves with epoch -1):
    the two others take 1 partition each and read exactly the last 12."""
    bootstrap = bootstrap_848
    topic = new_topic(bootstrap)
    listeners = [Recorder(), Recorder(), Recorder()]
    members: list = []
    try:
        seen, owned = third_member_joins(bootstrap, topic, listeners, members)
        assert (sorted(seen), sorted(set().union(*owned)), sum(map(len, owned))) == (
            list(range(120)), [0, 1, 2, 3, 4, 5], 6)
        assert [events[-1][0] for events in (r.events for r in listeners[:2])] == ['revoked', 'revoked']
        assert [len(events[-1][1]) for events in (r.events for r in listeners[:2])] == [1, 1]
        assert ({kind for kind, _ in listeners[2].events}, sorted(p for _, ps in listeners[2].events for p in ps)) == (
            {'assigned'}, sorted(owned[2]))
        admin = kafka_kip.KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            listed = {g['group_id']: g for g in admin.list_groups()}
        finally:
            admin.close()
        assert (listed[f'{topic}-g']['group_type'], listed[f'{topic}-g']['protocol_type']) == ('consumer', 'consumer')

        leaving = members.pop(0)
        given_up = sorted(tp.partition for tp in leaving.assignment())
        leaving.close()
        assert listeners[0].events[-1] == ('revoked', given_up)
        poll_until(members, seen, 120, [3, 3])
        produce(bootstrap, topic, 120, 132)
        owned = poll_until(members, seen, 132, [3, 3])
        assert (sorted(seen), sorted(set().union(*owned))) == (list(range(132)), [0, 1, 2, 3, 4, 5])
        assert sorted(p for r in listeners[1:] for p in r.events[-1][1]) == given_up
    finally:
        for consumer in members:
            consumer.close()


def test_group_and_member_epochs_are_kafkas(bootstrap_848: str) -> None:
    """Apache Kafka 4.4 creates a consumer group at group epoch 1 with an empty target assignment (KAFKA-20268): its
    first member is assigned at epoch 2, a second member's join moves both to 3, the first one's leave the other to
    4. The reference cluster gives the same epochs."""
    topic = new_topic(bootstrap_848, 2)
    known_to_every_broker(bootstrap_848, topic, 2)
    members = [member(bootstrap_848, topic, enable_auto_commit=False)]
    seen: list[int] = []

    def epochs() -> list[int]:
        return [c._coordinator.membership.member_epoch for c in members]

    try:
        poll_until(members, seen, 0, [2])
        first = epochs()
        members.append(member(bootstrap_848, topic, enable_auto_commit=False))
        poll_until(members, seen, 0, [1, 1])
        both = epochs()
        members.pop(0).close()
        poll_until(members, seen, 0, [2])
        last = epochs()
    finally:
        for consumer in members:
            consumer.close()
    assert (first, both, last) == ([2], [3, 3], [4])


def test_fenced_member_loses_its_partitions_rejoins_and_reads_on(reference_cluster_factory) -> None:
    """A heartbeat answered FENCED_MEMBER_EPOCH (control()) once the member committed its 30 records: it calls
    on_partitions_lost, rejoins with epoch 0 under the same member id, gets its partitions back and reads the next
    30 from the committed offsets: 60 records, each once."""
    cluster = reference_cluster_factory(3, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS)
    bootstrap = cluster.bootstrap_servers
    topic = new_topic(bootstrap, 3)
    fence = FenceOnceAfterCommits(cluster, 30)
    cluster.control(ApiKey.ConsumerGroupHeartbeat, fence, keep=True)
    listener = Recorder()
    consumer = member(bootstrap, topic, listener, enable_auto_commit=False)
    try:
        seen: list[int] = []
        produce(bootstrap, topic, 0, 30, 3)
        poll_until([consumer], seen, 30, [3])
        consumer.commit()
        wait_until(lambda: fence.fired == 1 and consumer.poll(50) == {} and listener.events[-1][0] == 'assigned'
                   and consumer._coordinator.membership.state is MemberState.STABLE, 'fenced and back')
        produce(bootstrap, topic, 30, 60, 3)
        poll_until([consumer], seen, 60, [3])
        assert sorted(seen) == list(range(60))
        assert listener.events == [('assigned', [0, 1, 2]), ('lost', [0, 1, 2]), ('assigned', [0, 1, 2])]
        assert len(fence.joins) == 2 and fence.joins[0] == fence.joins[1] == consumer._coordinator.membership.member_id
        assert {tp.partition: consumer.committed(tp) for tp in consumer.assignment()} == {0: 10, 1: 10, 2: 10}
    finally:
        consumer.close()


@pytest.mark.parametrize('configs, message', [
    ({'group_protocol': 'next'}, "group_protocol must be one of 'classic', 'consumer', got 'next'"),
    ({'group_protocol': 'consumer', 'session_timeout_ms': 10000}, "session_timeout_ms is not supported with "
                                                                  "group_protocol='consumer'"),
    ({'group_protocol': 'consumer', 'heartbeat_interval_ms': 1000}, "heartbeat_interval_ms is not supported with "
                                                                    "group_protocol='consumer'"),
    ({'group_protocol': 'consumer', 'partition_assignment_strategy': []},
     "partition_assignment_strategy is not supported with group_protocol='consumer'"),
    ({'group_protocol': 'consumer', 'group_remote_assignor': 'sticky'},
     "group_remote_assignor must be one of 'uniform', 'range' or None (the broker's default), got 'sticky'"),
    ({'group_remote_assignor': 'range'}, "group_remote_assignor='range' needs group_protocol='consumer'"),
])
def test_settings_refused(configs: dict, message: str) -> None:
    with pytest.raises(Errors.KafkaConfigurationError) as raised:
        kafka_kip.KafkaConsumer(bootstrap_servers='localhost:1', **configs)
    assert message in str(raised.value)


def test_consumer_protocol_is_chosen_at_construction(reference_cluster) -> None:
    """'CONSUMER' in any case picks the KIP-848 coordinator; the default stays classic."""
    from kafka_kip.consumer.consumer_protocol import ConsumerProtocolCoordinator
    from kafka_kip.consumer.coordinator import ConsumerCoordinator

    bootstrap = reference_cluster.bootstrap_servers
    chosen = []
    for configs in ({'group_protocol': 'CONSUMER', 'group_remote_assignor': 'range'}, {}):
        consumer = kafka_kip.KafkaConsumer(bootstrap_servers=bootstrap, group_id='g', **configs)
        chosen.append((type(consumer._coordinator), consumer.config['group_protocol']))
        consumer.close()
    assert chosen == [(ConsumerProtocolCoordinator, 'consumer'), (ConsumerCoordinator, 'classic')]


def test_static_member_leaves_with_minus_2_and_a_second_instance_is_refused(reference_cluster_factory) -> None:
    """A static member (group_instance_id) joins with its rack (client_rack) and leaves with epoch -2 on close; while
    it holds the instance id a second member with the same id is refused UNRELEASED_INSTANCE_ID, raised by poll()
    (Java: fatal)."""
    cluster = reference_cluster_factory(3, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS)
    bootstrap = cluster.bootstrap_servers
    topic = new_topic(bootstrap, 2)
    epochs: list[tuple[str, int, str | None]] = []

    def record(request: ControlledRequest) -> None:
        heartbeat = request.request
        epochs.append((heartbeat.member_id, heartbeat.member_epoch, heartbeat.rack_id))

    cluster.control(ApiKey.ConsumerGroupHeartbeat, record, keep=True)
    first = member(bootstrap, topic, group_instance_id='instance-1', client_rack='rack-a')
    second = member(bootstrap, topic, group_instance_id='instance-1')
    try:
        poll_until([first], [], 0, [2])
        with pytest.raises(Errors.UnreleasedInstanceIdError):
            wait_until(lambda: second.poll(50) and None, 'UNRELEASED_INSTANCE_ID raised')
        assert second._coordinator.membership.state is MemberState.FATAL
    finally:
        first_id = first._coordinator.membership.member_id
        first.close()
        second.close()
    sent = [(epoch, rack) for member_id, epoch, rack in epochs if member_id == first_id]
    assert (sent[0], sent[-1][0]) == ((0, 'rack-a'), -2)  # joined with its rack, left with -2


def test_pattern_subscription_is_evaluated_by_the_broker(bootstrap_848: str) -> None:
    """``subscribe(pattern=)`` sends the regex (SubscribedTopicRegex): the coordinator assigns the partitions of both
    matching topics and none of the third, and the member reads each of their records once."""
    bootstrap = bootstrap_848
    prefix = f'kip848re{uuid.uuid4().hex[:6]}'
    admin = kafka_kip.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(f'{prefix}-a', 2, 3), NewTopic(f'{prefix}-b', 2, 3), NewTopic(f'x{prefix}', 2, 3)])
    finally:
        admin.close()
    for topic in (f'{prefix}-a', f'{prefix}-b', f'x{prefix}'):
        produce(bootstrap, topic, 0, 10, 2)
    consumer = kafka_kip.KafkaConsumer(bootstrap_servers=bootstrap, group_id=f'{prefix}-g', group_protocol='consumer',
                                       auto_offset_reset='earliest')
    consumer.subscribe(pattern=f'{prefix}-.*')
    try:
        seen: list[tuple[str, int]] = []

        def read_all() -> bool:
            for tp, records in consumer.poll(50).items():
                seen.extend((tp.topic, int(record.value)) for record in records)
            return len(seen) >= 20 and consumer._coordinator.membership.state is MemberState.STABLE

        wait_until(read_all, '20 records of the two matching topics', timeout=60)
        assert sorted(seen) == sorted((topic, i) for topic in (f'{prefix}-a', f'{prefix}-b') for i in range(10))
        assert sorted((tp.topic, tp.partition) for tp in consumer.assignment()) == [
            (f'{prefix}-a', 0), (f'{prefix}-a', 1), (f'{prefix}-b', 0), (f'{prefix}-b', 1)]
    finally:
        consumer.close()


def test_range_assignor_gives_each_member_a_range(reference_cluster_factory) -> None:
    """``group_remote_assignor='range'``: two members over 6 partitions hold [0, 1, 2] and [3, 4, 5]; they heartbeat at
    the interval the broker dictates (group.consumer.heartbeat.interval.ms, 500 here)."""
    cluster = reference_cluster_factory(3, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS)
    topic = new_topic(cluster.bootstrap_servers)
    members = [member(cluster.bootstrap_servers, topic, group_remote_assignor='range') for _ in range(2)]
    try:
        owned = poll_until(members, [], 0, [3, 3])
        assert sorted(sorted(partitions) for partitions in owned) == [[0, 1, 2], [3, 4, 5]]
        assert [c._coordinator.membership.heartbeat_interval_ms for c in members] == [500, 500]  # the broker's
    finally:
        for consumer in members:
            consumer.close()


@pytest.mark.kip1327
def test_a_latest_group_loses_nothing_while_the_topic_grows_6_9_12(bootstrap_848: str) -> None:
    """KIP-1327's rule in a consumer-protocol group: a 'latest' member positioned at the ends of 6 partitions reads
    every record written while the topic grows to 9 and then to 12 (100 per partition each time), each once; the
    partitions created after the group knew the topic are read from offset 0."""
    bootstrap = bootstrap_848
    topic = new_topic(bootstrap)
    consumer = member(bootstrap, topic, enable_auto_commit=False, auto_offset_reset='latest', metadata_max_age_ms=500)
    admin = kafka_kip.KafkaAdminClient(bootstrap_servers=bootstrap)
    records: list[tuple[int, int, int]] = []

    def read(count: int, partitions: int) -> bool:
        for batch in consumer.poll(50).values():
            records.extend((r.partition, r.offset, int(r.value)) for r in batch)
        state = consumer._subscription.assignment
        return len(records) >= count and len(state) == partitions and all(
            s.has_valid_position for s in state.values())

    try:
        wait_until(lambda: read(0, 6), 'the 6 partitions positioned at their ends', timeout=60)
        written = 0
        for count in (9, 12):
            admin.create_partitions({topic: NewPartitions(count)})
            produce(bootstrap, topic, written, written + 100 * count, count)
            written += 100 * count
            wait_until(lambda w=written, c=count: read(w, c), f'{written} records over {count} partitions', timeout=120)
    finally:
        admin.close()
        consumer.close()
    assert sorted(v for _, _, v in records) == list(range(2100))
    first = {}
    for partition, offset, _ in records:
        first[partition] = min(first.get(partition, offset), offset)
    assert first == {p: 0 for p in range(12)}


@pytest.mark.parametrize('group_protocol', ['classic', 'consumer'])
def test_commits_carry_the_same_epochs_in_both_protocols(reference_cluster, group_protocol: str) -> None:
    """KIP-320/KIP-232 alike in both protocols: the commit of 5 records carries the leader epoch, the last record's
    timestamp and the partition epoch, and committed(metadata=True) returns them."""
    bootstrap = reference_cluster.bootstrap_servers
    topic = new_topic(bootstrap, 1)
    producer = kafka_kip.KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        producer.send(topic, b'%d' % i, partition=0, timestamp_ms=1000 + i)
    producer.close()
    consumer = kafka_kip.KafkaConsumer(bootstrap_servers=bootstrap, group_id=f'{topic}-g', group_protocol=group_protocol,
                                       auto_offset_reset='earliest', enable_auto_commit=False)
    consumer.subscribe([topic])
    try:
        read: list[int] = []
        wait_until(lambda: read.extend(r.offset for rs in consumer.poll(50).values() for r in rs) or len(read) >= 5,
                   '5 records')
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, 0), metadata=True) == OffsetAndMetadata(
            5, '', 0, timestamp=1004, partition_epoch=1)
    finally:
        consumer.close()


def test_members_follow_the_coordinator_when_it_moves(reference_cluster_factory) -> None:
    """The group's coordinator stops once 2 members committed their 60 records: the group moves to another broker with
    its members, epochs and offsets; the members find it, keep their ids and partitions (nothing lost, no listener
    call) and read the next 60 records, every record once."""
    cluster = reference_cluster_factory(3, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS)
    bootstrap = cluster.bootstrap_servers
    topic = new_topic(bootstrap)
    listeners = [Recorder(), Recorder()]
    members = [member(bootstrap, topic, listeners[i], enable_auto_commit=False) for i in range(2)]
    try:
        seen: list[int] = []
        poll_until(members, seen, 0, [3, 3])
        produce(bootstrap, topic, 0, 60)
        owned = poll_until(members, seen, 60, [3, 3])
        for consumer in members:
            consumer.commit()
        ids = [consumer._coordinator.membership.member_id for consumer in members]
        events = [list(listener.events) for listener in listeners]
        old_coordinator = cluster.state.coordinator_for(f'{topic}-g')
        cluster.stop_broker(old_coordinator)
        produce(bootstrap, topic, 60, 120)
        assert poll_until(members, seen, 120, [3, 3]) == owned

        def on_the_new_coordinator() -> bool:  # fetching needs no coordinator: the members may find it later
            for consumer in members:
                seen.extend(int(r.value) for records in consumer.poll(50).values() for r in records)
            return cluster.groups.groups[f'{topic}-g'].coordinator_id not in (None, old_coordinator)

        wait_until(on_the_new_coordinator, 'the group served by another broker')
        assert sorted(seen) == list(range(120))
        assert [consumer._coordinator.membership.member_id for consumer in members] == ids
        assert [listener.events for listener in listeners] == events
    finally:
        for consumer in members:
            consumer.close()


def test_a_lost_acknowledgement_is_sent_again_with_the_previous_epoch(reference_cluster_factory) -> None:
    """The heartbeat acknowledging a revocation is processed (the member moves to a new epoch) and its response lost
    (control() closes the connection): the member heartbeats again with the epoch it had and what it owns, which the
    coordinator accepts; it never rejoins or loses its partitions, and the group reads every record once."""
    cluster = reference_cluster_factory(3, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS)
    bootstrap = cluster.bootstrap_servers
    topic = new_topic(bootstrap)
    lose = LoseRevocationAck(cluster)
    handle = cluster.control(ApiKey.ConsumerGroupHeartbeat, lose, keep=True)
    listeners = [Recorder(), Recorder(), Recorder()]
    members: list = []
    try:
        seen, owned = third_member_joins(bootstrap, topic, listeners, members)
        assert handle.fired == 1
        [(before, after)] = lose.epochs
        assert after > before and lose.sent_after[0] == before and 0 not in lose.sent_after
        assert (sorted(seen), sorted(set().union(*owned))) == (list(range(120)), [0, 1, 2, 3, 4, 5])
        assert 'lost' not in {kind for listener in listeners for kind, _ in listener.events}
    finally:
        for consumer in members:
            consumer.close()


def test_a_member_not_polled_in_time_leaves_and_rejoins_at_its_next_poll(reference_cluster_factory) -> None:
    """poll() not called within max_poll_interval_ms: the member leaves (epoch -1, its partitions free for others), and
    its next poll() calls on_partitions_lost and rejoins with epoch 0, getting its partitions back."""
    cluster = reference_cluster_factory(3, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS)
    topic = new_topic(cluster.bootstrap_servers, 2)
    epochs: list[int] = []
    cluster.control(ApiKey.ConsumerGroupHeartbeat, lambda request: epochs.append(request.request.member_epoch),
                    keep=True)
    listener = Recorder()
    consumer = member(cluster.bootstrap_servers, topic, listener, max_poll_interval_ms=3000)
    try:
        poll_until([consumer], [], 0, [2])
        wait_until(lambda: consumer._coordinator.membership.state is MemberState.STALE
                   and (epochs[-1], cluster.groups.groups[f'{topic}-g'].members) == (-1, {}),
                   'the member gone stale and its leave heartbeat (epoch -1) served')
        poll_until([consumer], [], 0, [2])
        assert listener.events == [('assigned', [0, 1]), ('lost', [0, 1]), ('assigned', [0, 1])]
        assert epochs.count(0) == 2
    finally:
        consumer.close()


def test_a_new_subscription_moves_the_member_and_unsubscribe_leaves(reference_cluster_factory) -> None:
    """subscribe() to another topic: the next heartbeat carries it, the member revokes the old topic's partitions and
    gets the new one's; unsubscribe() leaves the group (epoch -1), and a later subscribe() joins again (epoch 0)."""
    cluster = reference_cluster_factory(3, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS)
    bootstrap = cluster.bootstrap_servers
    first, second = new_topic(bootstrap, 2), new_topic(bootstrap, 2)
    epochs: list[int] = []
    cluster.control(ApiKey.ConsumerGroupHeartbeat, lambda request: epochs.append(request.request.member_epoch),
                    keep=True)
    listener = Recorder()
    consumer = member(bootstrap, first, listener)
    try:
        poll_until([consumer], [], 0, [2])
        consumer.subscribe([second], listener=listener)
        wait_until(lambda: consumer.poll(50) == {} and {tp.topic for tp in consumer.assignment()} == {second}
                   and consumer._coordinator.membership.state is MemberState.STABLE, 'the member moved')
        assert listener.events == [('assigned', [0, 1]), ('revoked', [0, 1]), ('assigned', [0, 1])]
        consumer.unsubscribe()
        assert (consumer._coordinator.membership.state, epochs[-1]) == (MemberState.UNSUBSCRIBED, -1)
        consumer.subscribe([first], listener=listener)
        poll_until([consumer], [], 0, [2])
        assert {tp.topic for tp in consumer.assignment()} == {first} and epochs.count(0) == 2
    finally:
        consumer.close()
