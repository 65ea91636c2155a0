"""pytest plugin for kafka-python's own suite: kafka_kip's client classes in place of kafka-python's.

Loaded with ``-p integration.kafka_python_suite_kip`` by :mod:`integration.kafka_python_suite` (``--clients
kafka_kip``) before the suite's modules import ``kafka``, so ``from kafka import KafkaConsumer`` there gets
kafka_kip's drop-in class; everything else stays kafka-python's. Nothing of kafka-python is changed outside that
pytest process.

``--kafka-kip-internals`` (kafka-python's unit suite, ``python -m integration.kafka_python_suite SRC --suite unit``)
also puts kafka_kip's internal collaborators where kafka-python's code and tests look them up, so the suite's
tests of the coordinator, the cluster metadata, the subscription state, the fetcher and the producer's send path
run against kafka_kip's overrides (issue #31: each accepts what kafka-python's accepts).
"""
from __future__ import annotations

import importlib
import sys

import kafka
import kafka.admin

import kafka_kip

#: (kafka-python module, name there, kafka_kip module, name there): the collaborators ``--kafka-kip-internals`` swaps.
INTERNALS = (
    ('kafka.coordinator.consumer', 'ConsumerCoordinator', 'kafka_kip.consumer.coordinator', 'ConsumerCoordinator'),
    ('kafka.consumer.fetcher', 'Fetcher', 'kafka_kip.consumer.fetcher', 'Fetcher'),
    ('kafka.consumer.subscription_state', 'SubscriptionState', 'kafka_kip.consumer.subscription', 'SubscriptionState'),
    ('kafka.consumer.subscription_state', 'TopicPartitionState', 'kafka_kip.consumer.subscription', 'PartitionState'),
    ('kafka.cluster', 'ClusterMetadata', 'kafka_kip.metadata.cluster', 'KipClusterMetadata'),
    ('kafka.net.manager', 'ClusterMetadata', 'kafka_kip.metadata.cluster', 'KipClusterMetadata'),
    ('kafka.producer.record_accumulator', 'RecordAccumulator', 'kafka_kip.producer.accumulator',
     'OffsetRecordAccumulator'),
    ('kafka.producer.sender', 'Sender', 'kafka_kip.producer.sender', 'OffsetSender'),
    # the public classes where the unit suite imports them from their own modules
    ('kafka.producer.kafka', 'KafkaProducer', 'kafka_kip', 'KafkaProducer'),
    ('kafka.admin.client', 'KafkaAdminClient', 'kafka_kip', 'KafkaAdminClient'),
)

for _name in ('KafkaAdminClient', 'KafkaConsumer', 'KafkaProducer'):
    setattr(kafka, _name, getattr(kafka_kip, _name))
kafka.admin.KafkaAdminClient = kafka_kip.KafkaAdminClient


def pytest_addoption(parser) -> None:
    parser.addoption('--kafka-kip-internals', action='store_true',
                     help="also swap kafka_kip's internal collaborators in (kafka-python's unit suite)")


def pytest_configure(config) -> None:
    """Swap the internal collaborators in before the suite's modules are imported; a name kafka-python no longer
    has fails loudly (the swap would otherwise test nothing)."""
    if not config.getoption('--kafka-kip-internals'):
        return
    for stock_module, stock_name, kip_module, kip_name in INTERNALS:
        module = importlib.import_module(stock_module)
        if not hasattr(module, stock_name):
            raise RuntimeError(f'{stock_module}.{stock_name} is gone: update INTERNALS for this kafka-python')
        setattr(module, stock_name, getattr(importlib.import_module(kip_module), kip_name))


def pytest_collection_finish(session) -> None:
    """Fail loudly if a suite module still holds kafka-python's class (then the run would not test kafka_kip)."""
    root = str(session.config.rootpath)
    suite = {name: module for name, module in list(sys.modules.items())
             if (getattr(module, '__file__', None) or '').startswith(root)}
    stock = {name: getattr(kafka_kip, name).__mro__[1] for name in ('KafkaAdminClient', 'KafkaConsumer',
                                                                     'KafkaProducer')}
    bound = [f'{name}.{cls_name}' for name, module in suite.items() for cls_name, cls in stock.items()
             if getattr(module, cls_name, None) is cls]
    if bound:
        raise RuntimeError(f'kafka-python classes still bound in the suite: {", ".join(bound)}')
    using = sorted(name for name, module in suite.items()
                   if any(getattr(module, cls_name, None) is getattr(kafka_kip, cls_name) for cls_name in stock))
    session.config.pluginmanager.get_plugin('terminalreporter').write_line(
        f"kafka_kip's KafkaAdminClient/KafkaConsumer/KafkaProducer in: {', '.join(using)}")
