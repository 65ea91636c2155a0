"""Keeping Spark's collection between two tasks of a Python worker short.

A reused Python worker runs a full ``gc.collect()`` after every task (``pyspark/daemon.py``). It scans every object
the worker holds: pyspark, pyarrow, kafka-python and kafka_kip, and the producers a worker keeps from task to task
(:mod:`kafka_kip.spark.producers`), some 110,000 objects, which took 0.07-0.23 s here between two write tasks
that each wrote 50,000 rows in 0.1-0.2 s. So a task ends by collecting what it left and freezing what is still
alive (``gc.freeze``): the worker's collection then skips it. Frozen objects are still freed when nothing refers
to them; only a cycle among them waits, so every :data:`FULL_SCAN_INTERVAL_S` seconds a task's end unfreezes
everything and scans it once (a kept producer closed since, for instance). Outside a Spark task (the functions
called in the driver, or in a test) nothing is done: that process's collector is its owner's.
"""
from __future__ import annotations

import gc
import time

from pyspark import TaskContext

#: The longest a cycle of once-frozen objects waits to be collected, in seconds.
FULL_SCAN_INTERVAL_S = 60.0

_last_full_scan: float | None = None


def settle_after_task(now: float | None = None) -> None:
    """In a Spark task: collect what the task left and freeze the survivors (every :data:`FULL_SCAN_INTERVAL_S`,
    unfreeze and scan everything first)."""
    global _last_full_scan
    if not in_spark_task():
        return
    now = time.monotonic() if now is None else now
    if _last_full_scan is None or now - _last_full_scan >= FULL_SCAN_INTERVAL_S:
        gc.unfreeze()
        _last_full_scan = now
    gc.collect()
    gc.freeze()


def in_spark_task() -> bool:
    """Whether this process is running a Spark task now (a Python worker's, not the driver's)."""
    return TaskContext.get() is not None


__all__ = ['FULL_SCAN_INTERVAL_S', 'settle_after_task']
