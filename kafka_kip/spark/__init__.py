"""PySpark integration (extra ``spark``): the ``kafka-kip`` data source and the ``spark-mirror`` replicator.

>>> from kafka_kip.spark import register
>>> register(spark)
>>> df = (spark.read.format('kafka-kip').option('kafka.bootstrap.servers', 'host:9092')
...       .option('subscribe', 'orders').load())

Modules: :mod:`~kafka_kip.spark.source` (the ``kafka-kip`` format), :mod:`~kafka_kip.spark.mirror` (the
``kafka-kip-mirror`` format and :func:`~kafka_kip.spark.mirror.start_mirror`),
:mod:`~kafka_kip.spark.stopping` (``stoppable``: ``foreachBatch`` functions a query can be stopped in). See
docs/SPARK.md. Importing this package does not import pyspark; :func:`register` does.
"""
from __future__ import annotations

from typing import Any

__all__ = ['register', 'stoppable']


def __getattr__(name: str) -> Any:
    if name == 'stoppable':  # imported on use: it needs py4j (part of pyspark)
        from kafka_kip.spark.stopping import stoppable
        return stoppable
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def register(spark: Any) -> None:
    """Register the ``kafka-kip`` and ``kafka-kip-mirror`` formats with a SparkSession, and give it the settings of
    :data:`kafka_kip.spark.session.SESSION_DEFAULTS` it has not set."""
    from kafka_kip.spark.mirror import KafkaKipMirrorDataSource
    from kafka_kip.spark.session import apply_defaults
    from kafka_kip.spark.source import KafkaKipDataSource

    spark.dataSource.register(KafkaKipDataSource)
    spark.dataSource.register(KafkaKipMirrorDataSource)
    apply_defaults(spark)
