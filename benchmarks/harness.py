"""The skeleton every benchmark shares: timed windows, phases in child interpreters, interleaved rounds, medians
of per-round ratios, goals, and one table renderer (text, Markdown or ``--json``).

A benchmark module declares its phases (functions that run one measurement in the process they are called in and
return a JSON-able dict) and its goals; :func:`run_phase` runs a phase in a new interpreter and checks whether
that interpreter imported kafka_kip, so a figure labelled kafka-python comes from a process that never did.
This module imports nothing of kafka_kip or kafka-python. See benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
PHASE_TIMEOUT_S = 300.0
PURE_PYTHON_ENV = 'KAFKA_KIP_PURE_PYTHON'  # kafka_kip._codec.PURE_PYTHON_ENV (not imported: see the docstring)
_RESULT_MARK = 'benchmark-phase-result: '


class BenchmarkError(RuntimeError):
    """A run did not deliver every record, ran the wrong code, or a phase failed (the numbers would be meaningless)."""


# -- measuring, in the process that runs the phase --------------------------------------------------------------

class Window:
    """The timed window of a phase: wall and process CPU seconds (all threads) from start() to stop()."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def start(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def result(self, **extra: Any) -> dict[str, Any]:
        """What a phase returns: ``seconds``, ``cpu_seconds`` and whatever else it reports."""
        return {'seconds': self.wall, 'cpu_seconds': self.cpu, **extra}


@dataclass(frozen=True)
class Rate:
    """Records per wall-clock second and per CPU second of one phase run."""

    per_s: float
    per_cpu_s: float

    @classmethod
    def of(cls, records: int, result: dict[str, Any]) -> Rate:
        """From a phase's result (``seconds``, ``cpu_seconds``); a window of no CPU time counts as infinitely fast."""
        cpu = result.get('cpu_seconds') or 0.0
        return cls(records / result['seconds'], records / cpu if cpu > 0 else float('inf'))

    def measure(self, wall: bool) -> float:
        return self.per_s if wall else self.per_cpu_s


def _proc_stat(pid: int | str) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds) of process ``pid`` from Linux /proc; None if it is gone or there is
    no /proc."""
    try:
        fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds process ``pid`` (e.g. a broker) has used so far; NaN where there is no /proc."""
    stat = _proc_stat(pid)
    return stat[1] if stat is not None else float('nan')


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds of process ``root`` (default: this one) and every live descendant (a broker, a JVM, workers)."""
    root = os.getpid() if root is None else root
    stats = {int(entry): stat for entry in os.listdir('/proc') if entry.isdigit()
             if (stat := _proc_stat(entry)) is not None}

    def descends(pid: int) -> bool:
        while pid > 1:
            if pid == root:
                return True
            pid = stats[pid][0] if pid in stats else 1
        return False

    return sum(cpu for pid, (_, cpu) in stats.items() if descends(pid))


def require_compiled_codec() -> None:
    """In a kafka_kip phase: abort unless kafka_kip runs with its compiled record codec, so that figures
    labelled kafka_kip are never the pure-Python fallback's."""
    from kafka_kip import _codec

    if _codec.compiled is None:
        raise BenchmarkError('kafka_kip runs without its compiled record codec (build it: make codec); its figures '
                             "would be the fallback's")


def require_kafka_kip_imported(expected: bool, label: str) -> None:
    """Abort unless kafka_kip was imported in this process exactly when ``expected``."""
    imported = 'kafka_kip' in sys.modules
    if imported != expected:
        raise BenchmarkError(f'{label}: kafka_kip was {"" if imported else "not "}imported in its process')


# -- phases in child interpreters -------------------------------------------------------------------------------

