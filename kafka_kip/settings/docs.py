"""The settings tables in docs/, generated: ``python -m kafka_kip.settings.docs [--check] [FILE ...]``.

A table sits between ``<!-- settings:COMPONENT -->`` and ``<!-- /settings -->`` in a Markdown file and is
rewritten from that component's :class:`~kafka_kip.settings.table.SettingsTable`; ``--check`` only says
which are stale (exit 1), as the test that keeps the docs current does.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from kafka_kip.settings.table import SettingsTable

#: The Markdown files that hold generated tables (relative to the repository root).
DOCS = ('docs/MIRROR.md', 'docs/SPARK.md')
_BLOCK = re.compile(r'(<!-- settings:(?P<component>[\w-]+) -->\n)(?P<table>.*?)(<!-- /settings -->)', re.DOTALL)


def tables() -> dict[str, SettingsTable]:
    """Every component's table, by component name."""
    from kafka_kip.mirror.config import MIRROR_SETTINGS
    from kafka_kip.spark.settings import MIRROR_OPTIONS, SINK_OPTIONS, SOURCE_OPTIONS
    return {t.component: t for t in (MIRROR_SETTINGS, SOURCE_OPTIONS, SINK_OPTIONS, MIRROR_OPTIONS)}


def render(text: str, by_component: dict[str, SettingsTable]) -> str:
    """``text`` with every marked table regenerated; ValueError naming an unknown component."""
    def table(found: re.Match[str]) -> str:
        component = found.group('component')
        if component not in by_component:
            raise ValueError(f'<!-- settings:{component} -->: no such settings table; known: {sorted(by_component)}')
        return found.group(1) + by_component[component].markdown() + found.group(4)
    return _BLOCK.sub(table, text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m kafka_kip.settings.docs', description=__doc__)
    parser.add_argument('--check', action='store_true', help='change nothing; exit 1 if a table is stale')
    parser.add_argument('files', nargs='*', default=DOCS, help=f'Markdown files (default: {" ".join(DOCS)})')
    args = parser.parse_args(argv)
    by_component, stale = tables(), []
    for name in args.files:
        path = Path(name)
        text = path.read_text(encoding='utf-8')
        current = render(text, by_component)
        if current != text:
            stale.append(name)
            if not args.check:
                path.write_text(current, encoding='utf-8')
    verb = 'stale' if args.check else 'rewritten'
    for name in stale:
        print(f'{name}: settings table(s) {verb}', file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == '__main__':
    sys.exit(main())
