"""The classic group coordinator's offsets, through its handlers (tests/reference/group_harness.py): commit and
fetch with KIP-232's fields, Kafka's and KIP-232's checks, generations, offsets of deleted topics.
"""
from __future__ import annotations

from tests.reference.group_harness import Env, offset_rows, run

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
