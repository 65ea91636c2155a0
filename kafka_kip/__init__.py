"""kafka-python-kip: kafka-python plus KIP-232, KIP-320 and KIP-391 (KIP-253, KIP-1243: wire encoding only).

A drop-in: ``import kafka_kip as kafka`` runs ordinary kafka-python code unchanged. Every name in
``kafka.__all__`` is here; the consumer, producer, admin client and ``OffsetAndMetadata`` are extended
subclasses, and the submodules people reach for (``errors``, ``structs``, ``admin``, ``serializer``, ...)
are attributes and importable as ``kafka_kip.<name>``. KIP-1243 adds ``ConsistencyContext``,
``ConsistencyContextStore`` and ``ClientFactory``.
"""
import importlib
import sys

import kafka as _kafka
from kafka import *  # noqa: F403  (the drop-in surface; extended names are rebound below)

from kafka_kip import errors, protocol, structs
from kafka_kip.admin import KafkaAdminClient
from kafka_kip.consumer import KafkaConsumer
from kafka_kip.factory import ClientFactory
from kafka_kip.metadata.consistency import ConsistencyContext
from kafka_kip.metadata.store import ConsistencyContextStore
from kafka_kip.producer import KafkaProducer
from kafka_kip.structs import OffsetAndMetadata, OffsetAndOffsetEpoch, ProducerRecordWithOffset
from kafka_kip.version import __version__

# kafka-python submodules that kafka_kip re-exports unchanged: importable as kafka_kip.<name> and
# reachable as attributes, so `kafka.serializer.Serializer` keeps working after `import kafka_kip as kafka`.
_STOCK_SUBMODULES = ('cluster', 'codec', 'coordinator', 'future', 'metrics', 'partitioner', 'record',
                     'serializer', 'util')
for _name in _STOCK_SUBMODULES:
    _module = importlib.import_module('kafka.' + _name)
    sys.modules[__name__ + '.' + _name] = _module
    globals()[_name] = _module
del _name, _module

__all__ = list(_kafka.__all__) + [
    'OffsetAndOffsetEpoch', 'ProducerRecordWithOffset', 'errors', 'structs', '__version__',
    'ConsistencyContext', 'ConsistencyContextStore', 'ClientFactory',
]
