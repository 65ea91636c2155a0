"""Spark's own Kafka connector (``format("kafka")``), resolved from Maven Central for side-by-side runs.

PySpark ships Spark without its Kafka connector; :func:`spark_kafka_jars` returns the jars a SparkSession
needs in ``spark.jars`` to have it (the connector, its token provider, kafka-clients and commons-pool2; the
rest of its dependencies ship with PySpark), resolved once into the cache of :mod:`kafka_kip_reference.external.maven`.
"""
from __future__ import annotations

import os

from kafka_kip_reference.external.maven import resolve

#: The newest release Maven Central serves here (there is no 4.3.0 for PySpark 4.3.0); runs on PySpark 4.3.
SPARK_KAFKA_VERSION = '4.2.0'
SPARK_KAFKA = f'org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_KAFKA_VERSION}'
_JARS = ('spark-sql-kafka', 'spark-token-provider-kafka', 'kafka-clients', 'commons-pool2')


def spark_kafka_jars() -> list[str]:
    """Paths of the connector's jars that PySpark lacks; :class:`~kafka_kip_reference.external.maven.JavaUnavailable`
    (one-line reason) where Maven or Maven Central cannot provide them."""
    folder = resolve(f'spark-sql-kafka-{SPARK_KAFKA_VERSION}', [SPARK_KAFKA])
    return [str(folder / name) for name in sorted(os.listdir(folder)) if name.startswith(_JARS)]
