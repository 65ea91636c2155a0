"""KIP-253 in the consumer: partitions created by an expansion start at 0 and records written after an expansion
wait until the group has returned the prior partitions' records up to their thresholds.

Every consumer here is polled from the test's thread, one after the other, so "the global order of poll
returns" is the order of the list the polls append to. Faults are real: members that do not consume, members
joining and leaving (a rebalance moving prior partitions), a member process killed while holding.
"""
from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path

import pytest
from kafka import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.partitioner.default import murmur2
from kafka.structs import TopicPartition

from kafka_kip import KafkaConsumer, KafkaProducer
from kafka_kip.protocol.features import KIP_253, supports
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.fresh import FreshProcess
from tests.support.keyed import KEYS, inversions

pytestmark = pytest.mark.kip253

MEMBER = Path(__file__).resolve().parents[1] / 'support' / 'scenarios' / 'expansion_member.py'
# members ordered by client id: the range assignor hands the first member (by member id) the first partitions
FAST_GROUP = dict(heartbeat_interval_ms=100, session_timeout_ms=3000, metadata_max_age_ms=200,
                  partition_assignment_strategy=[RangePartitionAssignor], auto_offset_reset='earliest')
FAST_BROKERS = {'group.min.session.timeout.ms': 1000}
POLL_MS = 300


