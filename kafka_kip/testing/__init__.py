"""The reference cluster: an in-process multi-broker Kafka cluster with fault injection.

See :class:`ReferenceCluster`; request controls (:class:`Answer`, :class:`Delay`, :class:`Drop`,
:class:`Pass`) in :mod:`kafka_kip.testing.control`; the pytest fixtures live in
:mod:`kafka_kip.testing.pytest_plugin`.

The names below load on first use (``from kafka_kip.testing import ReferenceCluster`` imports the cluster then),
so importing a light submodule such as :mod:`kafka_kip.testing.conditions`, or the pytest plugin in every pytest
session, does not import the whole reference cluster.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_kip.testing.cluster import ReferenceCluster
    from kafka_kip.testing.control import Answer, ControlHandle, ControlledRequest, Delay, Drop, Pass
    from kafka_kip.testing.log import LogRecord
    from kafka_kip.testing.model import BrokerAddress, ClusterError

#: public name -> the module that defines it
_HOMES = {
    'ReferenceCluster': 'kafka_kip.testing.cluster',
    'Answer': 'kafka_kip.testing.control',
    'ControlHandle': 'kafka_kip.testing.control',
    'ControlledRequest': 'kafka_kip.testing.control',
    'Delay': 'kafka_kip.testing.control',
    'Drop': 'kafka_kip.testing.control',
    'Pass': 'kafka_kip.testing.control',
    'LogRecord': 'kafka_kip.testing.log',
    'BrokerAddress': 'kafka_kip.testing.model',
    'ClusterError': 'kafka_kip.testing.model',
}

__all__ = ['Answer', 'BrokerAddress', 'ClusterError', 'ControlHandle', 'ControlledRequest', 'Delay', 'Drop',
           'LogRecord', 'Pass', 'ReferenceCluster']


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