def run_phase(target: str, *args: Any, label: str, kafka_kip: bool | None, env: dict[str, str] | None = None,
              pythonpath: Path | None = None, timeout: float = PHASE_TIMEOUT_S + 60) -> Any:
    """``module:function(*args)`` in a new interpreter; its JSON result.

    ``kafka_kip``: True if the phase must have imported kafka_kip when it returns, False if it must not have (a
    figure labelled stock / kafka-python), None for set-up that is not measured. The child gets this environment
    without ``KAFKA_KIP_PURE_PYTHON`` plus ``env``; with ``pythonpath`` it imports kafka_kip from that tree (while
    the ``benchmarks`` package stays this one). A failure raises :class:`BenchmarkError` naming ``label`` with
    the child's stderr.
    """
    environment = {k: v for k, v in os.environ.items() if k != PURE_PYTHON_ENV}
    environment.update(env or {})
    if pythonpath is not None:
        environment['PYTHONPATH'] = str(pythonpath)
    expectation = {None: 'any', True: 'kafka_kip', False: 'stock'}[kafka_kip]
    command = [sys.executable, str(BENCHMARKS / 'harness.py'), target, expectation, label, json.dumps(list(args))]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, env=environment,
                              cwd=str(pythonpath) if pythonpath is not None else None)
    except subprocess.TimeoutExpired as timed_out:
        raise BenchmarkError(f'{label}: no result within {timeout:.0f} s') from timed_out
    results = [line for line in done.stdout.splitlines() if line.startswith(_RESULT_MARK)]
    if done.returncode != 0 or not results:
        raise BenchmarkError(f'{label} failed (exit {done.returncode}): {done.stderr[-4000:]}')
    return json.loads(results[-1][len(_RESULT_MARK):])


def _child(argv: Sequence[str]) -> None:
    """The child's side of :func:`run_phase` (this file run as a script)."""
    target, expectation, label, args = argv
    module_name, function = target.split(':')
    result = getattr(importlib.import_module(module_name), function)(*json.loads(args))
    if expectation != 'any':
        require_kafka_kip_imported(expectation == 'kafka_kip', label)
    print(_RESULT_MARK + json.dumps(result), flush=True)