def partition_for(key: bytes, count: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % count


class Member(threading.Thread):
    """A group member polling in its own thread, as an application does.

    Records its polls return go to ``group.returned`` under ``group.lock`` right after each poll, so that
    list is the global order of poll returns. ``pause_below(n)``: partitions below ``n`` stay paused (a member
    that does not consume them); ``idle``: no poll at all (no rebalance can involve it; its heartbeats go on;
    set it through ``call`` to be sure no poll is under way); ``call(fn)`` runs ``fn(consumer)`` between two
    polls.
    """

    def __init__(self, group: Group, name: str, configs: dict) -> None:
        super().__init__(name=name, daemon=True)
        self.group = group
        self.configs = configs
        self.paused_below = 0
        self.idle = threading.Event()
        self._commands: queue.Queue = queue.Queue()
        self._stopping = threading.Event()

    def run(self) -> None:
        consumer = KafkaConsumer(group_id='g', client_id=self.name, **self.configs)
        member = self

        class PauseAtAssignment(ConsumerRebalanceListener):
            # (a rebalance inside poll() assigns partitions unpaused, and that poll() may fetch them at once)
            def on_partitions_revoked(self, revoked) -> None:
                pass

            def on_partitions_assigned(self, assigned) -> None:
                consumer.pause(*[tp for tp in assigned if tp.partition < member.paused_below])

        consumer.subscribe(['t'], listener=PauseAtAssignment())
        try:
            while not self._stopping.is_set():
                while not self._commands.empty():
                    fn, answer = self._commands.get()
                    try:
                        answer.put((fn(consumer), None))
                    except Exception as exc:  # handed to the caller
                        answer.put((None, exc))
                if self.idle.is_set():
                    self._stopping.wait(POLL_MS / 1000)
                    continue
                polled = consumer.poll(timeout_ms=POLL_MS)
                with self.group.lock:
                    self.group.returned.extend((self.name, tp.partition, r.offset, r.key, int(r.value))
                                               for tp, records in polled.items() for r in records)
        finally:
            consumer.close()

    def call(self, fn):
        answer: queue.Queue = queue.Queue()
        self._commands.put((fn, answer))
        result, error = answer.get(timeout=60)
        if error is not None:
            raise error
        return result

    def pause_below(self, count: int) -> None:
        """From the next poll on, partitions below ``count`` are paused (and stay so across rebalances)."""
        def apply(consumer: KafkaConsumer) -> None:
            self.paused_below = count
            consumer.pause(*[tp for tp in consumer.assignment() if tp.partition < count])
            consumer.resume(*[tp for tp in consumer.paused() if tp.partition >= count])
        self.call(apply)

    def assigned(self) -> set[int]:
        return self.call(lambda consumer: {tp.partition for tp in consumer.assignment()})

    def held(self) -> dict[int, object]:
        return self.call(held)

    def leave(self) -> None:
        self._stopping.set()
        self.join(timeout=60)


class Group:
    """Members of group 'g' on topic 't'; ``returned``: every record in the order polls returned them, as
    (member, partition, offset, key, value)."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.members: dict[str, Member] = {}
        self.returned: list[tuple[str, int, int, bytes, int]] = []
        self.lock = threading.Lock()

    def join(self, name: str, **configs) -> Member:
        member = Member(self, name, dict(FAST_GROUP, bootstrap_servers=self.cluster.bootstrap_servers, **configs))
        self.members[name] = member
        member.start()
        return member

    def values(self) -> list[int]:
        with self.lock:
            return [value for *_, value in self.returned]

    def records(self) -> list[tuple[str, int, int, bytes, int]]:
        with self.lock:
            return list(self.returned)

    def close(self) -> None:
        for member in self.members.values():
            member.leave()


def produce(cluster, start: int, count: int) -> list[tuple[bytes, int, int]]:
    """``count`` keyed records with values start..start+count-1; (key, value, partition) of each."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=2)
    try:
        futures = [(KEYS[v % len(KEYS)], v, producer.send('t', key=KEYS[v % len(KEYS)], value=b'%d' % v))
                   for v in range(start, start + count)]
        producer.flush()
    finally:
        producer.close()
    return [(key, value, future.get(0).partition) for key, value, future in futures]


def held(consumer: KafkaConsumer) -> dict[int, object]:
    return {tp.partition: state.expansion_hold for tp, state in consumer._subscription.assignment.items()
            if state.expansion_hold is not None}


def thresholds(cluster, topic: str, old_count: int) -> dict[int, int]:
    """Each prior partition's threshold: where the leader epoch the expansion bumped it to starts."""
    return {p: cluster.epochs(TopicPartition(topic, p))[-1][1] for p in range(old_count)}


def positioned(member: Member, count: int) -> bool:
    return member.call(lambda consumer: len(consumer.assignment()) == count and all(
        consumer._subscription.assignment[tp].has_valid_position for tp in consumer.assignment()))


def test_a_latest_consumer_gets_what_new_partitions_got_before_it_noticed_them(reference_cluster_factory, caplog):
    caplog.set_level(logging.INFO, logger='kafka_kip.consumer')
    cluster = reference_cluster_factory(3, broker_config=FAST_BROKERS)
    cluster.create_topic('t', 2, 3)
    produce(cluster, 0, 40)  # before the consumer joined: 'latest' skips these
    group = Group(cluster)
    try:
        member = group.join('c', auto_offset_reset='latest', metadata_max_age_ms=300_000)
        wait_until(lambda: positioned(member, 2), 'positions at the end of both partitions')
        written = produce(cluster, 100, 40)
        cluster.create_partitions('t', 4)
        written += produce(cluster, 200, 80)  # new partitions get records the consumer has not noticed yet
        assert {partition for _, value, partition in written if value >= 200} >= {2, 3}
        wait_until(lambda: len(group.values()) >= len(written), 'every record written after joining')
    finally:
        group.close()
    assert sorted(group.values()) == [value for _, value, _ in written]
    assert inversions(group.records()) == 0
    started = sorted(r.getMessage().split(' was created')[0] for r in caplog.records
                     if "auto_offset_reset_new_partitions starts it ('earliest'" in r.getMessage())
    assert started == ["TopicPartition(topic='t', partition=2)", "TopicPartition(topic='t', partition=3)"]


def latest_across_an_expansion_it_does_not_order(cluster, reads_new_partitions: bool,
                                                  **configs) -> tuple[list[int], list[int], list[int]]:
    """A 'latest' member of a group on 't' (2 partitions) idle while 't' grows to 4 and gets 80 records, then 40
    more: (values its polls returned, values of the 80 that went to the old partitions and of the 40, values of
    all 120). Polls until it returned the 120 if ``reads_new_partitions``, else the 80 and the 40."""
    cluster.create_topic('t', 2, 3)
    group = Group(cluster)
    try:
        member = group.join('c', **{'auto_offset_reset': 'latest', 'metadata_max_age_ms': 300_000, **configs})
        wait_until(lambda: positioned(member, 2), 'positions at the end of both partitions')
        member.call(lambda consumer: member.idle.set())  # no poll while the topic grows and records are written
        cluster.create_partitions('t', 4)
        written = produce(cluster, 0, 80)
        in_old = [value for _, value, partition in written if partition < 2]
        member.idle.clear()
        wait_until(lambda: positioned(member, 4), 'the new partitions positioned')
        later = produce(cluster, 100, 40)
        expected = len(written) + len(later) if reads_new_partitions else len(in_old) + len(later)
        wait_until(lambda: len(group.values()) >= expected, f'{expected} records')
    finally:
        group.close()
    return (sorted(group.values()), sorted(in_old + [value for _, value, _ in later]),
            sorted(value for _, value, _ in written + later))


def test_opting_out_leaves_auto_offset_reset_and_order_to_kafka_python(reference_cluster_factory):
    returned, expected, _ = latest_across_an_expansion_it_does_not_order(
        reference_cluster_factory(3, broker_config=FAST_BROKERS), False, expansion_ordering=False,
        auto_offset_reset_new_partitions=None)
    # 'latest' on the new partitions skipped what was written there before the consumer noticed them
    assert returned == expected


def test_brokers_without_kip253_leave_order_to_kafka_python_with_a_warning(reference_cluster_factory, caplog):
    caplog.set_level(logging.WARNING, logger='kafka_kip.consumer')
    # no leader epoch bump tells the consumer about the expansion: it learns it from its metadata refresh
    returned, _, everything = latest_across_an_expansion_it_does_not_order(
        reference_cluster_factory(3, broker_config=FAST_BROKERS, features=()), True, metadata_max_age_ms=200)
    assert returned == everything  # nothing ordered; the new partitions read from their start (KIP-1327's rule)
    [warning] = [r.getMessage() for r in caplog.records if 'does not advertise kip.253' in r.getMessage()]
    assert warning.startswith('Topic t grew from 2 to 4 partitions, and group coordinator ')
    assert 'records of one key may be returned out of order across the expansion' in warning


def expansion_held_by_second_member(group: Group, first: str, second: str, after: int) -> tuple:
    """Two members of a group on 't' (2 partitions) that do not consume the partitions 0 and 1; 200 records, an
    expansion to 4 partitions and ``after`` records: once ``first`` owns 0 and 1 and ``second`` holds 2 and 3,
    (first, second, records before, records after)."""
    members = group.join(first), group.join(second)
    wait_until(lambda: sum(len(member.assigned()) for member in members) == 2, 'both members assigned')
    for member in members:
        member.pause_below(2)  # nobody consumes the prior partitions yet
    written_before = produce(group.cluster, 0, 200)
    group.cluster.create_partitions('t', 4)
    written_after = produce(group.cluster, 1000, after)
    wait_until(lambda: members[0].assigned() == {0, 1} and set(members[1].held()) == {2, 3}, 'the new partitions held')
    return (*members, written_before, written_after)


def test_new_partitions_wait_for_the_group_positions_on_their_prior_partitions(reference_cluster_factory):
    cluster = reference_cluster_factory(3, broker_config=FAST_BROKERS)
    cluster.create_topic('t', 2, 3)
    group = Group(cluster)
    try:
        prior, holder, before, after = expansion_held_by_second_member(group, 'a-prior', 'b-new', 200)
        limits = thresholds(cluster, 't', 2)
        assert {p: h.waiting_for for p, h in holder.held().items()} == {
            p: {TopicPartition('t', q): t for q, t in limits.items()} for p in (2, 3)}
        assert prior.assigned() == {0, 1} and [r for r in group.records() if r[1] >= 2] == []
        prior.pause_below(0)
        wait_until(lambda: len(group.values()) >= len(before) + len(after), 'every record')
    finally:
        group.close()
    returned = group.records()
    assert sorted(group.values()) == sorted(v for _, v, _ in before + after)
    assert inversions(returned) == 0
    last_prior = max(i for i, r in enumerate(returned) if r[1] < 2 and r[2] < limits[r[1]])
    first_new = min(i for i, r in enumerate(returned) if r[1] >= 2)
    assert last_prior < first_new


def test_a_rebalance_moving_the_prior_partitions_mid_hold_neither_releases_early_nor_holds_forever(
        reference_cluster_factory):
    cluster = reference_cluster_factory(3, broker_config=FAST_BROKERS)
    cluster.create_topic('t', 2, 3)
    group = Group(cluster)
    try:
        idle, holder, before, after = expansion_held_by_second_member(group, 'a-idle', 'b-holder', 100)
        # a new member sorts first: the range assignor moves the prior partitions 0 and 1 to it
        newcomer = group.join('0-new')
        wait_until(lambda: len(group.values()) >= len(before) + len(after), 'every record')
        assert (newcomer.assigned(), idle.assigned(), holder.assigned()) == ({0, 1}, {2}, {3})
    finally:
        group.close()
    returned = group.records()
    assert sorted(group.values()) == sorted(v for _, v, _ in before + after)
    assert inversions(returned) == 0
    limits = thresholds(cluster, 't', 2)
    prior = [i for i, r in enumerate(returned) if r[1] < 2 and r[2] < limits[r[1]]]
    new = [i for i, r in enumerate(returned) if r[1] >= 2]
    assert {returned[i][0] for i in prior} == {'0-new'} and max(prior) < min(new)


def test_a_member_killed_while_holding_leaves_its_partitions_to_one_that_releases_them(reference_cluster_factory):
    cluster = reference_cluster_factory(3, broker_config=FAST_BROKERS)
    cluster.create_topic('t', 2, 3)
    group = Group(cluster)
    with FreshProcess(MEMBER, stock=False) as killed:
        try:
            survivor = group.join('a-survivor')
            configs = {k: v for k, v in FAST_GROUP.items() if k != 'partition_assignment_strategy'}
            killed.call('start', cluster.bootstrap_servers, dict(configs, group_id='g', client_id='b-killed'))
            wait_until(lambda: killed.call('assigned') == [1] and survivor.assigned() == {0}, 'both members assigned')
            survivor.pause_below(2)
            killed.call('poll_held')  # (pauses partition 1: the killed member consumes nothing before it holds)
            before = produce(cluster, 0, 200)
            cluster.create_partitions('t', 4)
            after = produce(cluster, 1000, 100)
            wait_until(lambda: killed.call('poll_held') == [2, 3] and survivor.assigned() == {0, 1},
                       'the other member holding the new partitions')
            returned_by_killed = killed.call('returned')
            killed.kill()
            survivor.pause_below(0)
            wait_until(lambda: len(group.values()) >= len(before) + len(after), 'every record, through the survivor')
            assert survivor.assigned() == {0, 1, 2, 3}
        finally:
            group.close()
    assert returned_by_killed == []  # it held the new partitions until it died (and consumed nothing else)
    assert sorted(group.values()) == sorted(v for _, v, _ in before + after)
    assert inversions(group.records()) == 0


def test_a_holding_member_that_loses_its_coordinator_connection_keeps_holding(reference_cluster_factory):
    """The coordinator's connection drops while a member holds the new partitions: until it is connected again the
    member does not know whether the coordinator advertises kip.253, and it keeps holding (it returned the new
    partitions' records unheld there once, seen as key-order inversions in a loaded CI run)."""
    cluster = reference_cluster_factory(3, broker_config=FAST_BROKERS)
    cluster.create_topic('t', 2, 3)
    group = Group(cluster)

    def poll_without_coordinator_connection(consumer: KafkaConsumer) -> tuple[bool, list[int], dict[int, object]]:
        coordinator = consumer._coordinator
        consumer._client._manager.close(coordinator.coordinator_id)
        lost = not supports(consumer._client, coordinator.coordinator_id, KIP_253)
        returned = []
        while not (coordinator.coordinator() is not None
                   and supports(consumer._client, coordinator.coordinator_id, KIP_253)):
            returned.extend(tp.partition for tp in consumer.poll(timeout_ms=50))
        returned.extend(tp.partition for tp in consumer.poll(timeout_ms=50))
        return lost, returned, held(consumer)

    try:
        prior, holder, before, after = expansion_held_by_second_member(group, 'a-prior', 'b-new', 100)
        lost, returned, still_held = holder.call(poll_without_coordinator_connection)
        assert (lost, returned, sorted(still_held)) == (True, [], [2, 3])
        prior.pause_below(0)
        wait_until(lambda: len(group.values()) >= len(before) + len(after), 'every record')
    finally:
        group.close()
    assert sorted(group.values()) == sorted(v for _, v, _ in before + after)
    assert inversions(group.records()) == 0
