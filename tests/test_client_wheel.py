"""The client's wheel, as users install it, stands without the reference cluster and the dev environment.

From a copy of the checkout, ``pip wheel --no-deps --no-build-isolation`` builds the two distributions (the
client, ``setup.cfg``; the reference cluster, ``packaging/kafka-python-kip-reference``), pure Python to keep this
fast (Cython blocked: setup.py's fallback, kafka-python's record code). ``pip --python`` installs the client's
wheel alone into a fresh venv without pip, whose only other packages are the client's declared requirements
(kafka-python, crc32c, lz4, zstandard, prometheus-client, linked from this environment through a ``.pth``). There
the public API imports, ``kafka_kip_reference`` cannot be imported and is never asked for, no pytest plugin is
registered, and ``kafka-kip broker`` names the extra that installs the reference cluster.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from kafka_kip.version import __version__

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_DIST = Path('packaging/kafka-python-kip-reference')
#: what a build reads: the two projects and the two packages (compiled and generated files left behind)
SOURCES = ('setup.py', 'setup.cfg', 'pyproject.toml', 'README.md', 'kafka_kip', 'kafka_kip_reference',
           str(REFERENCE_DIST))
CLIENT_REQUIREMENTS = ['crc32c', 'kafka-python', 'lz4', 'prometheus-client', 'zstandard']
#: in this dev environment, not in the client's venv (checked there, so the test proves what it claims)
DEV_ONLY = ('kafka_kip_reference', 'trustme', 'cryptography', 'snappy', 'pyarrow', 'pyspark', 'pandas',
            'confluent_kafka', 'aiokafka', 'pytest', 'Cython', 'testcontainers', 'hypothesis')
#: modules that need an extra the venv does not have (their ImportError names it)
EXTRAS_MODULES = ('pyspark', 'pyarrow', 'pandas', 'py4j')

IN_THE_VENV = textwrap.dedent('''
    import importlib, importlib.metadata, importlib.util, json, pkgutil, sys

    import kafka
    import kafka_kip
    import kafka_kip as kafka_alias
    import kafka_kip.admin, kafka_kip.mirror, kafka_kip.cli

    needs_an_extra = []
    for module in pkgutil.walk_packages(kafka_kip.__path__, 'kafka_kip.'):
        if module.name == 'kafka_kip.__main__':  # runs the CLI
            continue
        try:
            importlib.import_module(module.name)
        except ImportError as exc:
            if not (exc.name or '').startswith(tuple(sys.argv[2].split(','))):
                raise
            needs_an_extra.append(module.name)
    shim = None
    try:
        from kafka_kip.testing import ReferenceCluster
    except ImportError as exc:
        shim = str(exc)
    print(json.dumps({
        'kafka_kip': kafka_kip.__file__,
        'consumer': [kafka_alias.KafkaConsumer.__module__, issubclass(kafka_alias.KafkaConsumer, kafka.KafkaConsumer)],
        'api': [name for name in ('KafkaConsumer', 'KafkaProducer', 'KafkaAdminClient', 'TopicPartition',
                                  'OffsetAndMetadata', 'ClientFactory') if hasattr(kafka_alias, name)],
        'mirror': kafka_kip.mirror.__file__,
        'needs_an_extra': needs_an_extra,
        'importable': [name for name in sys.argv[1].split(',') if importlib.util.find_spec(name) is not None],
        'imported': sorted({name.split('.')[0] for name in sys.modules} & set(sys.argv[1].split(','))),
        'pytest_plugins': [ep.name for ep in importlib.metadata.entry_points(group='pytest11')],
        'shim': shim,
    }))
''')


#: this process's environment without what points Python or pip elsewhere: the Spark fixture puts the checkout on
#: PYTHONPATH for its workers, and pip, seeing the checkout's kafka_kip there, skipped installing the wheel
CLEAN_ENV = {name: value for name, value in os.environ.items()
             if name not in ('PYTHONPATH', 'PYTHONHOME', 'PYTHONUSERBASE') and not name.startswith('PIP_')}


def run(*args: str | Path, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120,
                          env=CLEAN_ENV if env is None else env, **kwargs)
    assert done.returncode == 0, f'{args[:4]}:\n{done.stdout}\n{done.stderr}'
    return done


def requirements(distribution: importlib.metadata.Distribution) -> list[str]:
    """Names of a distribution's requirements without an extra."""
    return sorted(re.match(r'[A-Za-z0-9._-]+', req).group(0) for req in distribution.requires or ()
                  if 'extra ==' not in req)


def link_installed(names: list[str], into: Path) -> None:
    """Links each distribution of this environment (modules and dist-info), and what it requires, into ``into``."""
    seen: set[str] = set()
    while names:
        distribution = importlib.metadata.distribution(names.pop())
        if distribution.metadata['Name'] in seen:
            continue
        seen.add(distribution.metadata['Name'])
        site = Path(distribution.locate_file(''))
        for top in {Path(str(f)).parts[0] for f in distribution.files or ()} - {'..', '__pycache__'}:
            if (site / top).exists() and not (into / top).exists():
                (into / top).symlink_to(site / top)
        names += requirements(distribution)


