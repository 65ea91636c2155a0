"""The reference cluster's group coordinator (kafka_kip_reference.broker.groups / offsets).

The first part drives the coordinator's handlers directly with wire-encoded requests and decodes every
response from bytes (a fake cluster state stands in for topics and brokers); the second part runs
unmodified kafka-python and confluent-kafka clients over sockets against ReferenceCluster(brokers=3).
"""
from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
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
from kafka_kip_reference.broker.apis import HANDLERS
from kafka_kip_reference.broker.context import RequestContext, Session
from kafka_kip_reference.broker.groups import GroupCoordinator
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.virtual_time import run_virtual

# -- unit harness -----------------------------------------------------------------------------------


@dataclass
class FakeCluster:
    """The ClusterState read API the coordinator uses: topic 't' (2 partitions), 'u' (1 partition), and the
    internal topics FindCoordinator would otherwise create."""

    loop: asyncio.AbstractEventLoop
    coordinator: int = 0
    topics: dict[str, int] = field(default_factory=lambda: {'t': 2, 'u': 1, '__consumer_offsets': 50,
                                                            '__transaction_state': 50})
    partition_epochs: dict[str, int] = field(default_factory=lambda: {'t': 7, 'u': 2})
    leader_epochs: dict[str, int] = field(default_factory=lambda: {'t': 3, 'u': 0})

    def coordinator_for(self, group_id: str) -> int:
        return self.coordinator

    def broker(self, broker_id: int) -> SimpleNamespace:
        return SimpleNamespace(node_id=broker_id, host='127.0.0.1', port=9000 + broker_id, rack=None)

    def partitions(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def partition_epoch(self, topic: str, partition: int) -> int:
        return self.partition_epochs.get(topic, -1)

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self.leader_epochs.get(topic, -1)

    def honours(self, feature: str) -> bool:
        return True  # the extensions' fields (KIP-232 commits) count


class Env:
    """A coordinator on a fake cluster; ``call`` sends one request through the wire codecs."""

    def __init__(self, cluster: FakeCluster, coordinator: GroupCoordinator) -> None:
        self.cluster = cluster
        self.coordinator = coordinator

    async def call(self, api_key: int, version: int, broker: int = 0, **fields: Any) -> Any:
        request = REQUESTS[api_key](version=version, **fields)
        decoded = REQUESTS[api_key].decode(request.encode(version=version), version=version)
        ctx = RequestContext(broker, api_key, version, 1, 'c', Session(), self.cluster, self.coordinator,
                             transactions=None)  # the group APIs never reach the transaction coordinator
        response = await HANDLERS[api_key].handle(decoded, ctx)
        return RESPONSES[api_key].decode(response.encode(version=version), version=version)

    async def join(self, member_id: str = '', version: int = 7, protocols: tuple = (('range', b'm1'),),
                   session: int = 6000, rebalance: int = 3000, instance: str | None = None,
                   protocol_type: str = 'consumer', group: str = 'g', broker: int = 0) -> Any:
        cls = REQUESTS[ApiKey.JoinGroup]
        return await self.call(
            11, version, broker, group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance,
            member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
            protocols=[cls.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols])

    async def join_new(self, **kwargs: Any) -> Any:
        """MEMBER_ID_REQUIRED, then the real join (parks until the rebalance completes)."""
        first = await self.join(**kwargs)
        assert first.error_code == 79
        return await self.join(member_id=first.member_id, **kwargs)

    async def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
                   version: int = 5, instance: str | None = None, group: str = 'g', broker: int = 0) -> Any:
        cls = REQUESTS[ApiKey.SyncGroup]
        return await self.call(
            14, version, broker, group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance, protocol_type='consumer', protocol_name='range',
            assignments=[cls.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()])

    async def heartbeat(self, member_id: str, generation: int, instance: str | None = None,
                        group: str = 'g', broker: int = 0) -> int:
        response = await self.call(12, 4, broker, group_id=group, generation_id=generation,
                                   member_id=member_id, group_instance_id=instance)
        return response.error_code

    async def commit(self, offsets: dict[tuple[str, int], tuple], version: int = 8, generation: int = -1,
                     member_id: str = '', group: str = 'g', broker: int = 0) -> dict[tuple[str, int], int]:
        """``offsets``: (topic, partition) -> (offset, leader_epoch, metadata[, partition_epoch, ts])."""
        topic_cls = REQUESTS[ApiKey.OffsetCommit].OffsetCommitRequestTopic
        part_cls = topic_cls.OffsetCommitRequestPartition
        by_topic: dict[str, list] = {}
        for (topic, partition), value in offsets.items():
            offset, leader_epoch, metadata, *ext = value
            extra = dict(zip(('partition_epoch', 'commit_timestamp'), ext, strict=False))
            by_topic.setdefault(topic, []).append(part_cls(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=leader_epoch,
                committed_metadata=metadata, **extra))
        response = await self.call(
            8, version, broker, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
            topics=[topic_cls(name=t, partitions=p) for t, p in by_topic.items()])
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    async def fetch(self, group: str = 'g', topics: dict[str, list[int]] | None = None, version: int = 8,
                    broker: int = 0) -> Any:
        cls = REQUESTS[ApiKey.OffsetFetch]
        if version >= 8:
            group_cls = cls.OffsetFetchRequestGroup
            wanted = None if topics is None else [
                group_cls.OffsetFetchRequestTopics(name=t, partition_indexes=p) for t, p in topics.items()]
            return await self.call(9, version, broker, groups=[group_cls(group_id=group, topics=wanted)])
        wanted = None if topics is None else [
            cls.OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in topics.items()]
        return await self.call(9, version, broker, group_id=group, topics=wanted)

    async def describe(self, groups: list[str], version: int = 5, operations: bool = False,
                       broker: int = 0) -> list[Any]:
        response = await self.call(15, version, broker, groups=groups,
                                   include_authorized_operations=operations)
        return response.groups

    async def stable_group(self, members: int = 1, session: int = 6000, rebalance: int = 3000) -> list[Any]:
        """``members`` dynamic members joined and synced in one generation; their join responses."""
        joins = await asyncio.gather(*(self.join_new(session=session, rebalance=rebalance)
                                       for _ in range(members)))
        leader = next(j for j in joins if j.leader == j.member_id)
        followers = [asyncio.ensure_future(self.sync(j.member_id, j.generation_id))
                     for j in joins if j is not leader]
        await asyncio.sleep(0)
        await self.sync(leader.member_id, leader.generation_id,
                        {j.member_id: j.member_id.encode() for j in joins})
        await asyncio.gather(*followers)
        return list(joins)


