"""Run the conformance suite and write the matrix: behaviour x target -> pass / skip / xfail / fail.

    python -m integration.report [--output docs/CONFORMANCE.md] [pytest arguments ...]

The document is generated from the run itself (a pytest plugin records every test's outcome, reason
and docstring), so it cannot drift from the suite; integration/BEYOND_THE_MATRIX.md (results of other
suites against both brokers) is appended as written. It also checks fidelity: a behaviour that an
independent target passes must pass on the reference cluster. The exit status is pytest's, or 1 when
fidelity is broken; the document is written either way.
"""
from __future__ import annotations

import argparse
import datetime
import inspect
import platform
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# integration.* and kafka_kip are imported only once pytest runs: kafka_kip is also a pytest plugin,
# and a module imported before pytest starts cannot have its asserts rewritten.

REFERENCE = 'reference'
PASS, SKIP, XFAIL, FAIL = 'pass', 'skip', 'xfail', 'FAIL'
OUTCOMES = (PASS, SKIP, XFAIL, FAIL)
_HERE = Path(__file__).resolve().parent
#: Hand-maintained results of suites that are not rows of the matrix, appended to the document.
_BEYOND = _HERE / 'BEYOND_THE_MATRIX.md'


@dataclass
class Outcome:
    outcome: str
    reason: str = ''
    culprit: str = ''  # for xfail: whose bug or limitation it is


@dataclass
class Behaviour:
    """One row of the matrix: a test function and its non-target parameters."""

    module: str
    name: str
    variant: str
    doc: str
    results: dict[str, Outcome] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f'{self.name}[{self.variant}]' if self.variant else self.name


class Collector:
    """pytest plugin: the outcome of every item, keyed by behaviour and target."""

    def __init__(self) -> None:
        self.behaviours: dict[tuple[str, str, str], Behaviour] = {}
        self.sections: dict[str, str] = {}  # module name -> module docstring
        self.versions: dict[str, str] = {}  # target name -> implementation and version
        self.started = time.monotonic()
        self.seconds = 0.0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
        from integration.markers import item_target, item_variant
        from integration.targets import BrokerTarget

        result = yield
        report = result.get_result()
        target = item_target(item)
        if target is None:
            return
        running = getattr(item, 'funcargs', {}).get('target')
        if isinstance(running, BrokerTarget) and running.version:
            self.versions[target] = running.version
        outcome = _outcome(item, report)
        if outcome is None:
            return
        module = item.module.__name__.rsplit('.', 1)[-1]
        self.sections.setdefault(module, inspect.getdoc(item.module) or module)
        key = (module, item.originalname, item_variant(item))
        behaviour = self.behaviours.setdefault(
            key, Behaviour(module, item.originalname, key[2], ' '.join((inspect.getdoc(item.function) or '').split())))
        previous = behaviour.results.get(target)
        if previous is None or previous.outcome == PASS:  # a failing teardown overrides a pass
            behaviour.results[target] = outcome

    def pytest_sessionfinish(self) -> None:
        self.seconds = time.monotonic() - self.started


def _outcome(item: pytest.Item, report: pytest.TestReport) -> Outcome | None:
    from integration.markers import known_issue

    if report.when == 'call' or (report.when == 'setup' and not report.passed) or \
            (report.when == 'teardown' and report.failed):
        if hasattr(report, 'wasxfail'):
            issue = known_issue(item)
            return Outcome(XFAIL, issue.reason if issue else report.wasxfail, issue.culprit if issue else '')
        if report.skipped:
            return Outcome(SKIP, _skip_reason(report))
        if report.failed:
            first_line = str(report.longrepr).strip().splitlines()[-1:] or ['']
            return Outcome(FAIL, first_line[0][:300])
        return Outcome(PASS)
    return None


def _skip_reason(report: pytest.TestReport) -> str:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.removeprefix('Skipped: ')


# -- rendering -----------------------------------------------------------------------------------

