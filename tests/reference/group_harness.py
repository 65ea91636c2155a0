"""Drives the reference cluster's classic group coordinator (kafka_kip_reference.broker.groups / offsets) through
its handlers with wire-encoded requests, decoding every response from bytes; a fake cluster state stands in
for topics and brokers, and virtual time for the clock.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.messages import REQUESTS, RESPONSES
from kafka_kip_reference.broker.apis import HANDLERS
from kafka_kip_reference.broker.context import RequestContext, Session
from kafka_kip_reference.broker.groups import GroupCoordinator
from kafka_kip_reference.fixtures.virtual_time import run_virtual


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
