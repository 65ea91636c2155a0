"""Requests with retries: what a partition task (or a blocking caller, through ``net.run``) asks a cluster.

Per-partition questions (offsets, one-off fetches, epoch ends) go through a
:class:`~kafka_kip.mirror.coalesce.Coalescer`, so the questions of many partitions asked in one turn of the
event loop travel in one request per broker; other requests are sent as they are.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from kafka.future import Future
from kafka.net.selector import NetworkSelector
from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.mirror import answers
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.coalesce import Coalescer, EpochEndKind, FetchKind, Kind, ListOffsetsKind
from kafka_kip.protocol import constants
from kafka_kip.protocol.retry import RetryPolicy

T = TypeVar('T')
Leader = Callable[[], tuple[int, int]]
#: A probe fetch reads no record: it only wants the partition's ends.
_PROBE = 1
_PROBES_MAX_BYTES = 2**20
#: every failure that reaches the retry decision is retriable (the others were raised): only time decides
_NO_USABLE_ANSWER = Errors.KafkaTimeoutError('no usable answer')


def answer_code(answer: Any) -> int:
    return getattr(answer, 'error_code', constants.NONE)


class Lookups:
    """Requests sent until a usable answer, on ``net`` (retries every ``retry_backoff_ms`` up to ``timeout_ms``)."""

    def __init__(self, net: NetworkSelector, retry_backoff_ms: int, timeout_ms: int) -> None:
        self._net = net
        backoff_s = retry_backoff_ms / 1000
        self._retry = RetryPolicy(timeout_s=timeout_ms / 1000, backoff_s=backoff_s, max_backoff_s=backoff_s)
        self.coalescer = Coalescer(net)

    async def high_watermark(self, client: ClusterClient, tp: TopicPartition) -> int:
        """The partition's high watermark (what is durably there)."""
        return await self.end_offset(client, tp, read_committed=False)

    async def end_offset(self, client: ClusterClient, tp: TopicPartition, *, read_committed: bool,
                         leader: Leader | None = None) -> int:
        """The partition's end: its last stable offset (``read_committed``) or high watermark.

        ListOffsets(latest) says so on Apache Kafka, but Tansu 0.6 answers its last batch's base offset + 1;
        a Fetch from there reports both ends on both.
        """
        leader = leader or (lambda: client.leader(tp))
        isolation = constants.READ_COMMITTED if read_committed else constants.READ_UNCOMMITTED
        listed = await self.listed_offset(client, tp, constants.LATEST_TIMESTAMP, isolation, leader)
        fetched = await self.ask_partition(client, tp, FetchKind(isolation, _PROBE, _PROBES_MAX_BYTES), leader,
                                           listed)
        if read_committed and fetched.last_stable_offset >= 0:
            return fetched.last_stable_offset
        return fetched.high_watermark

    async def listed_offset(self, client: ClusterClient, tp: TopicPartition, timestamp: int,
                            isolation_level: int = constants.READ_UNCOMMITTED, leader: Leader | None = None) -> int:
        """ListOffsets of ``tp`` at ``timestamp`` (``constants.LATEST_TIMESTAMP`` / ``constants.EARLIEST_TIMESTAMP`` or a time)."""
        answer = await self.ask_partition(client, tp, ListOffsetsKind(timestamp, isolation_level),
                                          leader or (lambda: client.leader(tp)))
        return answer.offset

    async def epoch_end(self, client: ClusterClient, tp: TopicPartition, epoch: int, leader: Leader) -> Any:
        """Where ``epoch`` ends in the leader's log (OffsetForLeaderEpoch, fenced by the current leader epoch)."""
        return await self.ask_partition(client, tp, EpochEndKind(), leader, epoch)

    async def ask_partition(self, client: ClusterClient, tp: TopicPartition, kind: Kind, leader: Leader,
                            *values: Any, tolerate: tuple[int, ...] = (), alone: bool = False) -> Any:
        """The answer for ``tp`` to a question of ``kind`` (entry ``(tp, leader_epoch, *values)``), asked
        together with other partitions' (see :mod:`kafka_kip.mirror.coalesce`; ``alone``: in a request of
        its own); retried as :meth:`ask`."""
        return await self.ask(client, lambda node, epoch: self.coalescer.ask(client, node, kind, (tp, epoch, *values),
                                                                             alone=alone),
                              leader, lambda answer: answer, tolerate, send_to=True)

    async def ask(self, client: ClusterClient, build: Callable[..., Any], leader: Leader,
                  pick: Callable[[Any], Any], tolerate: tuple[int, ...] = (), *, send_to: bool = False) -> Any:
        """Send ``build(leader_epoch)`` to ``leader()``'s node until it answers without a retriable error.

        ``pick`` selects the part of the response whose ``error_code`` counts (None: the broker left it
        out, retried). Raises the Kafka error for a non-retriable code, or KafkaTimeoutError after
        ``recovery_timeout_ms``. With ``send_to``, ``build(node, leader_epoch)`` sends itself (a future).
        """
        attempts = self._retry.begin(f'{client.name} cluster')
        while True:
            node, epoch = leader()
            failure: Any = None
            if node is not None and node != -1:
                try:
                    sent = build(node, epoch) if send_to else client.send(build(epoch), node)
                    answer = pick(await sent)
                except Errors.KafkaError as exc:
                    if not exc.retriable:
                        raise
                    failure = exc
                else:
                    if answer is None:
                        failure = 'an answer without the partition'
                    elif answer_code(answer) in (constants.NONE, *tolerate):
                        return answer
                    elif answers.is_retriable(answer_code(answer)):
                        failure = answers.error_name(answer_code(answer))
                    else:
                        code = answer_code(answer)
                        raise Errors.for_code(code)(f'{client.name} cluster answered {answers.error_name(code)}')
            client.cluster.request_update()
            if not attempts.may_retry(_NO_USABLE_ANSWER):
                raise Errors.KafkaTimeoutError(f'{client.name} cluster: no usable answer ({failure})')
            await self._net.sleep(attempts.backoff_s())

    async def gather(self, awaitables: Iterable[Awaitable[T]]) -> list[T]:
        """Run ``awaitables`` concurrently on the loop; their results in order (the first failure raises)."""
        futures: list[Future] = [self._net.call_soon_with_future(a) for a in awaitables]
        return [await future for future in futures]