class _Notes:
    """Numbered footnotes: the same reason text always gets the same label."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.labels: dict[tuple[str, str], str] = {}

    def label(self, reason: str, culprit: str = '') -> str:
        key = (culprit, reason)
        if key not in self.labels:
            self.labels[key] = f'{self.prefix}{len(self.labels) + 1}'
        return self.labels[key]


def _link(label: str) -> str:
    return f'[{label}](#{label.lower()})'


def _cell(result: Outcome | None, skips: _Notes, issues: _Notes) -> str:
    if result is None:
        return '—'
    if result.outcome == SKIP:
        return f'skip {_link(skips.label(result.reason))}'
    if result.outcome == XFAIL:
        return f'xfail {_link(issues.label(result.reason, result.culprit))}'
    if result.outcome == FAIL:
        return '**FAIL**'
    return PASS


def fidelity_violations(behaviours: list[Behaviour]) -> list[tuple[Behaviour, str]]:
    """(behaviour, target) where an independent target passes and the reference does not.

    Rows of one target's own reproductions (``target_only``: no reference result) are not compared.
    """
    violations = []
    for behaviour in behaviours:
        reference = behaviour.results.get(REFERENCE)
        if reference is None:
            continue
        for target, result in behaviour.results.items():
            if target != REFERENCE and result.outcome == PASS and reference.outcome != PASS:
                violations.append((behaviour, target))
    return violations


def _differences(behaviours: list[Behaviour], skips: _Notes, issues: _Notes) -> list[str]:
    from integration.registry import TARGET_NAMES

    lines = []
    for target in TARGET_NAMES:
        if target == REFERENCE:
            continue
        rows = [(b, b.results[target]) for b in behaviours
                if target in b.results and REFERENCE in b.results and b.results[target].outcome != PASS
                and b.results[REFERENCE].outcome == PASS]
        if not rows:
            continue
        reasons = {r.reason for _, r in rows}
        if len(reasons) == 1 and all(r.outcome == SKIP for _, r in rows):
            lines.append(f'- **{target}**: every behaviour is skipped ({_link(skips.label(rows[0][1].reason))}).')
            continue
        lines.append(f'- **{target}** ({len(rows)} behaviours):')
        for behaviour, result in rows:
            note = skips.label(result.reason) if result.outcome == SKIP else issues.label(result.reason, result.culprit)
            lines.append(f'  - `{behaviour.label}`: {result.outcome} {_link(note)}')
    return lines


def render(collector: Collector, exit_code: int, now: datetime.datetime) -> str:
    """The markdown document for a finished run."""
    import kafka

    import kafka_kip
    from integration.registry import TARGET_NAMES

    behaviours = list(collector.behaviours.values())
    skips, issues = _Notes('S'), _Notes('K')
    out = [
        '# Conformance matrix',
        '',
        '<!-- Generated by `make conformance` (python -m integration.report) from a real run; '
        'do not edit by hand. -->',
        '',
        'The same client behaviours run against every broker target (integration/). Each cell is the outcome '
        'on that target: **pass**; **skip** - the target cannot express the behaviour (reason in '
        '[Skip reasons](#skip-reasons)); **xfail** - a known bug or limitation, kept in the suite as a '
        'strict expected failure whose test is the minimal reproduction, so a fix turns the run red until '
        'the marker goes (reason and whose it is in [Known bugs and limitations](#known-bugs-and-limitations)); '
        '**FAIL** - a regression; **—** - not run on that target.',
        '',
        f'Run {now:%Y-%m-%d %H:%M} UTC, {collector.seconds:.0f} s, pytest exit status {exit_code}; '
        f'Python {platform.python_version()}, kafka-python {kafka.__version__}, kafka_kip {kafka_kip.__version__}.',
        '',
        '| target | implementation | ' + ' | '.join(OUTCOMES) + ' |',
        '|---|---|' + '---:|' * len(OUTCOMES),
    ]
    for target in TARGET_NAMES:
        counts = [sum(1 for b in behaviours if b.results.get(target, Outcome('')).outcome == o) for o in OUTCOMES]
        out.append(f'| {target} | {collector.versions.get(target, "not running here")} | '
                   + ' | '.join(str(c) for c in counts) + ' |')

    for module, doc in collector.sections.items():
        title, _, intro = doc.partition('\n')
        out += ['', f'## {title.rstrip(".")}', '']
        if intro.strip():
            out += [' '.join(paragraph.split()) + '\n' for paragraph in intro.strip().split('\n\n')]
        out += ['| behaviour | ' + ' | '.join(TARGET_NAMES) + ' |', '|---|' + '---|' * len(TARGET_NAMES)]
        for behaviour in (b for b in behaviours if b.module == module):
            cells = [_cell(behaviour.results.get(t), skips, issues) for t in TARGET_NAMES]
            out.append(f'| `{behaviour.label}`: {behaviour.doc} | ' + ' | '.join(cells) + ' |')

    violations = fidelity_violations(behaviours)
    out += ['', '## Fidelity', '',
            'The reference cluster must pass every behaviour an independent target passes.', '']
    if violations:
        out += [f'- **VIOLATED**: `{b.label}` passes on {t} but not on the reference.' for b, t in violations]
    else:
        out.append('Holds: no behaviour passes on an independent target without passing on the reference cluster.')
    out += ['', 'Behaviours that pass on the reference cluster but not on an independent target, and why '
            '(the reference implements the proposals and the fault hooks; the notes name each target\'s gap):', '']
    out += _differences(behaviours, skips, issues) or ['- none']
    out += ['', 'Where a behaviour passes everywhere with a different expected outcome (KIP-391 negotiation, '
            'KIP-232 partition epoch or topic id), the expectation follows from what the target advertises; '
            'the section texts above say how.']

    out += ['', '## Skip reasons', '']
    out += [f'- <a id="{label.lower()}"></a>**{label}**: {reason}' for (_, reason), label in skips.labels.items()]
    out += ['', '## Known bugs and limitations', '']
    by_culprit: dict[str, list[tuple[str, str]]] = {}
    for (culprit, reason), label in issues.labels.items():
        by_culprit.setdefault(culprit, []).append((label, reason))
    for culprit in sorted(by_culprit):
        out += [f'### {culprit}', '']
        for label, reason in by_culprit[culprit]:
            tests = [f'`{b.label}` ({t})' for b in behaviours for t, r in b.results.items()
                     if r.outcome == XFAIL and (r.culprit, r.reason) == (culprit, reason)]
            out.append(f'- <a id="{label.lower()}"></a>**{label}**: {reason}. Reproduced by {", ".join(tests)}.')
        out.append('')
    out += ['', _BEYOND.read_text().strip()]
    return '\n'.join(out).rstrip() + '\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--output', type=Path, default=_HERE.parent / 'docs' / 'CONFORMANCE.md')
    args, pytest_args = parser.parse_known_args(argv)
    collector = Collector()
    exit_code = int(pytest.main([str(_HERE), '-p', 'no:cacheprovider', *pytest_args], plugins=[collector]))
    text = render(collector, exit_code, datetime.datetime.now(datetime.timezone.utc))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    violations = fidelity_violations(list(collector.behaviours.values()))
    print(f'wrote {args.output}' + (f'; fidelity violated by {len(violations)} behaviours' if violations else ''),
          file=sys.stderr)
    return exit_code or (1 if violations else 0)


if __name__ == '__main__':
    sys.exit(main())
