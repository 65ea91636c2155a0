"""The client library stands apart from the reference cluster (kafka_kip_reference).

No module of ``kafka_kip`` imports ``kafka_kip_reference`` (every import statement counts, also inside functions
and TYPE_CHECKING blocks); only the ``kafka_kip.testing`` re-export reaches it, by name on first use, and the
CLI's ``demo`` / ``broker`` commands when they run. In a fresh interpreter where the reference cluster and its
dependencies cannot be imported, every client module imports (the Spark modules that need the ``spark``
extra, blocked too to keep the test fast, excepted) and the CLI still parses its commands.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = 'kafka_kip_reference'
#: the re-export of the documented names: the one client module that may reach the reference cluster
RE_EXPORT = Path('kafka_kip/testing/__init__.py')
#: what only the reference cluster needs (extra ``reference``), blocked with it in the fresh interpreter
REFERENCE_ONLY = (REFERENCE, 'trustme', 'cryptography', 'snappy', 'pytest')
#: the client's extra ``spark``: blocked as well, a Spark module's ImportError naming one of them is expected
CLIENT_EXTRAS = ('pyspark', 'pyarrow', 'pandas', 'py4j')


def reference_imports(root: Path, package: str) -> list[str]:
    """``path:line module`` of every import of kafka_kip_reference in ``package`` (relative imports cannot reach it)."""
    found = []
    for path in sorted((root / package).rglob('*.py')):
        if path.relative_to(root) == RE_EXPORT:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or '']
            else:
                continue
            found += [f'{path.relative_to(root)}:{node.lineno} {name}' for name in names
                      if name == REFERENCE or name.startswith(f'{REFERENCE}.')]
    return found


def test_the_checker_finds_a_lazy_import(tmp_path):
    (tmp_path / 'kafka_kip' / 'testing').mkdir(parents=True)
    (tmp_path / 'kafka_kip' / 'testing' / '__init__.py').write_text('import kafka_kip_reference\n')
    (tmp_path / 'kafka_kip' / 'a.py').write_text('def f():\n    from kafka_kip_reference.broker import cluster\n')
    (tmp_path / 'kafka_kip' / 'b.py').write_text('import kafka_kip_referenced\nfrom . import a\n')
    assert reference_imports(tmp_path, 'kafka_kip') == ['kafka_kip/a.py:2 kafka_kip_reference.broker']


def test_no_client_module_imports_the_reference_cluster():
    assert reference_imports(ROOT, 'kafka_kip') == []


FRESH_CLIENT = textwrap.dedent('''
    import importlib, importlib.abc, json, pkgutil, sys

    EXTRAS = tuple(sys.argv[2].split(','))
    BLOCKED = (*sys.argv[1].split(','), *EXTRAS)
    asked = []

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split('.')[0] in BLOCKED:
                asked.append(name)  # kafka-python itself tries optional ones (snappy) and does without
                raise ImportError(f'{name} is blocked', name=name)

    sys.meta_path.insert(0, Blocker())
    import kafka_kip
    optional = []
    for module in pkgutil.walk_packages(kafka_kip.__path__, 'kafka_kip.'):
        if module.name == 'kafka_kip.__main__':  # runs the CLI (its imports are kafka_kip.cli's)
            continue
        try:
            importlib.import_module(module.name)
        except ImportError as exc:
            if not (exc.name or '').startswith(EXTRAS):
                raise
            optional.append(module.name)
    import kafka_kip.cli
    parser = kafka_kip.cli.build_parser()
    parser.parse_args(['mirror', '--source', 'a:9092', '--target', 'b:9092', '--topics', 't'])
    parser.parse_args(['broker', '--brokers', '1'])
    client_asked = [name for name in asked if name.startswith('kafka_kip_reference')]
    try:
        from kafka_kip.testing import ReferenceCluster
    except ImportError as exc:
        shim = str(exc)
    try:
        kafka_kip.cli.main(['broker'])
    except SystemExit as exc:
        cli = str(exc.code)
    print(json.dumps({'client_asked': client_asked, 'optional': optional, 'shim': shim, 'cli': cli}))
''')


def test_the_client_imports_and_runs_its_cli_without_the_reference_cluster():
    run = subprocess.run([sys.executable, '-c', FRESH_CLIENT, ','.join(REFERENCE_ONLY), ','.join(CLIENT_EXTRAS)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    assert result['client_asked'] == []
    assert 'kafka_kip.spark.options' not in result['optional']  # Spark's options parse without Spark
    assert result['shim'].startswith('kafka_kip.testing.ReferenceCluster is part of the reference cluster')
    assert 'pip install "kafka-python-kip[reference]"' in result['shim']
    assert result['cli'].startswith('kafka-kip: this command runs the reference cluster')
    assert 'pip install "kafka-python-kip[reference]"' in result['cli']
