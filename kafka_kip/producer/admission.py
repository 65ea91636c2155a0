"""Which batches of offset records may go to which leader, and how (KIP-391 negotiation, checked mode).

The sender thread asks :meth:`OffsetAdmission.admit` about the head batch of a partition right before it
would drain it to the partition's leader:

- leader advertises ``kip.391``: send it with ``use_offset`` (the broker judges the offsets);
- otherwise, ``offset_mode='broker'`` (the default): refuse it with ``UnsupportedFeatureError`` — a stock
  broker ignores the unknown ``use_offset`` tag and would write the records at offsets of its choosing;
- otherwise, ``offset_mode='checked'``: send it as an ordinary produce only if its first offset equals the
  partition's log end offset as this producer knows it; refuse it with ``InvalidProduceOffsetError``
  if it does not (a stock broker cannot leave a gap or overwrite). The log end offset is learnt from the
  broker once (ListOffsets, confirmed by a Fetch's high watermark) and then followed from the producer's
  own acknowledged writes; it is read again after any failed write.

Everything here runs on the sender thread.
"""
from __future__ import annotations

import enum
import logging
import math
import time
from typing import Any

from kafka.structs import TopicPartition

import kafka_kip.errors as Errors
from kafka_kip.errors import InvalidProduceOffsetError, UnsupportedFeatureError
from kafka_kip.policies import CHECKED
from kafka_kip.producer.batch import OffsetProducerBatch
from kafka_kip.protocol import requests
from kafka_kip.protocol.constants import LATEST_TIMESTAMP, READ_UNCOMMITTED, UNKNOWN_EPOCH
from kafka_kip.protocol.features import KIP_391, supports

log = logging.getLogger(__name__)

_FETCH_MAX_WAIT_MS = 50  # min_bytes=0 answers at once; Tansu answers max_wait_ms=0 with no partitions at all


class Admit(enum.Enum):
    SEND = 'send'  # drain it now (batch.use_offset says how)
    WAIT = 'wait'  # not yet: the partition is muted until its log end offset is known


