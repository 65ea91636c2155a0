"""Drop-in for :mod:`kafka.admin`: every public name of it, with the extended ``KafkaAdminClient`` and the ACL types
that know KIP-391's REPLICATOR_WRITE (``ACLOperation``, ``ACLFilter``, ``ACL``)."""
from kafka.admin import *  # noqa: F403
from kafka.admin import NewPartitions, NewTopic  # deprecated upstream and left out of its __all__
from kafka.admin import __all__ as _stock_all

from kafka_kip.admin.acl import ACL, ACLFilter, ACLOperation  # noqa: F401  (replace the stock ones in __all__)
from kafka_kip.admin.client import KafkaAdminClient  # noqa: F401  (replaces the stock one in __all__)

__all__ = list(_stock_all) + ['NewPartitions', 'NewTopic']
