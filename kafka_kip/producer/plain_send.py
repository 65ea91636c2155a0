"""``send()`` of a plain record (no offset) without the per-record work a drop-in does not need.

kafka-python's ``send()`` looks the topic's partitions up three times (each builds a set), sizes the record
in Python, builds a ``TopicPartition`` through a Python ``__new__``, formats ``str(producer)`` for a debug
line whether or not debug logging is on, and appends through two lock-guarded counters and a few Python
frames. With the compiled codec, kafka_kip's ``send()`` runs :func:`kafka_kip._codec._compiled.send_plain`
instead: the same steps in the same order, with the same calls into the producer (serializers,
partitioner, transaction manager, sender) and the same errors, in compiled code; the record joins the
partition's newest batch without leaving it (:func:`~kafka_kip._codec._compiled.append_plain`), and anything
else (a new batch, another kind of batch) goes through kafka-python's ``RecordAccumulator.append``.

It takes the common case only: an open producer writing message format v2 with kafka_kip's metadata and
accumulator (also checked at each send: kafka-python's tests replace them with mocks after construction), a
known, non-internal topic, no partition or a valid one, a key or a value, well-formed headers. For anything
else it returns None before doing anything, and ``send()`` runs kafka-python's, which then raises the same
error or waits for metadata.
"""
from __future__ import annotations

import functools
from typing import Any

import kafka.producer.kafka as _stock

from kafka_kip import _codec
from kafka_kip.metadata.cluster import KipClusterMetadata
from kafka_kip.producer.partition_counts import SENDING
from kafka_kip.producer.records import CompiledProducerBatch, RecordFuture

_FIRST_V2_API_VERSION = (0, 11)

#: ``send_plain(producer, topic, value, key, headers, partition, timestamp_ms)``: the record's future, or None
#: when kafka-python's ``send()`` must run; None without the compiled codec.
send_plain = None if _codec.compiled is None else functools.partial(
    _codec.compiled.send_plain, _stock.log, CompiledProducerBatch, RecordFuture, SENDING, KipClusterMetadata)


def applies(producer: Any) -> bool:
    """Whether ``producer``'s plain records can take :data:`send_plain` at all: the compiled codec is in use,
    the brokers take message format v2, the metadata is kafka_kip's."""
    return (_codec.compiled is not None and producer.config['api_version'] >= _FIRST_V2_API_VERSION
            and isinstance(producer._metadata, KipClusterMetadata))


__all__ = ['applies', 'send_plain']
