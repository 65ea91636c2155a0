"""The classic group coordinator's membership, through its handlers (tests/reference/group_harness.py):
FindCoordinator, join/sync/heartbeat, rebalances and their timeouts, static members, leaving, the admin APIs
(describe, list, delete) and coordinator placement.
"""
from __future__ import annotations

import asyncio
import uuid

import pytest
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.messages import REQUESTS
from tests.reference.group_harness import Env, member_rows, run

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
