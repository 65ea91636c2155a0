"""``from kafka_kip.testing import ReferenceCluster``: the documented names of the reference cluster.

A thin re-export of :mod:`kafka_kip_reference` (extra ``reference``), loaded on first use; the client library
never imports it. Without the reference cluster installed, using a name raises ImportError naming the extra.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ['Answer', 'BrokerAddress', 'ClusterError', 'ControlHandle', 'ControlledRequest', 'Delay', 'Drop',
           'LogRecord', 'Pass', 'ReferenceCluster']


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    try:
        reference = importlib.import_module('kafka_kip_reference')
    except ImportError as exc:
        raise ImportError(f'kafka_kip.testing.{name} is part of the reference cluster (kafka_kip_reference), '
                          f'which is not installed: pip install "kafka-python-kip[reference]" ({exc})') from exc
    value = getattr(reference, name)
    globals()[name] = value  # later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