class OffsetAdmission:
    """The admission decisions of one producer, plus checked mode's view of each partition's log end.

    ``muted`` is the accumulator's set of partitions not to drain; a partition waiting for its log end
    offset is kept in it, so the sender neither drains nor busy-polls it meanwhile.
    """

    def __init__(self, client: Any, mode: str, muted: set[TopicPartition], retry_backoff_ms: float) -> None:
        self._client = client
        self._mode = mode
        self._muted = muted
        self._retry_backoff_ms = retry_backoff_ms
        self._log_ends: dict[TopicPartition, int] = {}
        self._retry_at_ms: dict[TopicPartition, float] = {}  # failed lookups, muted until then

    def admit(self, batch: OffsetProducerBatch, node_id: int) -> Admit | Errors.KafkaError:
        """SEND (setting ``batch.use_offset``), WAIT, or the error to fail ``batch`` with, unsent."""
        if supports(self._client, node_id, KIP_391):
            batch.use_offset = True
            return Admit.SEND
        if self._mode != CHECKED:
            return UnsupportedFeatureError(KIP_391, node_id)
        log_end = self._log_ends.get(batch.topic_partition)
        if log_end is None:
            self._look_up(batch.topic_partition, node_id)
            return Admit.WAIT
        if batch.base_offset == log_end:
            batch.use_offset = False
            return Admit.SEND
        return _checked_refusal(batch, log_end)

    def written(self, batch: OffsetProducerBatch, base_offset: int) -> None:
        """``batch`` was acknowledged at ``base_offset`` (-1: not reported): checked mode's log end follows."""
        if self._mode != CHECKED:
            return
        if base_offset < 0:
            self.forget(batch.topic_partition)
        else:
            self._log_ends[batch.topic_partition] = base_offset + batch.record_count

    def forget(self, tp: TopicPartition) -> None:
        """A write to ``tp`` failed: it may or may not have landed, so read the log end again."""
        self._log_ends.pop(tp, None)

    def forget_all(self) -> None:
        """Read every partition's log end again before writing to it (others may have written meanwhile)."""
        self._log_ends.clear()

    @property
    def next_retry_ms(self) -> float:
        """When (monotonic ms) the earliest backed-off lookup may be retried; inf if none."""
        return min(self._retry_at_ms.values(), default=math.inf)

    def release_due(self, now: float) -> None:
        """Unmute the partitions whose lookup backoff ended by ``now`` (monotonic seconds)."""
        for tp, retry_at_ms in list(self._retry_at_ms.items()):
            if retry_at_ms <= now * 1000:
                del self._retry_at_ms[tp]
                self._muted.discard(tp)

    # -- checked mode: learning a partition's log end offset from a stock broker --------------------

    def _look_up(self, tp: TopicPartition, node_id: int) -> None:
        self._muted.add(tp)
        request = requests.list_offsets([(tp, UNKNOWN_EPOCH)], LATEST_TIMESTAMP, READ_UNCOMMITTED, timeout_ms=0,
                                        min_version=1, max_version=None)
        (self._client.send(node_id, request)
            .add_callback(self._listed, tp, node_id)
            .add_errback(self._lookup_failed, tp))

    def _listed(self, tp: TopicPartition, node_id: int, response: Any) -> None:
        listed = _the_partition(response.topics)
        if listed is None or listed.error_code:
            return self._lookup_failed(tp, _answer_error(listed))
        # ListOffsets(latest) is the high watermark on Apache Kafka; Tansu 0.6 answers its last batch's base
        # offset + 1 instead. A Fetch from there reports the high watermark on both (the log end once
        # acknowledged writes are replicated).
        request = requests.fetch({tp.topic: [(tp.partition, UNKNOWN_EPOCH, listed.offset, UNKNOWN_EPOCH)]},
                                 max_wait_ms=_FETCH_MAX_WAIT_MS, max_bytes=1, partition_max_bytes=1,
                                 isolation_level=READ_UNCOMMITTED, min_bytes=0, min_version=None)
        (self._client.send(node_id, request)
            .add_callback(self._fetched, tp)
            .add_errback(self._lookup_failed, tp))

    def _fetched(self, tp: TopicPartition, response: Any) -> None:
        fetched = _the_partition(response.responses)
        if fetched is None or fetched.error_code:
            return self._lookup_failed(tp, _answer_error(fetched))
        self._log_ends[tp] = fetched.high_watermark
        self._muted.discard(tp)

    def _lookup_failed(self, tp: TopicPartition, error: BaseException) -> None:
        log.warning('Could not read the log end offset of %s (checked offset mode), retrying in %s ms: %s',
                    tp, self._retry_backoff_ms, error)
        self._client.cluster.request_update()
        self._retry_at_ms[tp] = time.monotonic() * 1000 + self._retry_backoff_ms


def _the_partition(topics: list[Any]) -> Any:
    """The one partition of a one-partition ListOffsets / Fetch response, or None if it is missing."""
    return topics[0].partitions[0] if topics and topics[0].partitions else None


def _answer_error(partition: Any) -> Errors.KafkaError:
    if partition is None:
        return Errors.KafkaError('the broker answered without the partition')
    return Errors.for_code(partition.error_code)()


def _checked_refusal(batch: OffsetProducerBatch, log_end: int) -> InvalidProduceOffsetError:
    first, last = batch.base_offset, batch.next_offset - 1
    if first > log_end:
        why = ('the broker does not implement KIP-391, and a stock broker cannot leave a gap: it appends '
               f'at its log end offset {log_end}')
    else:
        last = min(last, log_end - 1)
        why = f'offsets below the log end offset {log_end} are already written'
    return InvalidProduceOffsetError(
        log_end, f'cannot write records at offsets {first}-{last} of {batch.topic_partition} (checked offset '
                 f'mode): {why}')


__all__ = ['Admit', 'OffsetAdmission']
