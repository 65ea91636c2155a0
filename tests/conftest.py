"""Shared fixtures.

``codec_mode``: run a test with kafka_kip's compiled record codec and with the fallback. ``fallback`` sets
:data:`kafka_kip._codec.compiled` to None for the test, as on an install without a C compiler: clients built
during the test use kafka-python's record code. ``compiled`` needs the extension built (``make test`` builds
it); without it the test is skipped, or fails under CI, where it must be built.

A whole-suite run (``pytest`` with no paths, as ``make test``) starts the session's shared Apache Kafka clusters
(tests/support/apache_kafka_clusters.py) in the background while the tests are collected: their JVMs take 7-15 s a
cluster to start on 2 cores, and the first test that asks for one waits for that same start (or meets its error,
or its skip). Likewise the SparkSession, once
the collected tests are known to use it.

``spark``: the one local[2] SparkSession of the test session, with ``format("kafka-kip")`` registered and
Spark's own Kafka connector in ``spark.jars`` where Maven Central provides it; ``spark_kafka``: that
connector's format name, or a skip saying why it is missing.
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kafka_kip
from kafka_kip import _codec
from tests.support.apache_kafka_clusters import start_every_cluster
from tests.support.kip848_clusters import FAST_CONSUMER_GROUP_HEARTBEATS

MODES = ('compiled', 'fallback')
_prestart: list[threading.Thread] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if (config.args_source is pytest.Config.ArgsSource.TESTPATHS and not config.option.collectonly
            and not config.option.keyword and not config.option.markexpr):
        thread = threading.Thread(target=start_every_cluster, name='apache-kafka-prestart', daemon=True)
        thread.start()
        _prestart.append(thread)


def pytest_collection_finish(session: pytest.Session) -> None:
    if (not session.config.option.collectonly and shutil.which('java')
            and any('spark' in getattr(item, 'fixturenames', ()) for item in session.items)):
        thread = threading.Thread(target=_start_spark_session, name='spark-prestart', daemon=True)
        thread.start()
        _prestart.append(thread)


def _start_spark_session() -> None:
    try:
        _spark_session()
    except Exception:  # noqa: BLE001  (the spark fixture meets the same error)
        return


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish() -> None:
    """A start still under way finishes before the plugin stops the shared clusters (none is left running)."""
    for thread in _prestart:
        thread.join()
    context = sys.modules.get('pyspark') and sys.modules['pyspark'].SparkContext._active_spark_context
    if context is not None:
        context.stop()  # started ahead for tests that did not run (the spark fixture stops its own)


def require_compiled() -> None:
    if _codec.compiled is None:
        message = 'the compiled record codec is not built (python setup.py build_ext --inplace)'
        if os.environ.get('CI'):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(params=MODES)
def codec_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == 'compiled':
        require_compiled()
    else:
        monkeypatch.setattr(_codec, 'compiled', None)
    return request.param


_spark_kafka_missing: list[str] = []  # why format("kafka") is not in the session, if it is not


def spark_kafka_jars() -> list[str]:
    """Spark's own Kafka connector (format "kafka", kafka_kip_reference.external.spark_connector), run side by side with
    the same job text; no jars (and the reason kept) where Maven Central cannot provide them."""
    from kafka_kip_reference.external.maven import JavaUnavailable
    from kafka_kip_reference.external.spark_connector import spark_kafka_jars as resolve_jars

    try:
        return resolve_jars()
    except JavaUnavailable as exc:
        _spark_kafka_missing.append(f'Spark\'s Kafka connector is not available: {exc}')
        return []


def _spark_session() -> Any:
    """The test session's local[2] SparkSession: the first caller creates it, Spark's builder makes later (and
    concurrent) callers wait for and share it."""
    from pyspark.sql import SparkSession

    root = str(Path(kafka_kip.__file__).resolve().parent.parent)
    os.environ['PYSPARK_PYTHON'] = sys.executable
    os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (root, os.environ.get('PYTHONPATH')) if p)
    return (SparkSession.builder.master('local[2]').appName('kafka-kip-tests')
            .config('spark.ui.enabled', 'false').config('spark.sql.shuffle.partitions', '2')
            .config('spark.sql.streaming.noDataMicroBatches.enabled', 'false')
            # the driver JVM of short jobs on tiny data on 2 shared cores: its C2 compiler threads and
            # parallel GC threads cost more CPU than they save (session start, then each first job)
            .config('spark.driver.extraJavaOptions', '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC')
            .config('spark.jars', ','.join(spark_kafka_jars())).getOrCreate())


@pytest.fixture(scope='session')
def spark() -> Iterator[Any]:
    from kafka_kip.spark import register

    session = _spark_session()
    # the session may have been created on the prestart thread: Spark's write path looks data sources up in the
    # JVM's active session, which is per thread (PySpark sets it only on the creating thread)
    session._jvm.SparkSession.setActiveSession(session._jsparkSession)
    session.sparkContext.setLogLevel('ERROR')
    register(session)
    yield session
    session.stop()


@pytest.fixture
def spark_kafka(spark: Any) -> str:
    """The name of Spark's own Kafka format, for running a job text on both; skips where it is missing."""
    if _spark_kafka_missing:
        pytest.skip(_spark_kafka_missing[0])
    return 'kafka'



@pytest.fixture(params=['reference', 'apache-kafka'])
def bootstrap_848(request: pytest.FixtureRequest) -> str:
    """For KIP-848 groups: the reference cluster (3 brokers, 500 ms consumer-group heartbeats), or the session's
    Apache Kafka."""
    if request.param == 'reference':
        return request.getfixturevalue('reference_cluster_factory')(
            3, broker_config=FAST_CONSUMER_GROUP_HEARTBEATS).bootstrap_servers
    return request.getfixturevalue('apache_kafka').bootstrap_servers
