"""No import cycles in kafka_kip: every import statement counts, also inside functions and TYPE_CHECKING blocks.

An import of ``a.b.c`` (or ``from a.b import c``) is an edge to module ``a.b.c`` if it exists, else to the
package ``a.b`` whose ``__init__`` defines the name. The packages a module sits in are not edges of their
own (Python imports them first, but they are not the module's choice).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _modules(package: str) -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in sorted((ROOT / package.replace('.', '/')).rglob('*.py')):
        parts = list(path.relative_to(ROOT).with_suffix('').parts)
        is_package = parts[-1] == '__init__'
        found['.'.join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    """``{module: modules of package it imports}``."""
    modules = _modules(package)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition('.')[0]
        return name or None

    graph = {}
    for name, (path, is_package) in modules.items():
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ''
                if node.level:
                    anchor = name if is_package else name.rpartition('.')[0]
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition('.')[0]
                    base = f'{anchor}.{base}' if base else anchor
                for alias in node.names:
                    member = f'{base}.{alias.name}'
                    targets.add(member if member in modules else known(base))
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_lazy_cycle(tmp_path, monkeypatch):
    package = tmp_path / 'pkg'
    package.mkdir()
    (package / '__init__.py').write_text('')
    (package / 'a.py').write_text('from pkg import b\n')
    (package / 'b.py').write_text('def f():\n    from pkg.a import x\n')
    (package / 'c.py').write_text('from . import a\n')
    monkeypatch.setattr(sys.modules[__name__], 'ROOT', tmp_path)
    assert cycles(import_graph('pkg')) == [['pkg.a', 'pkg.b']]


@pytest.mark.parametrize('package', ['kafka_kip', 'kafka_kip_reference', 'integration'])
def test_no_import_cycles(package):
    assert cycles(import_graph(package)) == []


def test_kafka_kip_testing_loads_its_public_names_on_first_use():
    import kafka_kip.testing as testing
    import kafka_kip_reference as reference

    assert set(testing.__all__) == set(reference.__all__) == set(reference._HOMES)
    code = ('import sys, kafka_kip.testing\n'
            'assert not [m for m in sys.modules if m.startswith("kafka_kip_reference")], "imported the reference"\n'
            'from kafka_kip.testing import *\n'
            f'names = {sorted(testing.__all__)!r}\n'
            'homes = sys.modules["kafka_kip_reference"]._HOMES\n'
            'assert [getattr(sys.modules[homes[n]], n) for n in names] == [globals()[n] for n in names]\n')
    subprocess.run([sys.executable, '-c', code], cwd=ROOT, check=True)
