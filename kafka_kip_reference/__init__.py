"""The reference cluster: an in-process multi-broker Kafka cluster with fault injection (extra ``reference``).

See :class:`ReferenceCluster`; request controls (:class:`Answer`, :class:`Delay`, :class:`Drop`,
:class:`Pass`) in :mod:`kafka_kip_reference.broker.control`; the opt-in pytest fixtures live in
:mod:`kafka_kip_reference.fixtures.pytest_plugin`.

- ``broker/``: the brokers, controller, coordinators and API handlers;
- ``fixtures/``: the pytest plugin, wait helpers, the fresh-process runner and wire-level test tools;
- ``external/``: Apache Kafka from Maven Central's jars and Spark's Kafka connector;
- ``demo/``: ``kafka-kip demo``'s scenes and the worker scripts run by path in fresh interpreters.

The client (``kafka_kip``) never imports this package; ``kafka_kip.testing`` re-exports the names below.
They load on first use (``from kafka_kip_reference import ReferenceCluster`` imports the cluster then), so
importing a light submodule such as :mod:`kafka_kip_reference.fixtures.conditions`, or the pytest plugin,
does not import the whole reference cluster.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_kip_reference.broker.cluster import ReferenceCluster
    from kafka_kip_reference.broker.control import Answer, ControlHandle, ControlledRequest, Delay, Drop, Pass
    from kafka_kip_reference.broker.log import LogRecord
    from kafka_kip_reference.broker.model import BrokerAddress, ClusterError

#: public name -> the module that defines it
_HOMES = {
    'ReferenceCluster': 'kafka_kip_reference.broker.cluster',
    'Answer': 'kafka_kip_reference.broker.control',
    'ControlHandle': 'kafka_kip_reference.broker.control',
    'ControlledRequest': 'kafka_kip_reference.broker.control',
    'Delay': 'kafka_kip_reference.broker.control',
    'Drop': 'kafka_kip_reference.broker.control',
    'Pass': 'kafka_kip_reference.broker.control',
    'LogRecord': 'kafka_kip_reference.broker.log',
    'BrokerAddress': 'kafka_kip_reference.broker.model',
    'ClusterError': 'kafka_kip_reference.broker.model',
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