def _pin_benchmarks_package() -> None:
    """Import ``benchmarks`` from this tree whatever PYTHONPATH says (which chooses the kafka_kip measured); this
    tree's root comes last on the path (for ``integration``), after the tree PYTHONPATH names."""
    sys.path[:] = [entry for entry in sys.path if Path(entry or '.').resolve() != BENCHMARKS]
    sys.path.append(str(BENCHMARKS.parent))
    spec = importlib.util.spec_from_file_location('benchmarks', BENCHMARKS / '__init__.py',
                                                  submodule_search_locations=[str(BENCHMARKS)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules['benchmarks'] = package
    spec.loader.exec_module(package)


# -- rounds, medians, ratios ------------------------------------------------------------------------------------

def rotated(items: Sequence[Any], round_number: int) -> list[Any]:
    """The order of one round when rounds rotate: round r starts with item r (mod len)."""
    shift = round_number % len(items)
    return [*items[shift:], *items[:shift]]


def alternated(items: Sequence[Any], round_number: int) -> list[Any]:
    """The order of one round when rounds alternate: forward in even rounds, reversed in odd ones."""
    return list(items) if round_number % 2 == 0 else list(reversed(items))


def median_ratio(values: Sequence[float], baselines: Sequence[float]) -> float:
    """The median of per-round ratios value / baseline: two phases run back to back in each round, so this
    cancels most of the drift a shared machine adds between rounds."""
    if not values or len(values) != len(baselines):
        raise ValueError(f'median_ratio needs one baseline per value, got {len(values)} values and '
                         f'{len(baselines)} baselines')
    return statistics.median(v / b for v, b in zip(values, baselines, strict=True))


@dataclass
class Samples:
    """Rates per key, one per round in round order; medians and medians of per-round ratios."""

    by_key: dict[Any, list[Rate]] = field(default_factory=dict)

    def add(self, key: Any, rate: Rate) -> None:
        self.by_key.setdefault(key, []).append(rate)

    def median(self, key: Any, wall: bool = True) -> float:
        return statistics.median(rate.measure(wall) for rate in self.by_key[key])

    def ratio(self, key: Any, baseline: Any, wall: bool = True) -> float | None:
        """Median of per-round ratios key / baseline; None if the baseline did not run."""
        if baseline not in self.by_key:
            return None
        return median_ratio([r.measure(wall) for r in self.by_key[key]],
                            [r.measure(wall) for r in self.by_key[baseline]])

    def to_json(self) -> dict[str, list[list[float]]]:
        return {' / '.join(key) if isinstance(key, tuple) else str(key): [[r.per_s, r.per_cpu_s] for r in rates]
                for key, rates in self.by_key.items()}


class LoadAverage:
    """The 1-minute load averages seen during a run (one sample per phase run)."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    def sample(self) -> float:
        self.samples.append(os.getloadavg()[0])
        return self.samples[-1]

    def __str__(self) -> str:
        if not self.samples:
            return f'load average not sampled ({os.cpu_count()} CPUs)'
        return f'load average (1 min) during the run: {min(self.samples):.1f}-{max(self.samples):.1f} ' \
               f'on {os.cpu_count()} CPUs'


@dataclass(frozen=True)
class Goal:
    """What a benchmark aims for: ``measure >= target`` (``<=`` with ``at_most``); printed beside the results,
    never asserted."""

    measure: str
    target: float
    _: KW_ONLY
    at_most: bool = False
    note: str = ''

    def __str__(self) -> str:
        return f'goal: {self.measure} {"<=" if self.at_most else ">="} {self.target:g}' + \
            (f' ({self.note})' if self.note else '')


# -- tables -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    """A table column: ``spec`` formats a number for text (JSON keeps the raw value), ``left`` aligns text left."""

    name: str
    spec: str = ''
    suffix: str = ''
    left: bool = False

    def cell(self, value: Any) -> str:
        if value is None:
            return '-'
        if isinstance(value, str):
            return value
        return f'{value:{self.spec}}{self.suffix}'


@dataclass
class Table:
    """Rows under named columns, with an optional title line and notes below; rendered by :meth:`render`."""

    columns: Sequence[Column]
    title: str = ''
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f'a row of {len(cells)} cells in a table of {len(self.columns)} columns')
        self.rows.append(list(cells))

    def render(self, markdown: bool = False) -> str:
        text = [[column.cell(value) for column, value in zip(self.columns, row, strict=True)] for row in self.rows]
        names = [column.name for column in self.columns]
        if markdown:
            body = ['| ' + ' | '.join(names) + ' |', '|' + '---|' * len(names)]
            body += ['| ' + ' | '.join(cells) + ' |' for cells in text]
        else:
            widths = [max(len(cells[i]) for cells in [names, *text]) for i in range(len(names))]

            def line(cells: Sequence[str]) -> str:
                return '  '.join(cell.ljust(width) if column.left else cell.rjust(width)
                                 for cell, width, column in zip(cells, widths, self.columns, strict=True)).rstrip()

            header = line(names)
            body = [header, '-' * len(header), *(line(cells) for cells in text)]
        return '\n'.join(([self.title] if self.title else []) + body + self.notes)

    def to_json(self) -> dict[str, Any]:
        """The raw values (numbers unformatted) under the column names (a list: two columns may share a name)."""
        return {'title': self.title, 'columns': [column.name for column in self.columns], 'rows': self.rows,
                'notes': self.notes}


def render(tables: Iterable[Table], as_json: bool = False, markdown: bool = False) -> str:
    """The tables as text (blank line between), Markdown, or one JSON list (``--json``)."""
    tables = list(tables)
    if as_json:
        return json.dumps([table.to_json() for table in tables], indent=2)
    return '\n\n'.join(table.render(markdown) for table in tables)


# -- command line -----------------------------------------------------------------------------------------------

def parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """The argument parser of ``python -m benchmarks.<module>``, with ``--json``."""
    made = argparse.ArgumentParser(prog=f'python -m benchmarks.{module}', description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    made.add_argument('--json', action='store_true', help='print the results as JSON instead of a table')
    return made


def workload_arguments(parser_: argparse.ArgumentParser, *, records: int, rounds: int, record_size: bool = True,
                       records_are: str = 'records per phase') -> None:
    """``--records``, ``--rounds`` (interleaved) and, unless ``record_size`` is false, ``--record-size`` (100 B)."""
    parser_.add_argument('--records', type=int, default=records, help=f'{records_are} (default %(default)s)')
    parser_.add_argument('--rounds', type=int, default=rounds, help='interleaved rounds (default %(default)s)')
    if record_size:
        parser_.add_argument('--record-size', type=int, default=100, help='value bytes per record (default %(default)s)')


def subset(parser_: argparse.ArgumentParser, option: str, value: str, known: Sequence[str]) -> list[str]:
    """A comma-separated ``value`` of ``option`` as a list; a parser error naming what is unknown and accepted."""
    chosen = [name for name in value.split(',') if name]
    unknown = [name for name in chosen if name not in known]
    if unknown or not chosen:
        parser_.error(f'{option}: unknown {", ".join(unknown) or "(empty)"}; accepted: {",".join(known)}')
    return chosen


def progress(line: str) -> None:
    """A progress line on stderr (stdout carries the table)."""
    print(line, file=sys.stderr, flush=True)


def fresh_topic(prefix: str) -> str:
    return f'{prefix}-{os.urandom(4).hex()}'


if __name__ == '__main__':
    _pin_benchmarks_package()
    _child(sys.argv[1:])