def run(scenario: Callable[[Env], Awaitable[None]], **config: Any) -> None:
    """Run ``scenario`` against a coordinator on a FakeCluster, on a fresh event loop with a virtual clock:
    session and rebalance timeouts fire after exactly their virtual time, however loaded the machine is."""
    async def main() -> None:
        cluster = FakeCluster(asyncio.get_running_loop())
        settings = {'initial_rebalance_delay_ms': 0, 'min_session_timeout_ms': 100, **config}
        coordinator = GroupCoordinator(cluster, **settings)
        try:
            await scenario(Env(cluster, coordinator))
        finally:
            coordinator.close()
    run_virtual(main())


def member_rows(join_response: Any) -> list[tuple[str, str | None, bytes]]:
    return [(m.member_id, m.group_instance_id, m.metadata) for m in join_response.members]


def offset_rows(partitions: list[Any]) -> list[tuple]:
    return [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code,
             p.partition_epoch, p.commit_timestamp) for p in partitions]


# -- unit tests: FindCoordinator --------------------------------------------------------------------


def test_find_coordinator_single_and_batched_keys() -> None:
    async def scenario(env: Env) -> None:
        v0 = await env.call(10, 0, key='g')
        assert (v0.error_code, v0.node_id, v0.host, v0.port) == (0, 0, '127.0.0.1', 9000)
        env.cluster.coordinator = 2
        v3 = await env.call(10, 3, key='g', key_type=0)
        assert (v3.error_code, v3.error_message, v3.node_id, v3.port) == (0, None, 2, 9002)
        txn = await env.call(10, 3, key='tx', key_type=1)  # transaction coordinators are placed like groups
        assert (txn.error_code, txn.node_id, txn.host, txn.port) == (0, 2, '127.0.0.1', 9002)
        v4 = await env.call(10, 4, key_type=0, coordinator_keys=['a', 'b'])
        assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in v4.coordinators] == [
            ('a', 2, '127.0.0.1', 9002, 0), ('b', 2, '127.0.0.1', 9002, 0)]
        share = await env.call(10, 6, key_type=2, coordinator_keys=['s'])
        assert [(c.key, c.error_code, c.node_id) for c in share.coordinators] == [('s', 42, -1)]
        env.cluster.coordinator = -1
        none = await env.call(10, 4, key_type=0, coordinator_keys=['a'])
        assert [(c.error_code, c.node_id) for c in none.coordinators] == [(15, -1)]
    run(scenario)


