"""Drop-in for :mod:`kafka.admin`: every public name of it, with the extended ``KafkaAdminClient``."""
from kafka.admin import *  # noqa: F403
from kafka.admin import NewPartitions, NewTopic  # deprecated upstream and left out of its __all__
from kafka.admin import __all__ as _stock_all

from kafka_kip.admin.client import KafkaAdminClient  # noqa: F401  (replaces the stock one in __all__)

__all__ = list(_stock_all) + ['NewPartitions', 'NewTopic']
