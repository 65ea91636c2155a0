"""``KafkaProducer``: kafka-python's producer plus producing records at given offsets (KIP-391)."""
from __future__ import annotations

from typing import Any

import kafka
import kafka.errors as Errors
from kafka.producer.future import FutureRecordMetadata
from kafka.structs import TopicPartition

from kafka_kip._patch import producer_init
from kafka_kip.bounds import INT32_MAX, INT64_MAX, INT64_MIN, require_int, require_partition
from kafka_kip.client_defaults import CLIENT_DEFAULTS
from kafka_kip.metadata.client import KipNetClient
from kafka_kip.metadata.store import require_store
from kafka_kip.policies import BROKER, CHECKED, PRODUCER_OFFSET_MODES, parse_offset_mode
from kafka_kip.producer import offset_send, plain_send
from kafka_kip.producer.accumulator import OffsetRecordAccumulator
from kafka_kip.producer.batch import OffsetRecordFuture
from kafka_kip.producer.partition_counts import EXPLICIT, PENDING, SENDING
from kafka_kip.producer.sender import OffsetSender
from kafka_kip.structs import ProducerRecordWithOffset

_SERIALIZED_TYPES = (bytes, bytearray, memoryview, type(None))


_init_with_offset_records = producer_init.install(accumulator=OffsetRecordAccumulator, sender=OffsetSender)


