"""benchmarks/harness.py without a network: rounds, medians of ratios, the table renderer, phases in a child."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import types

import pytest

from benchmarks.harness import (
    BenchmarkError,
    Column,
    Goal,
    Rate,
    Samples,
    Table,
    alternated,
    median_ratio,
    process_cpu_seconds,
    render,
    rotated,
    run_phase,
    tree_cpu_seconds,
)


def test_median_of_per_round_ratios_not_ratio_of_medians() -> None:
    # per-round ratios 2, 3, 1 -> 2; the medians' ratio would be 3 / 2
    assert median_ratio([2.0, 6.0, 3.0], [1.0, 2.0, 3.0]) == 2.0
    with pytest.raises(ValueError, match='one baseline per value, got 2 values and 1 baselines'):
        median_ratio([1.0, 2.0], [1.0])


def test_rounds_rotate_or_alternate() -> None:
    assert [rotated('abc', r) for r in range(4)] == [list('abc'), list('bca'), list('cab'), list('abc')]
    assert [alternated('ab', r) for r in range(3)] == [list('ab'), list('ba'), list('ab')]


def test_samples_ratio_per_round_and_missing_baseline() -> None:
    samples = Samples()
    for new, old in ((Rate(300, 30), Rate(100, 10)), (Rate(200, 40), Rate(200, 10)), (Rate(500, 20), Rate(250, 10))):
        samples.add('new', new)
        samples.add('old', old)
    assert samples.median('new') == 300
    assert samples.ratio('new', 'old') == 2.0  # rounds: 3, 1, 2
    assert samples.ratio('new', 'old', wall=False) == 3.0  # rounds: 3, 4, 2
    assert samples.ratio('new', 'absent') is None
    assert Rate.of(100, {'seconds': 2.0, 'cpu_seconds': 0.5}) == Rate(50.0, 200.0)


def table() -> Table:
    made = Table([Column('client', left=True), Column('records/s', ',.0f'), Column('vs base', '.2f', 'x')],
                 title='title line', notes=[str(Goal('new / base', 2.0, note='aim 3'))])
    made.add('base', 1234.4, None)
    made.add('new one', 56789.0, 3.14159)
    return made


def test_table_text_and_markdown() -> None:
    assert table().render() == '\n'.join([
        'title line',
        'client   records/s  vs base',
        '---------------------------',
        'base         1,234        -',
        'new one     56,789    3.14x',
        'goal: new / base >= 2 (aim 3)'])
    assert table().render(markdown=True).splitlines()[1:4] == [
        '| client | records/s | vs base |', '|---|---|---|', '| base | 1,234 | - |']
    with pytest.raises(ValueError, match='a row of 1 cells in a table of 3 columns'):
        table().add('x')


def test_json_keeps_raw_values() -> None:
    assert json.loads(render([table()], as_json=True)) == [{
        'title': 'title line', 'columns': ['client', 'records/s', 'vs base'],
        'rows': [['base', 1234.4, None], ['new one', 56789.0, 3.14159]], 'notes': ['goal: new / base >= 2 (aim 3)']}]
    assert str(Goal('token cost', 3, at_most=True)) == 'goal: token cost <= 3'


def test_child_phase_result_and_failure_with_its_stderr() -> None:
    assert run_phase('posixpath:join', 'a', 'b', label='join', kafka_kip=False) == 'a/b'
    with pytest.raises(BenchmarkError) as failed:
        run_phase('benchmarks.harness:median_ratio', [], [], label='empty phase', kafka_kip=None)
    message = str(failed.value)
    assert message.startswith('empty phase failed (exit 1): ')
    assert 'ValueError: median_ratio needs one baseline per value, got 0 values and 0 baselines' in message


def test_child_phase_labelled_kafka_kip_must_have_imported_it() -> None:
    with pytest.raises(BenchmarkError, match='kafka_kip phase: kafka_kip was not imported in its process'):
        run_phase('posixpath:join', 'a', label='kafka_kip phase', kafka_kip=True)


def pretend_kafka_kip_was_imported() -> None:
    """A phase (run in a child) that leaves a module named kafka_kip behind, without the cost of importing it."""
    sys.modules['kafka_kip'] = types.ModuleType('kafka_kip')


def test_child_phase_labelled_stock_must_not_have_imported_kafka_kip() -> None:
    with pytest.raises(BenchmarkError, match='stock phase: kafka_kip was imported in its process'):
        run_phase('tests.benchmarks.test_harness:pretend_kafka_kip_was_imported', label='stock phase', kafka_kip=False)


def test_cpu_seconds_of_a_child_and_of_the_process_tree() -> None:
    burn = 'import sys, time\nwhile time.process_time() < 0.3: pass\nprint("burnt", flush=True)\nsys.stdin.read()'
    child = subprocess.Popen([sys.executable, '-c', burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == 'burnt\n'
        burnt = process_cpu_seconds(child.pid)
        assert burnt >= 0.3 - 1 / os.sysconf('SC_CLK_TCK')  # /proc counts whole clock ticks
        assert tree_cpu_seconds(child.pid) >= burnt
        mine = process_cpu_seconds(os.getpid())
        assert tree_cpu_seconds() >= mine + burnt  # this process and its child, read after both
    finally:
        child.communicate('')
    assert math.isnan(process_cpu_seconds(child.pid))  # reaped: no /proc entry
