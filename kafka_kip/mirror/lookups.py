"""Single requests with retries: what a partition task (or a blocking caller, through ``net.run``) asks a cluster."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kafka.net.selector import NetworkSelector
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.mirror import wire
from kafka_kip.mirror.client import ClusterClient


def answer_code(answer: Any) -> int:
    return getattr(answer, 'error_code', wire.NONE)


class Lookups:
    """Requests sent until a usable answer, on ``net`` (retries every ``retry_backoff_ms`` up to ``timeout_ms``)."""

    def __init__(self, net: NetworkSelector, retry_backoff_ms: int, timeout_ms: int) -> None:
        self._net = net
        self._backoff = retry_backoff_ms / 1000
        self._timeout = timeout_ms / 1000

    async def high_watermark(self, client: ClusterClient, tp: TopicPartition) -> int:
        """The partition's high watermark (what is durably there)."""
        return await self.end_offset(client, tp, read_committed=False)

    async def end_offset(self, client: ClusterClient, tp: TopicPartition, *, read_committed: bool,
                         leader: Callable[[], tuple[int, int]] | None = None) -> int:
        """The partition's end: its last stable offset (``read_committed``) or high watermark.

        ListOffsets(latest) says so on Apache Kafka, but Tansu 0.6 answers its last batch's base offset + 1;
        a Fetch from there reports both ends on both.
        """
        leader = leader or (lambda: client.leader(tp))
        isolation = wire.READ_COMMITTED if read_committed else wire.READ_UNCOMMITTED
        listed = await self.listed_offset(client, tp, wire.LATEST, isolation, leader)
        fetched = await self.ask(
            client, lambda leader_epoch: wire.fetch(
                {tp.topic: [(tp.partition, leader_epoch, listed, -1)]}, max_wait_ms=wire.SINGLE_READ_MAX_WAIT_MS,
                max_bytes=1, partition_max_bytes=1, isolation_level=isolation, min_bytes=0),
            leader, lambda r: wire.only_partition(r.responses))
        if read_committed and fetched.last_stable_offset >= 0:
            return fetched.last_stable_offset
        return fetched.high_watermark

    async def listed_offset(self, client: ClusterClient, tp: TopicPartition, timestamp: int,
                            isolation_level: int = wire.READ_UNCOMMITTED,
                            leader: Callable[[], tuple[int, int]] | None = None) -> int:
        """ListOffsets of ``tp`` at ``timestamp`` (``wire.LATEST`` / ``wire.EARLIEST`` or a time)."""
        answer = await self.ask(
            client, lambda leader_epoch: wire.list_offsets([(tp, leader_epoch)], timestamp, isolation_level),
            leader or (lambda: client.leader(tp)), lambda r: wire.only_partition(r.topics))
        return answer.offset

    async def ask(self, client: ClusterClient, build: Callable[..., Any], leader: Callable[[], tuple[int, int]],
                  pick: Callable[[Any], Any], tolerate: tuple[int, ...] = ()) -> Any:
        """Send ``build(leader_epoch)`` to ``leader()``'s node until it answers without a retriable error.

        ``pick`` selects the part of the response whose ``error_code`` counts (None: the broker left it
        out, retried). Raises the Kafka error for a non-retriable code, or KafkaTimeoutError after
        ``recovery_timeout_ms``.
        """
        deadline = time.monotonic() + self._timeout
        while True:
            node, epoch = leader()
            failure: Any = None
            if node is not None and node != -1:
                try:
                    answer = pick(await client.send(build(epoch), node))
                except Errors.KafkaError as exc:
                    if not exc.retriable:
                        raise
                    failure = exc
                else:
                    if answer is None:
                        failure = 'an answer without the partition'
                    elif answer_code(answer) in (wire.NONE, *tolerate):
                        return answer
                    elif wire.is_retriable(answer_code(answer)):
                        failure = wire.error_name(answer_code(answer))
                    else:
                        code = answer_code(answer)
                        raise Errors.for_code(code)(f'{client.name} cluster answered {wire.error_name(code)}')
            client.cluster.request_update()
            if time.monotonic() >= deadline:
                raise Errors.KafkaTimeoutError(f'{client.name} cluster: no usable answer ({failure})')
            await self._net.sleep(self._backoff)