# -- unit tests: membership -------------------------------------------------------------------------


def test_join_sync_heartbeat_of_one_member() -> None:
    async def scenario(env: Env) -> None:
        first = await env.join()
        assert (first.error_code, first.generation_id, first.leader, first.members) == (79, -1, '', [])
        assert first.member_id.startswith('c-') and uuid.UUID(first.member_id[2:])
        joined = await env.join(member_id=first.member_id)
        member = first.member_id
        assert (joined.error_code, joined.generation_id, joined.protocol_type, joined.protocol_name,
                joined.leader, joined.member_id) == (0, 1, 'consumer', 'range', member, member)
        assert member_rows(joined) == [(member, None, b'm1')]
        [described] = await env.describe(['g'])
        assert (described.group_state, described.protocol_data, len(described.members)) == (
            'CompletingRebalance', '', 1)
        synced = await env.sync(member, 1, {member: b'a1'})
        assert (synced.error_code, synced.protocol_type, synced.protocol_name, synced.assignment) == (
            0, 'consumer', 'range', b'a1')
        [described] = await env.describe(['g'])
        assert (described.error_code, described.group_state, described.protocol_type,
                described.protocol_data) == (0, 'Stable', 'consumer', 'range')
        assert [(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.member_metadata,
                 m.member_assignment) for m in described.members] == [
            (member, None, 'c', '/127.0.0.1', b'm1', b'a1')]
        assert await env.heartbeat(member, 1) == 0
        assert await env.heartbeat(member, 0) == 22     # ILLEGAL_GENERATION
        assert await env.heartbeat('c-x', 1) == 25      # UNKNOWN_MEMBER_ID
        assert await env.heartbeat(member, 1, group='other') == 25
    run(scenario)


def test_join_before_v4_needs_no_member_id_round_trip() -> None:
    async def scenario(env: Env) -> None:
        joined = await env.join(version=3)
        assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, joined.member_id)
        assert joined.protocol_name == 'range'
    run(scenario)


def test_join_validation_errors() -> None:
    async def scenario(env: Env) -> None:
        assert (await env.join(session=99)).error_code == 26           # INVALID_SESSION_TIMEOUT
        assert (await env.join(group='')).error_code == 24             # INVALID_GROUP_ID
        assert (await env.join(member_id='c-unknown')).error_code == 25
        assert (await env.join(protocols=())).error_code == 23         # INCONSISTENT_GROUP_PROTOCOL
        assert env.coordinator.groups == {}                            # failed joins leave nothing behind
        await env.stable_group()
        assert (await env.join(protocol_type='connect')).error_code == 23
        assert (await env.join(protocols=(('sticky', b''),))).error_code == 23
    run(scenario)


