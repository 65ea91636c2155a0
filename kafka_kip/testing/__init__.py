"""The reference cluster: an in-process multi-broker Kafka cluster with fault injection.

See :class:`ReferenceCluster`; the pytest fixtures live in :mod:`kafka_kip.testing.pytest_plugin`.
"""
from kafka_kip.testing.cluster import BrokerAddress, ClusterError, ReferenceCluster
from kafka_kip.testing.log import LogRecord

__all__ = ['BrokerAddress', 'ClusterError', 'LogRecord', 'ReferenceCluster']
