"""What a Spark task leaves for its worker's collection between tasks (kafka_kip.spark.worker_gc), without Spark."""
from __future__ import annotations

import gc
import weakref

import pytest

from kafka_kip.spark import worker_gc
from kafka_kip.spark.worker_gc import FULL_SCAN_INTERVAL_S, settle_after_task


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def in_task(monkeypatch):
    monkeypatch.setattr(worker_gc, 'in_spark_task', lambda: True)
    monkeypatch.setattr(worker_gc, '_last_full_scan', None)
    try:
        yield
    finally:
        gc.unfreeze()


def test_a_task_end_collects_its_garbage_and_freezes_the_survivors_until_the_next_full_scan(in_task):
    kept = Cycle()
    kept_ref = weakref.ref(kept)
    settle_after_task(now=0.0)  # the first task's end scans everything
    assert gc.get_freeze_count() > 0
    left = Cycle()
    left_ref = weakref.ref(left)
    del left
    settle_after_task(now=1.0)  # garbage the task left is collected, not frozen
    assert left_ref() is None
    del kept
    settle_after_task(now=FULL_SCAN_INTERVAL_S - 1)  # frozen earlier: this end does not walk it
    assert kept_ref() is not None
    settle_after_task(now=FULL_SCAN_INTERVAL_S)  # the interval after the last full scan: everything walked again
    assert kept_ref() is None
    assert gc.get_freeze_count() > 0


def test_outside_a_spark_task_nothing_is_frozen(monkeypatch):
    monkeypatch.setattr(worker_gc, '_last_full_scan', None)
    assert not worker_gc.in_spark_task()
    frozen = gc.get_freeze_count()
    settle_after_task(now=0.0)
    assert gc.get_freeze_count() == frozen
    assert worker_gc._last_full_scan is None
