"""``send()`` of a record with an offset (KIP-391) in compiled code, as :mod:`kafka_kip.producer.plain_send` is
for plain records.

With the compiled codec, :func:`kafka_kip._codec._compiled.send_with_offset` runs the steps of
``KafkaProducer._send_with_offset`` in the same order with the same calls into the producer (serializers, size
check, transaction manager, sender) and the same errors; the record joins the partition's newest
:class:`~kafka_kip.producer.batch.OffsetProducerBatch` when its offset continues it
(:func:`~kafka_kip._codec._compiled.append_at_offset`), and anything else (a new batch: a gap, the first
record, a full batch) goes through ``OffsetRecordAccumulator.append_with_offset``. Batches, offsets, admission
(``use_offset`` only to kip.391 leaders, checked mode on stock ones) and refusals are those of the Python path.

It takes the common case only: an open producer whose plain records take the compiled path too
(:func:`~kafka_kip.producer.plain_send.applies`), a partition the metadata knows, well-formed numbers and
headers. For anything else it returns None before doing anything, and the Python path runs (and raises the
error naming the bad value, or waits for metadata).
"""
from __future__ import annotations

import functools

from kafka_kip import _codec
from kafka_kip.producer.batch import CompiledOffsetRecordFuture, OffsetProducerBatch

#: ``send_with_offset(producer, topic, partition, key, value, headers, timestamp_ms, offset)``: the record's
#: future, or None when the Python path must run; None without the compiled codec.
send_with_offset = None if _codec.compiled is None else functools.partial(
    _codec.compiled.send_with_offset, OffsetProducerBatch, CompiledOffsetRecordFuture)

__all__ = ['send_with_offset']
