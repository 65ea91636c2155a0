"""The SparkSession settings :func:`kafka_kip.spark.register` applies (each only where the user set none).

``spark.sql.execution.arrow.maxBytesPerBatch``: Spark fills the Arrow batches it sends a Python worker (a
``kafka-kip`` sink task's input included) row by row and, unless this is ``Int.MaxValue``, measures the batch
after every row. Measuring walks a list column from its last non-null entry (Spark's Arrow writer leaves a null
list unrecorded), so a ``headers`` column that is null for records without headers -- what a ``kafka-kip`` or
Spark ``kafka`` read with ``includeHeaders=true`` gives -- made each 10,000-row batch quadratic: a
read -> ``preserveOffsets`` write pipeline spent most of its micro-batch there (benchmarks/bench_spark.py). At
``Int.MaxValue`` Spark skips the measurement; batches stay bounded by ``spark.sql.execution.arrow.maxRecordsPerBatch``
(10,000 rows by default).
"""
from __future__ import annotations

from typing import Any

ARROW_MAX_BYTES_PER_BATCH = 'spark.sql.execution.arrow.maxBytesPerBatch'
#: Java's Int.MaxValue: the one value at which Spark skips the per-row batch size check
UNMEASURED = str(2**31 - 1)

#: setting -> the value :func:`apply_defaults` gives it when the session has none
SESSION_DEFAULTS = {ARROW_MAX_BYTES_PER_BATCH: UNMEASURED}


def apply_defaults(spark: Any) -> dict[str, str]:
    """Set each of :data:`SESSION_DEFAULTS` the session has not set; the settings it set."""
    applied = {}
    for key, value in SESSION_DEFAULTS.items():
        if spark.conf.get(key, None) is None:
            spark.conf.set(key, value)
            applied[key] = value
    return applied


__all__ = ['ARROW_MAX_BYTES_PER_BATCH', 'SESSION_DEFAULTS', 'UNMEASURED', 'apply_defaults']