def test_rebalance_waits_for_every_known_member_and_keeps_the_leader() -> None:
    async def scenario(env: Env) -> None:
        [a] = await env.stable_group()
        b_join = asyncio.ensure_future(env.join_new(protocols=(('range', b'm2'),)))
        await asyncio.sleep(0.05)
        assert not b_join.done()
        [described] = await env.describe(['g'])
        assert described.group_state == 'PreparingRebalance'
        assert await env.heartbeat(a.member_id, 1) == 27             # REBALANCE_IN_PROGRESS
        # Members of the current generation may still commit before they rejoin.
        assert await env.commit({('t', 0): (4, 3, '')}, generation=1, member_id=a.member_id) == {('t', 0): 0}
        a2 = await env.join(member_id=a.member_id)
        b = await b_join
        assert (a2.generation_id, b.generation_id, a2.leader, b.leader) == (2, 2, a.member_id, a.member_id)
        assert member_rows(a2) == [(a.member_id, None, b'm1'), (b.member_id, None, b'm2')]
        assert member_rows(b) == []
        assert await env.heartbeat(b.member_id, 2) == 0               # CompletingRebalance: fine
        assert await env.commit({('t', 0): (5, 3, '')}, generation=2, member_id=a.member_id) == {('t', 0): 27}
        b_sync = asyncio.ensure_future(env.sync(b.member_id, 2))
        await asyncio.sleep(0.05)
        assert not b_sync.done()
        a_sync = await env.sync(a.member_id, 2, {a.member_id: b'A', b.member_id: b'B'})
        assert (a_sync.error_code, a_sync.assignment, (await b_sync).assignment) == (0, b'A', b'B')
        assert await env.heartbeat(a.member_id, 1) == 22
    run(scenario)


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    async def scenario(env: Env) -> None:
        a, b = await env.stable_group(members=2, rebalance=300)
        c_join = asyncio.ensure_future(env.join_new(rebalance=300))
        await asyncio.sleep(0.05)
        a_join = asyncio.ensure_future(env.join(member_id=a.member_id, rebalance=300))
        started = asyncio.get_running_loop().time()
        a2, c = await asyncio.gather(a_join, c_join)
        # the rebalance began with c's join, 0.05 s before a's; it ends at its 300 ms timeout without b
        assert asyncio.get_running_loop().time() - started == pytest.approx(0.25)
        assert (a2.generation_id, c.generation_id) == (2, 2)
        assert sorted(m.member_id for m in a2.members + c.members) == sorted([a.member_id, c.member_id])
        assert await env.heartbeat(b.member_id, 1) == 25
    run(scenario)


def test_session_timeout_expires_a_silent_member() -> None:
    async def scenario(env: Env) -> None:
        a, b = await env.stable_group(members=2, session=250)
        for _ in range(4):
            await asyncio.sleep(0.1)
            assert await env.heartbeat(a.member_id, 1) in (0, 27)
        [described] = await env.describe(['g'])
        assert (described.group_state, [m.member_id for m in described.members]) == (
            'PreparingRebalance', [a.member_id])
        assert await env.heartbeat(b.member_id, 1) == 25
        a2 = await env.join(member_id=a.member_id, session=250)
        assert (a2.generation_id, a2.leader) == (2, a.member_id)
        assert member_rows(a2) == [(a.member_id, None, b'm1')]
    run(scenario)


def test_a_member_parked_in_join_group_outlives_its_session_timeout() -> None:
    async def scenario(env: Env) -> None:
        a, b = await env.stable_group(members=2, session=200, rebalance=2000)
        a_join = asyncio.ensure_future(env.join(member_id=a.member_id, protocols=(('range', b'new'),),
                                                session=200, rebalance=2000))
        for _ in range(4):
            await asyncio.sleep(0.1)
            assert await env.heartbeat(b.member_id, 1) == 27
        b2 = await env.join(member_id=b.member_id, session=200, rebalance=2000)
        a2 = await a_join
        assert (a2.generation_id, b2.generation_id) == (2, 2)
        assert sorted(m.member_id for m in a2.members + b2.members) == sorted([a.member_id, b.member_id])
    run(scenario)


def test_pending_member_holds_the_rebalance_until_its_session_expires() -> None:
    async def scenario(env: Env) -> None:
        [a] = await env.stable_group()
        pending = await env.join(session=200)
        assert pending.error_code == 79
        started = asyncio.get_running_loop().time()
        a2 = await env.join(member_id=a.member_id)    # the leader rejoins: the rebalance waits for `pending`
        assert asyncio.get_running_loop().time() - started == pytest.approx(0.2)   # `pending`'s 200 ms session
        assert (a2.generation_id, member_rows(a2)) == (2, [(a.member_id, None, b'm1')])
        assert (await env.join(member_id=pending.member_id)).error_code == 25
    run(scenario)


