"""Shared by the KIP-848 client tests on real sockets."""
from __future__ import annotations

from typing import Any

from kafka.errors import FencedMemberEpochError

from kafka_kip_reference.broker.control import Answer, ControlledRequest

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
