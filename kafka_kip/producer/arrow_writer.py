"""Writing Arrow batches of the Spark Kafka sink's columns through a kafka_kip ``KafkaProducer``.

Columns: ``value`` (binary or string, required), ``key`` (binary or string), ``topic`` (string; or the writer's
topic), ``partition`` (int), ``headers`` (list<struct<key string, value binary>>), ``timestamp`` (timestamp, or
int64 milliseconds), and with ``preserve_offsets`` ``offset`` (int64, required with ``partition``). Other columns
are ignored. The compiled encoder (:mod:`kafka_kip._codec._encoder`) turns the rows into v2 record batches per
partition, which are queued in the producer as they are (:mod:`kafka_kip.producer.prebuilt`): the producer's
sender stamps and sends them with its acks, idempotence, retries, KIP-1243 and KIP-253 handling, and KIP-391
``use_offset`` (or checked mode on a stock broker) for batches at offsets. No Python object per row.

With ``preserve_offsets`` a record the broker refuses as below its log end is counted as *already there* (a
re-run of the same rows writes nothing twice); a refusal at or above the log end is an error.

Used by the Spark sink (:mod:`kafka_kip.spark.sink`) and :func:`kafka_kip.arrow.write.write_table`.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from kafka.structs import TopicPartition

from kafka_kip.errors import InvalidProduceOffsetError
from kafka_kip.producer.partition_counts import EXPLICIT
from kafka_kip.producer.prebuilt import PrebuiltBatch, PrebuiltOffsetBatch, PrebuiltRecords, outcome
from kafka_kip.producer.producer import KafkaProducer
from kafka_kip.producer.topic_limits import MAX_MESSAGE_BYTES, max_message_bytes

try:
    from kafka_kip._codec._encoder import TopicEncoder
except ImportError:  # the compiled codec was not built
    TopicEncoder = None

#: queued bytes beyond which writing waits for the oldest batches' answers
_MAX_QUEUED_BYTES = 32 << 20

#: ``batch_size`` of :func:`write_batches`' producer unless the caller sets one. The sender's Python costs are
#: per request and per batch (kafka-python's default 16 KiB made ~1,300 batches and ~360 requests of 4 batches
#: for 20 MB, 43k rows/s on the reference broker); 256 KiB batches fill a default 1 MiB request with 3-4 of
#: them and wrote the same rows at 280k rows/s. Kept well under brokers' default message.max.bytes (1 MiB),
#: and never over the producer's ``max_request_size``.
WRITE_BATCH_SIZE = 256 << 10


@dataclass
class WriteCounts:
    """Rows written, and rows the broker already had at their offsets (``preserve_offsets``)."""

    written: int = 0
    already_there: int = 0


class ArrowWriter:
    """Writes Arrow record batches through ``producer`` (a :class:`kafka_kip.KafkaProducer`, owned by the caller).

    :meth:`write` encodes and queues a batch's rows; :meth:`flush` sends what is left, waits for every answer
    and returns the :class:`WriteCounts` (raising the first error). ``topic``: the topic of every row (else each
    row's ``topic`` column).
    """

    def __init__(self, producer: Any, topic: str | None = None, preserve_offsets: bool = False) -> None:
        if TopicEncoder is None:
            raise RuntimeError('the Arrow writer needs kafka_kip\'s compiled codec (kafka_kip._codec._encoder), '
                               'which was not built: reinstall kafka-python-kip where a C compiler is present')
        self._producer = producer
        self._topic = topic
        self._preserve_offsets = preserve_offsets
        self._encoders: dict[str, TopicEncoder] = {}
        self._topic_limits: dict[str, int | None] = {}
        self._queued: deque[Any] = deque()
        self._queued_bytes = 0
        self.counts = WriteCounts()
        self._error: BaseException | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        """Encode ``batch``'s rows and queue them in the producer."""
        if batch.num_rows == 0:
            return
        names = batch.schema.names
        if 'value' not in names:
            raise ValueError(f"the rows to write need a 'value' column (binary or string); got columns {names}")
        if self._topic is not None:
            self._write_topic(self._topic, batch)
            return
        if 'topic' not in names:
            raise ValueError("give the rows a 'topic' column or set the topic to write to")
        topics = batch.column(names.index('topic'))
        if topics.null_count:
            raise ValueError('a row has a null topic (and no topic to write to is set)')
        encoded = topics.dictionary_encode()
        if len(encoded.dictionary) == 1:
            self._write_topic(encoded.dictionary[0].as_py(), batch)
            return
        for index, topic in enumerate(encoded.dictionary.to_pylist()):
            self._write_topic(topic, batch.filter(pc.equal(encoded.indices, index)))

    def flush(self) -> WriteCounts:
        """Send every queued row, wait for the answers; the counts, or the first error raised."""
        for topic, encoder in self._encoders.items():
            self._queue(topic, encoder, encoder.finish())
        self._producer.flush()
        while self._queued:
            self._settle(self._queued.popleft())
        self._queued_bytes = 0
        if self._error is not None:
            raise self._error
        return self.counts

    def _write_topic(self, topic: str, batch: pa.RecordBatch) -> None:
        encoder = self._encoder(topic)
        names = batch.schema.names

        def column(name: str) -> Any:
            return batch.column(names.index(name)) if name in names else None

        try:
            built = encoder.encode(_bytes(column('value')), key=_bytes(column('key')),
                                   partition=_ints(column('partition'), pa.int32()),
                                   timestamp=_milliseconds(column('timestamp')),
                                   offset=_ints(column('offset'), pa.int64()) if self._preserve_offsets else None,
                                   headers=column('headers'), now_ms=int(time.time() * 1000))
        except Exception:
            self._write_rows_before_error()
            raise
        self._queue(topic, encoder, built)
        while self._queued_bytes > _MAX_QUEUED_BYTES and self._queued:
            self._settle(self._queued.popleft(), wait=True)
        if self._error is not None:
            raise self._error

    def _write_rows_before_error(self) -> None:
        """A row could not be encoded: write every row before it (the error says which row), then let go."""
        for topic, encoder in self._encoders.items():
            self._queue(topic, encoder, encoder.take() + encoder.finish())
        self._producer.flush()

    def _encoder(self, topic: str) -> TopicEncoder:
        """The topic's encoder for its current partition count (KIP-253: a new one when the count changed)."""
        producer = self._producer
        encoder = self._encoders.get(topic)
        if encoder is None:
            producer.partitions_for(topic)  # waits for the topic's metadata (max_block_ms)
        count = producer._partition_counts.current(topic)
        if encoder is not None and encoder.partition_count == count:
            return encoder
        if encoder is not None:
            self._queue(topic, encoder, encoder.finish())
        config = producer.config
        limit, limit_name = self._record_limit(topic)
        encoder = TopicEncoder(topic, count, compression=config['compression_attrs'], batch_size=config['batch_size'],
                               max_record_bytes=limit, limit_name=limit_name, preserve_offsets=self._preserve_offsets)
        self._encoders[topic] = encoder
        return encoder

    def _record_limit(self, topic: str) -> tuple[int, str]:
        """The largest record batch a row of ``topic`` may make, and the setting it comes from: the smaller of the
        producer's ``max_request_size`` and the topic's ``max.message.bytes`` (looked up once per topic)."""
        if topic not in self._topic_limits:
            self._topic_limits[topic] = max_message_bytes(self._producer, topic)
        request_limit = self._producer.config['max_request_size']
        topic_limit = self._topic_limits[topic]
        if topic_limit is not None and topic_limit < request_limit:
            return topic_limit, f"the topic's {MAX_MESSAGE_BYTES}"
        return request_limit, 'max_request_size'

    def _queue(self, topic: str, encoder: TopicEncoder, built: list[tuple]) -> None:
        if not built:
            return
        producer = self._producer
        accumulator = producer._accumulator
        manager = producer._transaction_manager
        transactional = manager is not None and manager.is_transactional()
        for partition, base_offset, count, partitioned, data in built:
            tp = TopicPartition(topic, partition)
            records = PrebuiltRecords(data, count)
            if self._preserve_offsets:
                batch = PrebuiltOffsetBatch(tp, records, base_offset)
            else:
                batch = PrebuiltBatch(tp, records, encoder.partition_count if partitioned else EXPLICIT)
            if transactional:
                manager.maybe_add_partition_to_transaction(tp)
            accumulator.append_prebuilt(batch)
            self._queued.append(batch)
            self._queued_bytes += len(data)
        producer._sender.wakeup()

    def _settle(self, batch: Any, wait: bool = False) -> None:
        """Count the outcome of ``batch`` and of the batches its records moved to (split, re-partitioned)."""
        accumulator = self._producer._accumulator
        replaced = accumulator.replaced
        pending, seen = deque([batch]), set()
        while pending:
            batch = pending.popleft()
            if id(batch) in seen:
                continue
            seen.add(id(batch))
            if wait:
                accumulator.wait_for(batch)
            if batch in replaced:
                pending.extend(replaced[batch])
                continue
            self.counts.already_there += getattr(batch, 'already_there', 0)
            error = outcome(batch) if batch.produce_future.is_done else RuntimeError(
                f'{batch.topic_partition}: a batch was neither answered nor moved after flush()')
            if error is None:
                self.counts.written += batch.record_count
            elif self._preserve_offsets and _below_log_end(batch, error):
                self.counts.already_there += batch.record_count
            elif self._error is None:
                self._error = error


def writer_configs(producer_configs: Mapping[str, Any]) -> dict[str, Any]:
    """``producer_configs`` with ``batch_size`` :data:`WRITE_BATCH_SIZE` (at most ``max_request_size``) unless set."""
    configs = dict(producer_configs)
    if 'batch_size' not in configs:
        max_request_size = configs.get('max_request_size', KafkaProducer.DEFAULT_CONFIG['max_request_size'])
        configs['batch_size'] = min(WRITE_BATCH_SIZE, max_request_size)
    return configs


def write_through(producer: Any, batches: Iterable[pa.RecordBatch], topic: str | None = None,
                  preserve_offsets: bool = False) -> WriteCounts:
    """Write ``batches`` through ``producer`` (the caller's); the counts once all are answered."""
    writer = ArrowWriter(producer, topic, preserve_offsets)
    for batch in batches:
        writer.write(batch)
    return writer.flush()


def write_batches(batches: Iterable[pa.RecordBatch], topic: str | None = None, preserve_offsets: bool = False,
                  **producer_configs: Any) -> WriteCounts:
    """Write ``batches`` through a producer of their own (``producer_configs``, see :func:`writer_configs`); the
    counts once all are answered."""
    producer = KafkaProducer(**writer_configs(producer_configs))
    try:
        return write_through(producer, batches, topic, preserve_offsets)
    finally:
        producer.close()


def _below_log_end(batch: PrebuiltOffsetBatch, error: BaseException) -> bool:
    """Whether the broker refused ``batch`` because its rows are already there (below the log end)."""
    return isinstance(error, InvalidProduceOffsetError) and (
        error.log_end_offset < 0 or batch.next_offset <= error.log_end_offset)


def _bytes(array: pa.Array | None) -> pa.Array | None:
    if array is None or array.type in (pa.binary(), pa.string()):
        return array
    if array.type in (pa.large_binary(), pa.large_string()):
        return array.cast(pa.binary())
    raise TypeError(f'key and value columns must be binary or string, got {array.type}')


def _ints(array: pa.Array | None, kind: pa.DataType) -> pa.Array | None:
    if array is None or array.type == kind:
        return array
    if not pa.types.is_integer(array.type):
        raise TypeError(f'partition and offset columns must be integers, got {array.type}')
    return array.cast(kind)


def _milliseconds(array: pa.Array | None) -> pa.Array | None:
    if array is None or array.type == pa.int64():
        return array
    if not pa.types.is_timestamp(array.type):
        raise TypeError(f'the timestamp column must be a timestamp (or int64 milliseconds), got {array.type}')
    return array.cast(pa.timestamp('ms', tz=array.type.tz), safe=False).cast(pa.int64())


__all__ = ['WRITE_BATCH_SIZE', 'ArrowWriter', 'WriteCounts', 'write_batches', 'write_through', 'writer_configs']