def test_pending_sync_expiry_removes_members_that_never_sync() -> None:
    async def scenario(env: Env) -> None:
        a, b = await asyncio.gather(env.join_new(rebalance=200), env.join_new(rebalance=200))
        leader = a if a.leader == a.member_id else b
        follower = b if leader is a else a
        synced = await env.sync(leader.member_id, 1, {leader.member_id: b'L', follower.member_id: b'F'})
        assert synced.assignment == b'L'
        await asyncio.sleep(0.3)
        assert await env.heartbeat(follower.member_id, 1) == 25
        assert await env.heartbeat(leader.member_id, 1) == 27
    run(scenario)


def test_initial_rebalance_delay_extends_while_members_keep_arriving() -> None:
    async def scenario(env: Env) -> None:
        started = asyncio.get_running_loop().time()
        first = asyncio.ensure_future(env.join(version=3))
        await asyncio.sleep(0.06)
        second = await env.join(version=3)
        first_result = await first
        assert asyncio.get_running_loop().time() - started == pytest.approx(0.2)
        assert (first_result.generation_id, second.generation_id) == (1, 1)
        assert first_result.leader == first_result.member_id
        assert len(first_result.members) == 2
    run(scenario, initial_rebalance_delay_ms=100)


def test_protocol_vote_picks_the_most_preferred_common_protocol() -> None:
    async def scenario(env: Env) -> None:
        joins = await asyncio.gather(
            env.join(version=3, protocols=(('range', b'a'), ('roundrobin', b'A'))),
            env.join(version=3, protocols=(('roundrobin', b'B'), ('range', b'b'))),
            env.join(version=3, protocols=(('roundrobin', b'C'), ('range', b'c'))))
        assert {j.protocol_name for j in joins} == {'roundrobin'}
        [leader] = [j for j in joins if j.leader == j.member_id]
        assert sorted(m.metadata for m in leader.members) == [b'A', b'B', b'C']
    run(scenario, initial_rebalance_delay_ms=50)


def test_leave_group_single_and_batched() -> None:
    async def scenario(env: Env) -> None:
        assert (await env.call(13, 0, group_id='g', member_id='nobody')).error_code == 25
        cls = REQUESTS[ApiKey.LeaveGroup].MemberIdentity
        a, b = await env.stable_group(members=2)
        static = asyncio.ensure_future(env.join(version=5, instance='i3', protocols=(('range', b'm3'),)))
        await asyncio.sleep(0.01)
        await asyncio.gather(static, env.join(member_id=a.member_id), env.join(member_id=b.member_id))
        left = await env.call(13, 5, group_id='g', members=[
            cls(member_id=b.member_id), cls(member_id='c-zz'), cls(member_id='wrong', group_instance_id='i3'),
            cls(member_id='', group_instance_id='i3')])
        assert left.error_code == 0
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in left.members] == [
            (b.member_id, None, 0), ('c-zz', None, 25), ('wrong', 'i3', 82), ('', 'i3', 0)]
        [described] = await env.describe(['g'])
        assert (described.group_state, [m.member_id for m in described.members]) == (
            'PreparingRebalance', [a.member_id])
        assert (await env.call(13, 0, group_id='g', member_id=a.member_id)).error_code == 0
        [described] = await env.describe(['g'])
        assert (described.group_state, described.members) == ('Empty', [])
    run(scenario)


