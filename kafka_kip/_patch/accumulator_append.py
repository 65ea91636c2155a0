"""``RecordAccumulator.append`` building kafka_kip's compiled producer batches instead of kafka-python's.

kafka-python's accumulator creates each new batch inline, by module-global name (``MemoryRecordsBuilder``,
``ProducerBatch``), with no factory argument. Scoped: only kafka_kip's accumulator runs the returned
function, and only when the compiled codec is built (:mod:`kafka_kip.producer.records`).
"""
from __future__ import annotations

from collections.abc import Callable

import kafka.producer.record_accumulator as _stock

from kafka_kip._patch.rebind import rebound


def install(*, records_builder: Callable[..., object], batch: type) -> Callable[..., tuple]:
    """kafka-python's ``RecordAccumulator.append`` building its batches with ``records_builder`` and ``batch``;
    raises KafkaPythonChanged if it no longer builds them by those names."""
    return rebound(_stock.RecordAccumulator.append, MemoryRecordsBuilder=records_builder, ProducerBatch=batch)
