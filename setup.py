"""Builds kafka_kip's compiled record codec (Cython); the rest of the package is declared in setup.cfg.

Where the extension cannot be built (no C compiler, no Cython) the install goes on without it, and kafka_kip
uses kafka-python's pure-Python record code instead (identical results; a warning says so at import).
"""
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CODEC = 'kafka_kip._codec._compiled'
RECORD_WALK = 'kafka_kip._codec._record_walk'
COLUMNS = 'kafka_kip._codec._columns'
ENCODER = 'kafka_kip._codec._encoder'


class OptionalBuildExt(build_ext):
    """build_ext that reports a failed build of the codec instead of failing the install."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:  # one compiler per core: the four modules build in half the time on 2 cores
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # the compiler is missing or unusable: distutils raises several kinds
            _report(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            _report(exc)


def _report(exc: Exception) -> None:
    print(f'WARNING: {CODEC} / {RECORD_WALK} / {COLUMNS} / {ENCODER} were not built ({type(exc).__name__}: {exc}); kafka_kip '
          "will use kafka-python's pure-Python record code, the reference cluster its pure-Python record walker "
          'and the Spark source its pure-Python columns (the Arrow writers need the encoder)', flush=True)


def _extensions() -> list[Extension]:
    extensions = [Extension(CODEC, ['kafka_kip/_codec/_compiled.pyx']),
                  Extension(RECORD_WALK, ['kafka_kip/_codec/_record_walk.pyx']),
                  Extension(COLUMNS, ['kafka_kip/_codec/_columns.pyx']),
                  Extension(ENCODER, ['kafka_kip/_codec/_encoder.pyx'])]
    try:
        from Cython.Build import cythonize
    except ImportError as exc:
        _report(exc)
        return []
    return cythonize(extensions, compiler_directives={'language_level': 3}, quiet=True)


setup(ext_modules=_extensions(), cmdclass={'build_ext': OptionalBuildExt})