def test_static_member_rejoins_without_a_rebalance_and_fences_its_old_id() -> None:
    async def scenario(env: Env) -> None:
        first = await env.join(version=5, instance='inst')
        assert (first.error_code, first.generation_id) == (0, 1)
        assert first.member_id.startswith('inst-')
        await env.sync(first.member_id, 1, {first.member_id: b'X'}, instance='inst')
        again = await env.join(version=9, instance='inst')
        assert (again.error_code, again.generation_id, again.leader, again.skip_assignment) == (
            0, 1, again.member_id, True)
        assert again.member_id != first.member_id
        assert member_rows(again) == [(again.member_id, 'inst', b'm1')]
        assert await env.heartbeat(first.member_id, 1, instance='inst') == 82   # FENCED_INSTANCE_ID
        assert (await env.sync(again.member_id, 1, instance='inst')).assignment == b'X'
        assert await env.heartbeat(again.member_id, 1, instance='inst') == 0
        [described] = await env.describe(['g'], version=4)
        assert [(m.member_id, m.group_instance_id) for m in described.members] == [(again.member_id, 'inst')]
    run(scenario)


# -- unit tests: offsets ----------------------------------------------------------------------------


def test_simple_commit_and_fetch_with_kip232_fields() -> None:
    async def scenario(env: Env) -> None:
        errors = await env.commit({('t', 0): (5, 3, 'm', 7, 1234), ('t', 1): (9, -1, None)}, group='simple')
        assert errors == {('t', 0): 0, ('t', 1): 0}
        v8 = await env.fetch('simple')
        [group] = v8.groups
        assert (group.group_id, group.error_code, [t.name for t in group.topics]) == ('simple', 0, ['t'])
        assert offset_rows(group.topics[0].partitions) == [
            (0, 5, 3, 'm', 0, 7, 1234), (1, 9, -1, '', 0, -1, -1)]
        v7 = await env.fetch('simple', {'t': [0, 2], 'u': [0]}, version=7)
        assert v7.error_code == 0
        assert [(t.name, offset_rows(t.partitions)) for t in v7.topics] == [
            ('t', [(0, 5, 3, 'm', 0, 7, 1234), (2, -1, -1, '', 0, -1, -1)]),
            ('u', [(0, -1, -1, '', 0, -1, -1)])]
        v5 = await env.fetch('simple', {'t': [0]}, version=5)    # not flexible: no KIP-232 tags on the wire
        assert offset_rows(v5.topics[0].partitions) == [(0, 5, 3, 'm', 0, -1, -1)]
        v1 = await env.fetch('simple', {'t': [0]}, version=1)    # no leader epoch before v5
        assert offset_rows(v1.topics[0].partitions) == [(0, 5, -1, 'm', 0, -1, -1)]
        unknown = await env.fetch('nobody')
        assert [(g.group_id, g.error_code, g.topics) for g in unknown.groups] == [('nobody', 0, [])]
        listed = await env.call(16, 4)
        assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == [
            ('simple', '', 'Empty')]
    run(scenario)


def test_commit_checks_of_kafka_and_kip232() -> None:
    async def scenario(env: Env) -> None:
        assert await env.commit({('t', 0): (10, 2, '', 7)}) == {('t', 0): 0}
        assert await env.commit({('t', 0): (11, 3, '', 6)}) == {('t', 0): 10001}   # INVALID_PARTITION_EPOCH
        assert await env.commit({('t', 0): (11, 4, '', 7)}) == {('t', 0): 75}      # UNKNOWN_LEADER_EPOCH
        assert await env.commit({('t', 0): (11, 1, '', 7)}) == {('t', 0): 10008}   # INVALID_LEADER_EPOCH
        assert await env.commit({('t', 2): (1, -1, ''), ('nope', 0): (1, -1, '')}) == {
            ('t', 2): 3, ('nope', 0): 3}                                          # UNKNOWN_TOPIC_OR_PARTITION
        assert await env.commit({('t', 0): (11, -1, 'x' * 4097)}) == {('t', 0): 12}  # METADATA_TOO_LARGE
        [group] = (await env.fetch(topics={'t': [0]})).groups
        assert offset_rows(group.topics[0].partitions) == [(0, 10, 2, '', 0, 7, -1)]
        # A stock commit (no partition epoch) is checked like Apache Kafka does: no epoch checks, so a
        # rewind to an earlier offset and epoch is stored.
        assert await env.commit({('t', 0): (4, 1, 'rewind')}) == {('t', 0): 0}
        [group] = (await env.fetch(topics={'t': [0]})).groups
        assert offset_rows(group.topics[0].partitions) == [(0, 4, 1, 'rewind', 0, -1, -1)]
        assert await env.commit({('t', 0): (12, -1, '')}) == {('t', 0): 0}         # no epochs: no checks
        assert await env.commit({('t', 0): (13, 2, '', 7)}) == {('t', 0): 0}
    run(scenario)


