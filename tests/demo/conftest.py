"""One run of ``kafka-kip demo``'s scenes serves every test of tests/demo/ (a run takes about a minute)."""
from __future__ import annotations

import pytest

from kafka_kip_reference.demo.run import DemoResult, run_scenario


@pytest.fixture(scope='session')
def demo_run() -> tuple[DemoResult, list[str]]:
    """The demo's result and the lines it said, from one run of :func:`run_scenario`."""
    lines: list[str] = []
    return run_scenario(lines.append), lines
