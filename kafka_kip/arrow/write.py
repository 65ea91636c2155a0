"""``write_table``: a pyarrow Table written to Kafka as the Spark Kafka sink writes a DataFrame."""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from kafka_kip.producer.arrow_writer import WriteCounts, write_batches


def write_table(table: pa.Table | pa.RecordBatch, bootstrap_servers: str | list[str], topic: str | None = None,
                preserve_offsets: bool = False, **producer_configs: Any) -> WriteCounts:
    """Write every row of ``table`` and wait until the brokers acknowledged them.

    Columns as Spark's Kafka sink takes them: ``value`` (binary or string, required), ``key`` (binary or string),
    ``topic`` (string; ``topic`` given here overrides it), ``partition`` (int; rows without one are partitioned
    by key as the Java client does), ``headers`` (list<struct<key string, value binary>>), ``timestamp``
    (timestamp, or int64 milliseconds; null: now); with ``preserve_offsets=True`` also ``offset`` (int64): each
    row is written at its offset (KIP-391; ``offset_mode='checked'`` for a stock broker), and rows the partition
    already has there are counted as already there instead of written twice. ``producer_configs`` go to
    :class:`kafka_kip.KafkaProducer` (acks, compression_type, max_request_size, ...; ``batch_size`` defaults to
    256 KiB here, :data:`~kafka_kip.producer.arrow_writer.WRITE_BATCH_SIZE`).

    Returns the :class:`~kafka_kip.producer.arrow_writer.WriteCounts` (``written``, ``already_there``); raises the
    first error a row met (``MessageSizeTooLargeError`` naming the row's topic, partition and offset for a row
    over ``max_request_size``; ``InvalidProduceOffsetError``, ...).
    """
    batches = [table] if isinstance(table, pa.RecordBatch) else table.to_batches()
    return write_batches(batches, topic, preserve_offsets, bootstrap_servers=bootstrap_servers, **producer_configs)


__all__ = ['write_table']