def test_commit_generation_rules() -> None:
    async def scenario(env: Env) -> None:
        assert await env.commit({('t', 0): (1, -1, '')}, generation=1, member_id='m') == {('t', 0): 22}
        assert await env.commit({('t', 0): (1, -1, '')}, version=9, generation=1, member_id='m') == {
            ('t', 0): 69}                                                         # GROUP_ID_NOT_FOUND
        assert env.coordinator.groups == {}
        [a] = await env.stable_group()
        assert await env.commit({('t', 0): (1, -1, '')}, generation=1, member_id=a.member_id) == {('t', 0): 0}
        stale = await env.commit({('t', 0): (2, -1, '')}, generation=0, member_id=a.member_id)
        assert stale == {('t', 0): 22}
        assert await env.commit({('t', 0): (2, -1, ''), ('nope', 0): (1, -1, '')}, generation=1,
                                member_id='c-x') == {('t', 0): 25, ('nope', 0): 3}
        assert await env.commit({('t', 0): (2, -1, '')}) == {('t', 0): 25}  # a simple commit to a live group
        [group] = (await env.fetch()).groups
        assert offset_rows(group.topics[0].partitions) == [(0, 1, -1, '', 0, -1, -1)]
    run(scenario)


def test_deleting_a_topic_removes_its_committed_offsets() -> None:
    async def scenario(env: Env) -> None:
        assert await env.commit({('t', 0): (1, -1, ''), ('t', 1): (2, -1, ''), ('u', 0): (3, -1, '')}) == {
            ('t', 0): 0, ('t', 1): 0, ('u', 0): 0}
        env.coordinator.forget_topic('t')
        [group] = (await env.fetch()).groups
        assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                for t in group.topics] == [('u', [(0, 3)])]
        [group] = (await env.fetch(topics={'t': [0]})).groups
        assert offset_rows(group.topics[0].partitions) == [(0, -1, -1, '', 0, -1, -1)]
    run(scenario)


# -- unit tests: admin APIs and coordinator placement ------------------------------------------------


def test_describe_list_and_delete_groups() -> None:
    async def scenario(env: Env) -> None:
        [a] = await env.stable_group()
        assert await env.commit({('u', 0): (3, -1, '')}, group='s') == {('u', 0): 0}
        g, missing = await env.describe(['g', 'missing'], version=3, operations=True)
        assert (g.group_state, g.protocol_data, g.authorized_operations) == ('Stable', 'range', {3, 6, 8, 10, 11})
        assert (missing.error_code, missing.group_state, missing.members, missing.protocol_type) == (
            0, 'Dead', [], '')
        [missing] = await env.describe(['missing'], version=6)
        assert (missing.error_code, missing.error_message) == (69, 'Group missing not found.')
        [g] = await env.describe(['g'], version=6)
        assert (g.error_code, g.error_message, g.authorized_operations) == (0, None, None)
        listed = await env.call(16, 0)
        assert [(x.group_id, x.protocol_type) for x in listed.groups] == [('g', 'consumer'), ('s', '')]
        stable = await env.call(16, 4, states_filter=['stable'])
        assert [(x.group_id, x.group_state) for x in stable.groups] == [('g', 'Stable')]
        assert (await env.call(16, 5, types_filter=['consumer'])).groups == []
        classic = await env.call(16, 5, types_filter=['Classic'])
        assert [(x.group_id, x.group_type) for x in classic.groups] == [('g', 'classic'), ('s', 'classic')]
        assert (await env.call(16, 5, broker=1)).groups == []
        deleted = await env.call(42, 2, groups_names=['g', 's', 'missing'])
        assert [(r.group_id, r.error_code) for r in deleted.results] == [('g', 68), ('s', 0), ('missing', 69)]
        assert (await env.fetch('s')).groups[0].topics == []
        assert [x.group_id for x in (await env.call(16, 3)).groups] == ['g']
        assert await env.heartbeat(a.member_id, 1) == 0
    run(scenario)


