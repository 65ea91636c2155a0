"""Shared by the KIP-848 client tests on real sockets."""
from __future__ import annotations

from typing import Any

from kafka.errors import FencedMemberEpochError

from kafka_kip_reference.broker.apis.consumer_group_heartbeat import heartbeat_request
from kafka_kip_reference.broker.consumer_groups import ConsumerGroup, MemberState
from kafka_kip_reference.broker.control import Answer, ControlledRequest, Drop

#: KIP-848 members learn of partitions released by others at their next heartbeat (Kafka's default is 5000 ms): the
#: reference cluster as the Apache Kafka test clusters are configured (kafka_kip_reference.external.apache_kafka), 500 ms.
FAST_CONSUMER_GROUP_HEARTBEATS = {'group.consumer.heartbeat.interval.ms': 500}


class FenceOnceAfterCommits:
    """A ``control()`` function for ConsumerGroupHeartbeat: answers FENCED_MEMBER_EPOCH to the first heartbeat with an
    epoch > 0 once the group's committed offsets sum to ``committed_total``; ``joins`` holds the member id of every
    heartbeat with epoch 0 (a join or a rejoin), ``fired`` how often it fenced."""

    def __init__(self, cluster: Any, committed_total: int) -> None:
        self.cluster, self.committed_total = cluster, committed_total
        self.joins: list[str] = []
        self.fired = 0

    def __call__(self, request: ControlledRequest) -> Answer | None:
        heartbeat = request.request
        if heartbeat.member_epoch == 0:
            self.joins.append(heartbeat.member_id)
        group = self.cluster.groups.groups.get(heartbeat.group_id)
        committed = group.offsets.all() if group is not None else {}
        if (heartbeat.member_epoch > 0 and self.fired == 0
                and sum(o.offset for ps in committed.values() for o in ps.values()) == self.committed_total):
            self.fired += 1
            return Answer(request.response(throttle_time_ms=0, error_code=FencedMemberEpochError.errno,
                                           error_message='fenced by the test', member_id=None, member_epoch=-1,
                                           heartbeat_interval_ms=0))
        return None


class LoseRevocationAck:
    """A ``control()`` function for ConsumerGroupHeartbeat: the first heartbeat that acknowledges a revocation (its
    member was waiting for it, and no longer owns the revoked partitions) is processed, moving the member to its new
    epoch, and its response lost (the connection closed). ``epochs`` holds (epoch before, epoch after) of that
    heartbeat, ``sent_after`` the epochs its member heartbeats with afterwards."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.epochs: list[tuple[int, int]] = []
        self.sent_after: list[int] = []
        self._member: str | None = None

    def __call__(self, request: ControlledRequest) -> Drop | None:
        heartbeat = request.request
        if self._member is not None and heartbeat.member_id == self._member:
            self.sent_after.append(heartbeat.member_epoch)
        group = self.cluster.groups.groups.get(heartbeat.group_id)
        member = group.members.get(heartbeat.member_id) if isinstance(group, ConsumerGroup) else None
        if (self.epochs or member is None or member.state is not MemberState.UNREVOKED_PARTITIONS
                or heartbeat.topic_partitions is None):
            return None
        owned = {(tp.topic_id, p) for tp in heartbeat.topic_partitions for p in tp.partitions}
        if owned & {(t, p) for t, ps in member.pending_revocation.items() for p in ps}:
            return None  # not yet revoked
        before = member.member_epoch
        result = self.cluster.groups.consumer.heartbeat(heartbeat.group_id, heartbeat_request(
            heartbeat, request.api_version, request.client_id), request.broker_id)
        self.epochs.append((before, result.member_epoch))
        self._member = heartbeat.member_id
        return Drop()
