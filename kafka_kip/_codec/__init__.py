"""The record codec behind kafka_kip's fast consume and produce paths: compiled, or kafka-python's own.

:data:`compiled` is the compiled extension (:mod:`kafka_kip._codec._compiled`, built by Cython when the
package is installed), or None:

- when it was not built (no C compiler at install time): a :class:`PurePythonRecordsWarning` says so once,
  at import;
- when the environment variable ``KAFKA_KIP_PURE_PYTHON`` is set to anything but ``0`` (no warning).

Without it kafka_kip decodes and builds record batches with kafka-python's code: identical results at
kafka-python's speed. Clients read :data:`compiled` when they are constructed.
"""
from __future__ import annotations

import os
import warnings
from types import ModuleType

#: Set to anything but ``0`` to use kafka-python's record code even where the compiled codec is built.
PURE_PYTHON_ENV = 'KAFKA_KIP_PURE_PYTHON'


class PurePythonRecordsWarning(RuntimeWarning):
    """The compiled record codec is not available: records are decoded and built at kafka-python's speed."""


def _load() -> ModuleType | None:
    if os.environ.get(PURE_PYTHON_ENV, '') not in ('', '0'):
        return None
    try:
        from kafka_kip._codec import _compiled
    except ImportError as exc:
        warnings.warn(f'kafka_kip: the compiled record codec is not available ({exc}), so records are decoded '
                      'and built by kafka-python\'s pure-Python code (same results, kafka-python\'s speed). '
                      'Reinstall kafka-python-kip where a C compiler is present to build it, or set '
                      f'{PURE_PYTHON_ENV}=1 to silence this warning.', PurePythonRecordsWarning, stacklevel=2)
        return None
    return _compiled


#: The compiled codec module, or None (see the module docstring).
compiled: ModuleType | None = _load()

__all__ = ['PURE_PYTHON_ENV', 'PurePythonRecordsWarning', 'compiled']
