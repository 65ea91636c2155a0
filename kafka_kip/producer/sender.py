"""The sender thread, extended for batches of records with offsets (KIP-391).

kafka-python's ``Sender`` drains the accumulator into one ProduceRequest per node and completes batches
from the responses. This subclass overrides one method per behaviour:

- ``_produce_request``: batches of offset records for a KIP-391 leader go out in a ProduceRequest with
  ``use_offset`` set (the accumulator never mixes them with other batches in one drain);
- ``_complete_batch``: reads ``log_end_offset`` from the response, follows checked mode's view of the log
  end, and turns INVALID_PRODUCE_OFFSET / CLUSTER_AUTHORIZATION_FAILED into errors that say why;
- ``_dispatch_error``: a batch the broker refused (it appended nothing) is failed, never retried, and the
  producer stays usable: the idempotent producer's sequence is rolled back, and records of the batch at
  or above the reported log end offset are sent again from there (see
  :meth:`~kafka_kip.producer.batch.OffsetProducerBatch.drop_below`).

KIP-253 (:mod:`kafka_kip.producer.partition_counts`): plain batches for a leader that advertises ``kip.253``
go out with the partition count their records were partitioned with (``topic_data[].partition_count``); a
batch refused with INVALID_PARTITION_COUNT is handed back for re-partitioning instead of being retried as is.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from kafka.producer.producer_batch import ProducerBatch
from kafka.producer.sender import Sender

import kafka_kip.errors as Errors
from kafka_kip.errors import InvalidPartitionCountError, InvalidProduceOffsetError
from kafka_kip.policies import BROKER, CHECKED
from kafka_kip.producer.accumulator import OffsetRecordAccumulator
from kafka_kip.producer.admission import OffsetAdmission
from kafka_kip.producer.batch import OffsetProducerBatch
from kafka_kip.producer.partition_counts import EXPLICIT, count_of
from kafka_kip.protocol import requests
from kafka_kip.protocol.features import KIP_253, supports
from kafka_kip.protocol.messages import ProduceResponse

log = logging.getLogger(__name__)

_REFUSALS = (InvalidProduceOffsetError, Errors.ClusterAuthorizationFailedError)
# With acks=0 nothing is acknowledged; kafka-python's stand-in response would claim base offset 0.
_UNACKNOWLEDGED = ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
    error_code=0, base_offset=-1, log_append_time_ms=-1, log_end_offset=-1)


class OffsetSender(Sender):
    """kafka-python's ``Sender`` that also sends batches of records with offsets.

    Takes kafka-python's Sender arguments plus ``offset_mode``. In checked mode every partition gets at
    most one batch in flight (``guarantee_message_order``), as each write is checked against the previous.
    """

    DEFAULT_CONFIG = dict(Sender.DEFAULT_CONFIG, offset_mode=BROKER)

    def __init__(self, client: Any, metadata: Any, accumulator: OffsetRecordAccumulator, **configs: Any) -> None:
        if configs.get('offset_mode') == CHECKED:
            configs['guarantee_message_order'] = True
        super().__init__(client, metadata, accumulator, **configs)
        self._admission = OffsetAdmission(client, self.config['offset_mode'], accumulator.muted,
                                          self.config['retry_backoff_ms'])
        accumulator.admission = self._admission
        accumulator.partition_counts.in_flight = self._topic_in_flight
        accumulator.partition_counts.watch(self._metadata)

    def _topic_in_flight(self, topic: str) -> bool:
        return any(queue for tp, queue in list(self._in_flight_batches.items()) if tp.topic == topic)

    def _produce_request(self, node_id: int, acks: int, timeout: int, batches: list[ProducerBatch]) -> Any:
        first = batches[0]
        if isinstance(first, OffsetProducerBatch):
            if first.use_offset:
                return self._offset_request(acks, timeout, batches)
        elif supports(self._client, node_id, KIP_253):
            return self._counted_request(acks, timeout, batches)
        return super()._produce_request(node_id, acks, timeout, batches)

    def _counted_request(self, acks: int, timeout: int, batches: list[ProducerBatch]) -> Any:
        """KIP-253: each topic carries the partition count its batches were partitioned with (the smallest, should
        one request hold batches of two counts: then the leader refuses them all and they are re-partitioned)."""
        topics: dict[str, list[tuple[int, Any]]] = defaultdict(list)
        counts: dict[str, int] = {}
        for batch in batches:
            tp = batch.topic_partition
            topics[tp.topic].append((tp.partition, batch.records.buffer()))
            count = count_of(batch)
            if count != EXPLICIT:
                counts[tp.topic] = min(counts.get(tp.topic, count), count)
        return requests.produce(topics, acks=acks, timeout_ms=timeout, use_offset=False,
                                transactional_id=self._transactional_id(), partition_counts=counts,
                                max_version=requests.USE_OFFSET_MIN_VERSION)  # kafka-python's own sender stops at v9 too

    def _transactional_id(self) -> str | None:
        manager = self._transaction_manager
        return manager.transactional_id if manager else None

    def _offset_request(self, acks: int, timeout: int, batches: list[ProducerBatch]) -> Any:
        topics = defaultdict(list)
        for batch in batches:
            batch.stamp_base_offset()
            tp = batch.topic_partition
            topics[tp.topic].append((tp.partition, batch.records.buffer()))
        return requests.produce(topics, acks=acks, timeout_ms=timeout, use_offset=True,
                                transactional_id=self._transactional_id(),
                                max_version=requests.USE_OFFSET_MIN_VERSION)  # kafka-python's own sender stops at v9 too

    def _complete_batch(self, batch: ProducerBatch, partition_response: Any) -> None:
        if not isinstance(batch, OffsetProducerBatch):
            if partition_response.error_code == InvalidPartitionCountError.errno:
                return self._repartition_later(batch)
            return super()._complete_batch(batch, partition_response)
        if self.config['acks'] == 0:
            partition_response = _UNACKNOWLEDGED
        error = Errors.for_code(partition_response.error_code)
        if error is Errors.NoError or error is Errors.DuplicateSequenceNumberError:
            batch.produce_future.log_end_offset = partition_response.log_end_offset
            self._admission.written(batch, partition_response.base_offset)
        elif error is InvalidProduceOffsetError:
            refusal = InvalidProduceOffsetError(partition_response.log_end_offset, partition_response.error_message)
            return self._dispatch_error(batch, refusal, partition_response)
        elif error is Errors.ClusterAuthorizationFailedError and batch.use_offset:
            refusal = Errors.ClusterAuthorizationFailedError(
                f'Not authorized to produce records with offsets to {batch.topic_partition}: KIP-391 needs the '
                f'REPLICATOR_WRITE operation on the cluster (broker: {partition_response.error_message})')
            return self._dispatch_error(batch, refusal, partition_response)
        super()._complete_batch(batch, partition_response)

    def _dispatch_error(self, batch: ProducerBatch, exception: BaseException, partition_response: Any) -> None:
        if not isinstance(batch, OffsetProducerBatch):
            return super()._dispatch_error(batch, exception, partition_response)
        self._admission.forget(batch.topic_partition)
        if batch.use_offset and isinstance(exception, _REFUSALS):
            self._refuse(batch, exception)
        else:
            super()._dispatch_error(batch, exception, partition_response)

    def _refuse(self, batch: OffsetProducerBatch, error: Errors.KafkaError) -> None:
        tp = batch.topic_partition
        manager = self._transaction_manager
        if manager is not None:
            if batch.has_sequence and manager.producer_id_and_epoch.match(batch):
                # The broker appended nothing, so it still expects this batch's sequence next; the partition
                # is muted while the batch is in flight, so no later batch has been given a sequence yet.
                manager.set_sequence_number(tp, batch.base_sequence)
            if manager.is_transactional():
                manager.transition_to_abortable_error(error)
        self._maybe_remove_from_inflight_batches(batch)
        log_end = getattr(error, 'log_end_offset', -1)
        if batch.base_offset < log_end < batch.next_offset:
            failed = self._accumulator.requeue_from(batch, log_end, error)
            log.warning('%s: %s refused records at offsets %d-%d below its log end offset %d; sending the '
                        'rest of the batch from there', self, tp, batch.base_offset - failed, log_end - 1, log_end)
        else:
            failed = batch.record_count
            if batch.complete_exceptionally(error, lambda _: error):
                self._accumulator.deallocate(batch)
        if self._sensors:
            self._sensors.record_errors(tp.topic, failed)
        if self.config['guarantee_message_order']:
            self._accumulator.muted.discard(tp)


    def _repartition_later(self, batch: ProducerBatch) -> None:
        """INVALID_PARTITION_COUNT: the leader appended nothing; the batch goes back for re-partitioning (its
        topic is held until then) and its partition's idempotent sequence back to the batch's."""
        tp = batch.topic_partition
        log.info('%s: %s refused a batch partitioned for %d partitions of %s; re-partitioning it', self,
                 tp, count_of(batch), tp.topic)
        manager = self._transaction_manager
        if (manager is not None and batch.has_sequence and manager.producer_id_and_epoch.match(batch)
                and batch.base_sequence < manager.sequence_number(tp)):
            manager.set_sequence_number(tp, batch.base_sequence)
        self._maybe_remove_from_inflight_batches(batch)
        self._accumulator.partition_counts.refused(batch)
        self._record_retries(batch)
        if self.config['guarantee_message_order']:
            self._accumulator.muted.discard(tp)


__all__ = ['OffsetSender']