def test_requests_at_a_broker_that_is_not_the_coordinator_get_not_coordinator() -> None:
    async def scenario(env: Env) -> None:
        [a] = await env.stable_group()
        env.cluster.coordinator = 1
        assert (await env.join(member_id=a.member_id)).error_code == 16
        assert (await env.sync(a.member_id, 1)).error_code == 16
        assert await env.heartbeat(a.member_id, 1) == 16
        cls = REQUESTS[ApiKey.LeaveGroup].MemberIdentity
        assert (await env.call(13, 3, group_id='g', members=[cls(member_id=a.member_id)])).error_code == 16
        assert await env.commit({('t', 0): (1, -1, ''), ('nope', 0): (1, -1, '')}) == {
            ('t', 0): 16, ('nope', 0): 3}
        assert (await env.fetch(topics={'t': [0]}, version=7)).error_code == 16
        v1 = await env.fetch(topics={'t': [0, 1]}, version=1)
        assert [(p.partition_index, p.error_code) for p in v1.topics[0].partitions] == [(0, 16), (1, 16)]
        assert [(g.group_id, g.error_code) for g in (await env.fetch()).groups] == [('g', 16)]
        assert [(g.group_id, g.error_code) for g in await env.describe(['g'])] == [('g', 16)]
        assert [(r.error_code) for r in (await env.call(42, 1, groups_names=['g'])).results] == [16]
        assert (await env.call(16, 4)).groups == []
        assert await env.heartbeat(a.member_id, 1, broker=1) == 0
    run(scenario)


def test_a_moved_group_gives_its_members_a_fresh_session_timeout() -> None:
    async def scenario(env: Env) -> None:
        [a] = await env.stable_group(session=300)
        await asyncio.sleep(0.2)
        env.cluster.coordinator = 1           # the coordinating broker stopped
        await env.describe(['g'], broker=1)   # the new coordinator takes the group over
        await asyncio.sleep(0.2)              # past the first session deadline
        [described] = await env.describe(['g'], broker=1)
        assert (described.group_state, [m.member_id for m in described.members]) == ('Stable', [a.member_id])
        await asyncio.sleep(0.2)              # past the session restarted at the move
        [described] = await env.describe(['g'], broker=1)
        assert (described.group_state, described.members) == ('Empty', [])
    run(scenario)


# -- real clients over sockets ----------------------------------------------------------------------

WAIT_S = 30.0
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
                    consumer.poll(timeout_ms=50)
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
        wait_until(lambda: seen.extend(r.offset for rs in consumer.poll(timeout_ms=100).values() for r in rs)
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
        records = wait_until(lambda: successor.poll(timeout_ms=100).get(tp), 'records after the commit')
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
        seen: list[tuple[int, int]] = []

        def poll() -> bool:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen.append((message.partition(), message.offset()))
            return len(seen) == 9
        wait_until(poll, 'nine records')
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


def test_coordinator_moves_when_its_broker_stops_and_the_group_carries_on() -> None:
    with ReferenceCluster(brokers=3, broker_config=SHORT_SESSIONS) as cluster:
        cluster.create_topic('moving', partitions=3, replication_factor=3)
        group = 'g-moving'
        consumer = ConsumerThread(cluster.bootstrap_servers, 'moving', group, enable_auto_commit=False,
                                  session_timeout_ms=2000)
        try:
            wait_until(lambda: consumer.assignment == {0, 1, 2}, 'the member')
            brokers = cluster.brokers()
            before = find_coordinator(brokers[0], group)
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
            try:
                [member] = admin.describe_groups([group])[group]['members']
            finally:
                admin.close()
            heartbeats: list[float] = []   # when the member's heartbeats reached a live broker
            cluster.control(ApiKey.Heartbeat, lambda request: heartbeats.append(time.monotonic()) if
                            request.request.member_id == member['member_id'] else None, keep=True)
            cluster.stop_broker(before)
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
        assert cluster.internal_errors == []


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
