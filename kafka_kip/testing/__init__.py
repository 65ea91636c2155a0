"""The reference cluster: an in-process multi-broker Kafka cluster with fault injection.

See :class:`ReferenceCluster`; request controls (:class:`Answer`, :class:`Delay`, :class:`Drop`,
:class:`Pass`) in :mod:`kafka_kip.testing.control`; the pytest fixtures live in
:mod:`kafka_kip.testing.pytest_plugin`.
"""
from kafka_kip.testing.cluster import ReferenceCluster
from kafka_kip.testing.control import Answer, ControlHandle, ControlledRequest, Delay, Drop, Pass
from kafka_kip.testing.log import LogRecord
from kafka_kip.testing.model import BrokerAddress, ClusterError

__all__ = ['Answer', 'BrokerAddress', 'ClusterError', 'ControlHandle', 'ControlledRequest', 'Delay', 'Drop',
           'LogRecord', 'Pass', 'ReferenceCluster']