class KafkaProducer(kafka.KafkaProducer):
    """kafka-python's ``KafkaProducer`` that can also write records at given offsets (KIP-391).

    Accepts every kafka-python argument unchanged, plus:

    ``offset_mode`` (``'broker'`` | ``'checked'``, default ``'broker'``). A leader that advertises the
    ``kip.391`` feature always gets records with offsets in ProduceRequests with ``use_offset`` and judges
    the offsets itself (gaps allowed; an offset below its log end fails with
    ``InvalidProduceOffsetError(log_end_offset)``). The mode says what happens with a stock leader:

    - ``'broker'``: the broker must place the offsets, so the record's future fails with
      ``UnsupportedFeatureError('kip.391')``; nothing is written.
    - ``'checked'``: stock brokers always append at their log end, so a batch is written only if its first
      offset equals the partition's log end offset, with at most one batch in flight per partition, and
      the offset the broker assigned is verified. See "Checked mode" below.

    ``kafka_client`` defaults to :class:`kafka_kip.metadata.KipNetClient` (KIP-232 metadata freshness).
    ``consistency_context_store`` (KIP-1243): the :class:`kafka_kip.ConsistencyContextStore` this producer shares
    with other clients (default: one of its own); ``send()`` and the futures of records raise
    ``InconsistentClusterIdError`` once a broker turned out to belong to another cluster than the store's context.

    Partition expansions (KIP-253): to a leader that advertises ``kip.253`` every batch goes out with the
    partition count its records were partitioned with. When a topic grows, that leader refuses batches
    partitioned for the old count (INVALID_PARTITION_COUNT, nothing appended); the producer then holds the
    topic, refreshes its metadata and sends the refused and queued records of the old count again, keyed (and
    unkeyed) ones through the partitioner for the new count, explicitly partitioned ones to their partition:
    a key's records keep their ``send()`` order, their futures resolve once, with the partition they landed in,
    ``flush()`` waits for them, and the idempotent producer's sequences continue (a transaction takes the new
    partitions in, also while it commits). The partitioner sees the serialized key and value then (the objects
    given to ``send()`` are not kept). With a stock leader nothing is sent and nothing is refused: records
    partitioned for the old count land where it put them, as with kafka-python.

    Records with offsets are sent with :meth:`send` (a :class:`~kafka_kip.structs.ProducerRecordWithOffset`,
    or ``offset=`` on the usual arguments); plain records keep working in the same producer and never share
    a batch or a ProduceRequest with records that carry offsets. Offsets of consecutive records form one
    batch; a gap or a non-increasing offset starts a new one. Records of a partition are sent in ``send()``
    order; keep idempotence on (the default) or ``max_in_flight_requests_per_connection=1`` so that a
    refused or retried batch cannot be overtaken by the next one.

    A batch the broker refuses (``InvalidProduceOffsetError``; ``ClusterAuthorizationFailedError`` when
    the principal lacks REPLICATOR_WRITE) is never retried, and the producer stays usable (the idempotent
    producer's sequence is rolled back; transactional producers must abort the transaction). When the
    reported log end offset falls inside the batch, only the records below it fail; the others were never
    judged and are sent again from the log end, so that the log gets no gap (e.g. a restarted replicator
    re-sending offsets it had already written).

    Checked mode — what it promises, given that a stock broker assigns offsets itself:

    - A record is sent only when this producer knows the log to end exactly at the record's offset, so a
      record whose offset would leave a gap, or is already written, fails with
      ``InvalidProduceOffsetError(log_end_offset)`` without being sent. Stock brokers cannot leave gaps,
      so checked mode cannot mirror a source partition with gaps (compacted topics, transaction markers).
    - Every acknowledged write is verified: if the broker assigned other offsets than requested, the
      records' futures fail with ``InvalidProduceOffsetError`` naming both ranges.

    What it cannot promise: exclusivity. It needs a single writer per partition. Another producer appending
    between the check and the write makes the broker store the batch at other offsets; that is detected
    (the futures fail) but cannot be undone — the records are in the log at the wrong offsets. The log end
    is read from the broker (ListOffsets, confirmed by a Fetch's high watermark) at the first write and
    after any failed one, and followed from the producer's own acknowledged writes in between; the high
    watermark trails the log end while another writer's ``acks=1`` records are unreplicated. After an
    ambiguous failure (timeout, lost connection) the log end is read again: if the batch did land, its
    retry fails with ``InvalidProduceOffsetError`` though the records are in the log once (and an
    idempotent producer starts over with a new producer id). Checked mode needs ``acks`` 1 or ``'all'``
    (it reads the assigned offsets from the acknowledgement) and costs one batch in flight per partition
    (plain records of the same producer included) plus a lookup round trip at start.
    """

    DEFAULT_CONFIG = dict(kafka.KafkaProducer.DEFAULT_CONFIG, **CLIENT_DEFAULTS, offset_mode=BROKER,
                          kafka_client=KipNetClient, consistency_context_store=None)

    def __new__(cls, **configs: Any) -> KafkaProducer:
        # Refused here, before the object exists: kafka-python's __del__ would close a half-built producer.
        require_store(configs.get('consistency_context_store'))
        mode = parse_offset_mode(configs.get('offset_mode', BROKER), PRODUCER_OFFSET_MODES)
        if mode == CHECKED and configs.get('acks') == 0:
            raise Errors.KafkaConfigurationError(
                "offset_mode='checked' needs acks=1 or acks='all': it verifies the offsets in the acknowledgement")
        return super().__new__(cls)

    def __init__(self, **configs: Any) -> None:
        _init_with_offset_records(self, **configs)
        # With the compiled codec, records take kafka_kip.producer.plain_send's / offset_send's paths.
        self._lean_send = plain_send.applies(self)
        self._partition_counts = self._accumulator.partition_counts
        self._partition_counts.partition = self._partition_again

    def _partition_again(self, topic: str, key: bytes | None, value: bytes | None) -> int | None:
        """KIP-253: a record's partition for the topic's current count (the partitioner sees the serialized
        key and value only: the objects given to ``send()`` are not kept)."""
        return self._partition(topic, None, key, value, key, value)

    def _wait_on_metadata(self, topic: str, max_wait_ms: float) -> Any:
        """kafka-python's wait for a topic's metadata; a record about to be partitioned takes the count found."""
        partitions = super()._wait_on_metadata(topic, max_wait_ms)
        if SENDING.count == PENDING:
            SENDING.count = self._partition_counts.current(topic)
        return partitions

    def send(self, topic: str | ProducerRecordWithOffset, value: Any = None, key: Any = None,
             headers: list[tuple[str, bytes]] | None = None, partition: int | None = None,
             timestamp_ms: int | None = None, *, offset: int | None = None) -> FutureRecordMetadata:
        """kafka-python's ``send()``; also takes a ``ProducerRecordWithOffset``, or ``offset=`` with a partition.

        A record with an offset is checked before anything is queued: ``ValueError`` without a partition or
        with a negative offset, ``UnknownTopicOrPartitionError`` / ``TopicAuthorizationFailedError`` when
        the producer cannot see the partition (after waiting up to ``max_block_ms`` for metadata).
        Its future resolves to :class:`kafka_kip.producer.RecordMetadata` (with ``log_end_offset``) or
        fails with ``InvalidProduceOffsetError``, ``UnsupportedFeatureError`` or kafka-python's errors.
        Unlike plain records, both key and value may be None, and header values may be None (a
        replicator copies records as they are).

        Numbers the wire cannot carry are refused here, naming the value (kafka-python's sender thread would
        fail on them, leaving the future unresolved): ``partition`` must be None or 0..2**31-1, a plain
        record's ``timestamp_ms`` None or an int64 (see :class:`ProducerRecordWithOffset` for records with
        offsets).
        """
        if isinstance(topic, ProducerRecordWithOffset):
            if (value, key, headers, partition, timestamp_ms, offset) != (None,) * 6:
                raise TypeError('send(ProducerRecordWithOffset) takes no other arguments: the record has them all')
            return self._send_with_offset(*topic)
        if offset is None:
            # (the common values pass without a call: this runs per record)
            if partition is not None and not (type(partition) is int and 0 <= partition <= INT32_MAX):
                require_partition(partition)
            if timestamp_ms is not None and not (type(timestamp_ms) is int and INT64_MIN <= timestamp_ms <= INT64_MAX):
                require_int(timestamp_ms, 'timestamp_ms', INT64_MIN, INT64_MAX)
            future = (plain_send.send_plain(self, topic, value, key, headers, partition, timestamp_ms)
                      if self._lean_send else None)
            if future is not None:
                return future
            # KIP-253: the count is read before kafka-python's send() partitions the record (after it waited
            # for the topic's metadata if there was none: _wait_on_metadata)
            SENDING.count = EXPLICIT if partition is not None else self._partition_counts.current(topic, PENDING)
            try:
                return super().send(topic, value, key, headers, partition, timestamp_ms)
            finally:
                SENDING.count = EXPLICIT
        return self._send_with_offset(topic, partition, key, value, headers, timestamp_ms, offset)

    def _send_with_offset(self, topic: str, partition: int | None, key: Any, value: Any,
                          headers: list[tuple[str, bytes | None]] | None, timestamp_ms: int | None,
                          offset: int | None) -> OffsetRecordFuture:
        """A record with an offset: the compiled path (:mod:`kafka_kip.producer.offset_send`) where it applies,
        else checked as a :class:`ProducerRecordWithOffset` and appended here."""
        if self._lean_send:
            future = offset_send.send_with_offset(self, topic, partition, key, value, headers, timestamp_ms, offset)
            if future is not None:
                return future
        record = ProducerRecordWithOffset(topic, partition, key, value, headers, timestamp_ms, offset)
        if self._closed:
            raise Errors.IllegalStateError('KafkaProducer already closed!')
        headers = [] if record.headers is None else record.headers
        if not isinstance(headers, list) or not all(
                isinstance(header, tuple) and len(header) == 2 and isinstance(header[0], str)
                and isinstance(header[1], (bytes, type(None))) for header in headers):
            raise TypeError(f'headers must be a list of (str, bytes or None) tuples, got {headers!r}')
        key = self._serialize(self.config['key_serializer'], record.topic, headers, record.key)
        value = self._serialize(self.config['value_serializer'], record.topic, headers, record.value)
        for name, data in (('key', key), ('value', value)):
            if not isinstance(data, _SERIALIZED_TYPES):
                raise TypeError(f'Unsupported type for serialized {name}: {type(data)}')
        tp = TopicPartition(record.topic, record.partition)
        self._check_visible(tp)
        self._ensure_valid_record_size(self._estimate_size_in_bytes(key, value, headers))
        if self._transaction_manager and self._transaction_manager.is_transactional():
            self._transaction_manager.maybe_add_partition_to_transaction(tp)
        future, batch_is_full, new_batch = self._accumulator.append_with_offset(
            tp, record.offset, record.timestamp_ms, key, value, headers)
        if batch_is_full or new_batch:
            self._sender.wakeup()
        return future

    def forget_log_ends(self) -> None:
        """Checked offset mode: read each partition's log end from the broker again before the next write to it.

        For a producer handed from one writer to the next (the Spark sink keeps producers across tasks): other
        writers may have appended meanwhile, and checked mode would otherwise refuse the next rows as leaving a
        gap. Call it with nothing in flight (after :meth:`flush`). No effect in ``'broker'`` mode.
        """
        self._sender._admission.forget_all()

    def _check_visible(self, tp: TopicPartition) -> None:
        try:
            partitions = self._wait_on_metadata(tp.topic, self.config['max_block_ms'])
        except Errors.KafkaTimeoutError as exc:
            raise Errors.UnknownTopicOrPartitionError(
                f'Topic {tp.topic!r} is not visible to this producer (no metadata within max_block_ms='
                f"{self.config['max_block_ms']}); records with offsets are written only to partitions that exist"
            ) from exc
        if tp.partition not in partitions:
            raise Errors.UnknownTopicOrPartitionError(
                f'Partition {tp.partition} of topic {tp.topic!r} is not visible to this producer (it knows '
                f'partitions {sorted(partitions)}); records with offsets are written only to partitions that exist')


__all__ = ['KafkaProducer']