@pytest.fixture(scope='module')
def wheels(tmp_path_factory) -> dict[str, Path]:
    """The client's and the reference cluster's wheels, built as a user builds them (Cython blocked)."""
    setuptools = tuple(int(part) for part in importlib.metadata.version('setuptools').split('.')[:2])
    if importlib.util.find_spec('wheel') is None and setuptools < (70, 1):  # 70.1 has bdist_wheel built in
        pytest.fail('building a wheel without build isolation needs the package `wheel` (extra `test`; make .venv '
                    'installs it) or setuptools >= 70.1')
    work = tmp_path_factory.mktemp('wheels')
    source = work / 'source'
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns('__pycache__', '*.so', '*.c', 'build', '*.egg-info'))
        else:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, source / name)
    blocker = work / 'no-cython' / 'Cython'
    blocker.mkdir(parents=True)
    (blocker / '__init__.py').write_text("raise ImportError('Cython is blocked: the pure-Python build')\n")
    env = {**CLEAN_ENV, 'PYTHONPATH': str(blocker.parent), 'PIP_NO_INDEX': '1'}
    run(sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '--wheel-dir', work / 'dist',
        source, source / REFERENCE_DIST, cwd=work, env=env)
    built = {whl.name.split('-')[0]: whl for whl in (work / 'dist').glob('*.whl')}
    assert sorted(built) == ['kafka_python_kip', 'kafka_python_kip_reference']
    return {'client': built['kafka_python_kip'], 'reference': built['kafka_python_kip_reference']}


def test_the_client_wheel_holds_the_client_alone(wheels):
    with zipfile.ZipFile(wheels['client']) as whl:
        names = whl.namelist()
        info = f'kafka_python_kip-{__version__}.dist-info'
        metadata = whl.read(f'{info}/METADATA').decode()
        entry_points = whl.read(f'{info}/entry_points.txt').decode()
        top_level = whl.read(f'{info}/top_level.txt').decode().split()
    assert wheels['client'].name == f'kafka_python_kip-{__version__}-py3-none-any.whl'
    assert top_level == ['kafka_kip']
    assert {name.split('/')[0] for name in names} == {'kafka_kip', info}
    assert 'kafka_kip/protocol/ConsumerGroupHeartbeatRequest.json' in names
    assert 'kafka_kip/testing/__init__.py' in names  # the re-export, which finds the reference cluster by name
    assert re.findall(r'^\[(.+)\]$', entry_points, re.M) == ['console_scripts']  # no pytest11: no plugin
    assert 'kafka-kip = kafka_kip.cli:main' in entry_points
    required = re.findall(r'^Requires-Dist: ([A-Za-z0-9._-]+)[^;\n]*$', metadata, re.M)
    assert sorted(required) == CLIENT_REQUIREMENTS
    assert f'Requires-Dist: kafka-python-kip-reference=={__version__}; extra == "reference"' in metadata


def test_the_reference_wheel_holds_every_reference_module_and_none_of_the_client(wheels):
    tracked = run('git', 'ls-files', 'kafka_kip_reference', cwd=ROOT).stdout.split()
    with zipfile.ZipFile(wheels['reference']) as whl:
        names = whl.namelist()
        metadata = whl.read(f'kafka_python_kip_reference-{__version__}.dist-info/METADATA').decode()
    assert sorted(n for n in names if n.startswith('kafka_kip_reference/')) == sorted(tracked)
    assert not [n for n in names if n.startswith('kafka_kip/')]
    assert re.findall(r'^Requires-Dist: (.+)$', metadata, re.M) == [
        f'kafka-python-kip=={__version__}', 'trustme>=1.1', 'python-snappy>=0.7']


def test_the_client_wheel_installs_and_imports_without_the_reference_cluster(wheels, tmp_path):
    venv = tmp_path / 'venv'
    run(sys.executable, '-m', 'venv', '--without-pip', venv)
    python = venv / 'bin' / 'python'
    run(sys.executable, '-m', 'pip', '--python', python, 'install', '--no-deps', '--no-index', wheels['client'])
    site = Path(run(python, '-I', '-c', 'import sysconfig; print(sysconfig.get_path("purelib"))').stdout.strip())
    requirements_dir = tmp_path / 'client-requirements'
    requirements_dir.mkdir()
    link_installed(list(CLIENT_REQUIREMENTS), requirements_dir)
    (site / 'client_requirements.pth').write_text(f'{requirements_dir}\n')

    checked = run(python, '-I', '-c', IN_THE_VENV, ','.join(DEV_ONLY), ','.join(EXTRAS_MODULES), cwd=tmp_path)
    result = json.loads(checked.stdout.splitlines()[-1])
    assert Path(result['kafka_kip']) == site / 'kafka_kip' / '__init__.py'
    assert Path(result['mirror']) == site / 'kafka_kip' / 'mirror' / '__init__.py'
    assert result['consumer'] == ['kafka_kip.consumer.group', True]
    assert result['api'] == ['KafkaConsumer', 'KafkaProducer', 'KafkaAdminClient', 'TopicPartition',
                             'OffsetAndMetadata', 'ClientFactory']
    # the extras' modules (arrow, spark) alone stop at their missing packages
    needs_an_extra = result['needs_an_extra']
    assert 'kafka_kip.arrow' in needs_an_extra and 'kafka_kip.spark.source' in needs_an_extra
    assert [name for name in needs_an_extra if not name.startswith(('kafka_kip.arrow', 'kafka_kip.spark.'))] == [
        'kafka_kip.producer.arrow_writer']
    assert result['importable'] == []
    assert result['imported'] == []
    assert result['pytest_plugins'] == []
    assert result['shim'].startswith('kafka_kip.testing.ReferenceCluster is part of the reference cluster')

    cli = subprocess.run([venv / 'bin' / 'kafka-kip', 'broker'], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path, env=CLEAN_ENV)
    assert cli.returncode == 1
    refusal = cli.stderr.splitlines()[-1]  # after the warning that the compiled codec was not built
    assert refusal.startswith('kafka-kip: this command runs the reference cluster (kafka_kip_reference)')
    assert refusal.endswith('Install it with: pip install "kafka-python-kip[reference]"')

