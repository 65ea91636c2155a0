"""The tests' layout: packages mirroring the code, helpers imported by package path, KIP files marked by KIP.

``-m kip320`` selects every test of KIP-320 because each file named for a KIP carries its marker; a file added
without it, or a helper imported by bare module name (which only works from one working directory), fails here.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = (ROOT / 'tests', ROOT / 'integration')
KIP_IN_NAME = re.compile(r'kip(\d+)')


def python_files() -> list[Path]:
    return sorted(p for tree in TREES for p in tree.rglob('*.py') if 'scenarios' not in p.parts)


def marks_of(tree: ast.Module) -> set[str]:
    """The ``pytest.mark.<name>`` names in the module's ``pytestmark``."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == 'pytestmark' for t in node.targets):
            return {n.attr for n in ast.walk(node.value)
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == 'mark'}
    return set()


def test_every_test_directory_is_a_package() -> None:
    missing = sorted(str(d.relative_to(ROOT)) for d in {p.parent for p in python_files()}
                     if not (d / '__init__.py').exists())
    assert missing == []


def test_no_helper_is_imported_by_its_bare_module_name() -> None:
    local_names = {p.stem for p in python_files()} - {'__init__', 'conftest'}
    bare = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            bare += [f'{path.relative_to(ROOT)}:{node.lineno} {n}' for n in names if n.split('.')[0] in local_names]
    assert bare == []


@pytest.mark.parametrize('path', [p for p in python_files() if p.name.startswith('test_') and KIP_IN_NAME.search(p.name)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_a_file_named_for_a_kip_carries_its_marker(path: Path) -> None:
    expected = {f'kip{n}' for n in KIP_IN_NAME.findall(path.name)}
    assert expected - marks_of(ast.parse(path.read_text())) == set()


def test_the_kip_markers_are_registered() -> None:
    registered = set(re.findall(r'"(kip\d+):', (ROOT / 'pyproject.toml').read_text()))
    used = {f'kip{n}' for p in python_files() for n in KIP_IN_NAME.findall(p.name) if p.name.startswith('test_')}
    assert used <= registered
