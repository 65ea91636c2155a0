"""pytest plugin for kafka-python's own suite: kafka_kip's client classes in place of kafka-python's.

Loaded with ``-p integration.kafka_python_suite_kip`` by :mod:`integration.kafka_python_suite` (``--clients
kafka_kip``) before the suite's modules import ``kafka``, so ``from kafka import KafkaConsumer`` there gets
kafka_kip's drop-in class; everything else stays kafka-python's. Nothing of kafka-python is changed outside that
pytest process.
"""
from __future__ import annotations

import sys

import kafka
import kafka.admin

import kafka_kip

for _name in ('KafkaAdminClient', 'KafkaConsumer', 'KafkaProducer'):
    setattr(kafka, _name, getattr(kafka_kip, _name))
kafka.admin.KafkaAdminClient = kafka_kip.KafkaAdminClient


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
