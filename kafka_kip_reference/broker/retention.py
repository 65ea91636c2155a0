"""Log retention as Kafka's LogManager runs it: a periodic check deleting whole old segments.

Every ``log.retention.check.interval.ms`` (Kafka's default 300000; the first check ``log.initial.task.delay.ms``
after the cluster starts: 300000 by default here, Kafka's 30000 would delete a test's records with historical
timestamps half a minute in) each partition of a topic whose ``cleanup.policy`` includes ``delete`` loses, on
its leader and the replicas copying it, its oldest segments (:mod:`kafka_kip_reference.broker.log`: runs of whole
batches cut at ``segment.bytes`` / ``segment.ms``) while the log exceeds ``retention.bytes`` by at least a segment's
size, then those whose newest record is older than ``retention.ms``. The log start offset becomes the first kept
segment's base offset (the log end offset when every segment went), so a consumer below it gets
OFFSET_OUT_OF_RANGE and its reset policy, as on Kafka. Compacted topics (``cleanup.policy=compact``) lose nothing
by time or size. The topic configs are read at each check, so AlterConfigs changes take effect at the next one.
"""
from __future__ import annotations

import asyncio

from kafka_kip_reference.broker.model import NO_LEADER
from kafka_kip_reference.broker.state import ClusterState


def enforce_retention(state: ClusterState, now_ms: int) -> None:
    """One retention check of every partition with a leader (Kafka's ``LogManager.cleanupLogs``)."""
    for topic in state.topics.values():
        for partition in topic.partitions:
            if partition.leader == NO_LEADER or partition.deleted:
                continue
            leader = partition.leader  # its configs: a broker's own dynamic configs apply to its logs
            if 'delete' not in topic.config('cleanup.policy', leader).split(','):
                continue
            retention_ms = int(topic.config('retention.ms', leader))
            retention_bytes = int(topic.config('retention.bytes', leader))
            if retention_ms < 0 and retention_bytes < 0:
                continue
            start = partition.logs[partition.leader].retention_start_offset(now_ms, retention_ms, retention_bytes)
            if start is not None:
                for replica in {partition.leader, *partition.isr}:
                    partition.logs[replica].advance_log_start(start)


class RetentionTask:
    """Runs :func:`enforce_retention` on the cluster's loop at Kafka's schedule (``start``/``close``)."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self._timer is None:
            self._schedule(self._state.config.int('log.initial.task.delay.ms'))

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self, delay_ms: int) -> None:
        self._timer = self._state.loop.call_later(delay_ms / 1000, self._check)

    def _check(self) -> None:
        try:
            enforce_retention(self._state, self._state.now_ms())
        except Exception as exc:  # a broker bug: recorded for the tests, the checks go on
            self._state.internal_errors.append(exc)
        self._schedule(self._state.config.int('log.retention.check.interval.ms'))
