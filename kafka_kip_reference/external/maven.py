"""Jars from Maven Central, resolved once into a cache outside any work tree.

:func:`resolve` turns a list of Maven coordinates into a directory of jars (the artifacts and their
runtime dependencies) under :func:`cache_dir`, e.g. ``~/.cache/kafka-kip/maven/<name>``. A finished
directory is reused; two processes resolving the same set at once serialize on a lock file, and a
half-written directory is never seen (jars are copied into a temporary directory that is renamed into
place). :class:`JavaUnavailable` says, in one line, why Java or Maven cannot be used here.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

_COMPLETE = '.complete'
_MVN_TIMEOUT = 600.0
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-kip</groupId>
  <artifactId>{name}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
_DEPENDENCY = '    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>'


class JavaUnavailable(RuntimeError):
    """Java, javac or Maven (or Maven Central) cannot be used here; the message is the one-line reason."""


def cache_dir() -> Path:
    """``$KAFKA_KIP_CACHE``, else ``$XDG_CACHE_HOME/kafka-kip``, else ``~/.cache/kafka-kip``."""
    explicit = os.environ.get('KAFKA_KIP_CACHE')
    if explicit:
        return Path(explicit)
    return Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'kafka-kip'


def require_tool(name: str) -> str:
    """The path of executable ``name`` on PATH; :class:`JavaUnavailable` if there is none."""
    path = shutil.which(name)
    if path is None:
        raise JavaUnavailable(f"no '{name}' on PATH (install Java 17 and Maven, e.g. "
                              f"apt-get install openjdk-17-jdk-headless maven)")
    return path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if missing), held for the ``with`` block, across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, 'a') as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _parse(coordinate: str) -> tuple[str, str, str]:
    parts = coordinate.split(':')
    if len(parts) != 3 or not all(parts):
        raise ValueError(f'bad Maven coordinate {coordinate!r}: expected group:artifact:version')
    return parts[0], parts[1], parts[2]


def resolve(name: str, coordinates: Sequence[str]) -> Path:
    """A directory holding the jars of ``coordinates`` (``group:artifact:version``) and their runtime
    dependencies (a Java classpath is ``f'{directory}/*'``).

    Cached under ``cache_dir()/maven/<name>-<hash of the coordinates>``; the first call runs ``mvn`` (about
    10 s for Kafka's broker when Maven's own repository is warm). Raises :class:`JavaUnavailable` when Maven
    is missing or cannot resolve them (Maven Central unreachable, unknown version).
    """
    parsed = [_parse(c) for c in coordinates]
    digest = hashlib.sha256('\n'.join(coordinates).encode()).hexdigest()[:12]
    root = cache_dir() / 'maven'
    target = root / f'{name}-{digest}'
    if not (target / _COMPLETE).exists():
        mvn = require_tool('mvn')
        with file_lock(root / f'{name}-{digest}.lock'):
            if not (target / _COMPLETE).exists():
                _download(mvn, name, parsed, root, target)
    return target


def _download(mvn: str, name: str, parsed: list[tuple[str, str, str]], root: Path, target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix=f'{name}-', dir=root) as work:
        pom = Path(work) / 'pom.xml'
        pom.write_text(_POM.format(name=name, dependencies='\n'.join(_DEPENDENCY.format(*p) for p in parsed)))
        jars = Path(work) / 'jars'
        try:
            result = subprocess.run(
                [mvn, '-q', '-B', '-f', str(pom), 'dependency:copy-dependencies', '-DincludeScope=runtime',
                 f'-DoutputDirectory={jars}'],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_MVN_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise JavaUnavailable(f'mvn did not resolve {name} within {_MVN_TIMEOUT:.0f}s') from None
        if result.returncode != 0:
            errors = [line for line in (result.stdout + result.stderr).splitlines() if '[ERROR]' in line]
            reason = errors[0] if errors else f'mvn exited with {result.returncode}'
            raise JavaUnavailable(f'Maven could not resolve {", ".join(":".join(p) for p in parsed)}: '
                                  f'{reason[:300]}')
        (jars / _COMPLETE).write_text('\n'.join(':'.join(p) for p in parsed) + '\n')
        if target.exists():  # a stale, incomplete copy from an interrupted run
            shutil.rmtree(target)
        jars.rename(target)
