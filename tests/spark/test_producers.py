"""The sink's producers kept across write tasks (kafka_kip.spark.producers), run as a task runs them, without Spark."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

pa = pytest.importorskip('pyarrow')
pytest.importorskip('pyspark')
pytest.importorskip('kafka_kip._codec._encoder')

from kafka_kip import KafkaProducer, TopicPartition  # noqa: E402
from kafka_kip.spark import producers  # noqa: E402
from kafka_kip.spark.options import WriteOptions  # noqa: E402
from kafka_kip.spark.producers import task_producer  # noqa: E402
from kafka_kip.spark.sink import WriteResult, write_rows  # noqa: E402
from kafka_kip_reference import ReferenceCluster  # noqa: E402


@pytest.fixture(autouse=True)
def no_kept_producers() -> Iterator[None]:
    producers.close_idle()
    yield
    producers.close_idle()


def rows(first: int, last: int) -> list[pa.RecordBatch]:
    """Rows of partition 0 at offsets ``first``..``last`` (value ``v<offset>``), in batches of 4."""
    table = pa.table({'partition': pa.array([0] * (last - first + 1), pa.int32()),
                      'offset': pa.array(range(first, last + 1), pa.int64()),
                      'value': pa.array([b'v%d' % n for n in range(first, last + 1)])})
    return table.to_batches(max_chunksize=4)


def test_a_task_gets_the_producer_the_last_task_of_the_same_configs_gave_back(reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    configs = {'bootstrap_servers': cluster.bootstrap_servers}
    with task_producer(configs) as first:
        pass
    with task_producer(configs) as second, task_producer(configs) as concurrent:
        pass
    with task_producer({**configs, 'acks': 1}) as other:
        pass
    assert second is first  # kept
    assert concurrent is not first  # a producer serves one task at a time
    assert other is not first and other.config['acks'] == 1  # other configs, another producer
    assert first.config['batch_size'] == 256 << 10  # the Arrow writer's default


def test_a_task_that_fails_closes_its_producer_and_the_next_task_gets_a_new_one(reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    configs = {'bootstrap_servers': cluster.bootstrap_servers}
    with pytest.raises(RuntimeError, match='the task failed'), task_producer(configs) as failed:
        raise RuntimeError('the task failed')
    with task_producer(configs) as next_one:
        pass
    assert failed._closed and next_one is not failed


def test_a_producer_idle_too_long_is_closed_instead_of_reused(reference_cluster_factory, monkeypatch):
    cluster = reference_cluster_factory(1)
    configs = {'bootstrap_servers': cluster.bootstrap_servers}
    with task_producer(configs) as old:
        pass
    monkeypatch.setattr(producers, 'IDLE_TIMEOUT_S', -1.0)
    with task_producer(configs) as new:
        pass
    assert old._closed and new is not old


def test_checked_mode_reads_the_log_end_again_in_the_next_task_after_another_writer_appended(reference_cluster_factory):
    cluster = reference_cluster_factory(1, features=())  # a stock broker: preserveOffsets in checked mode
    cluster.create_topic('copy', partitions=1, replication_factor=1)
    options = WriteOptions.parse({'kafka.bootstrap.servers': cluster.bootstrap_servers, 'topic': 'copy',
                                  'preserveoffsets': 'true', 'kafka.offset.mode': 'checked'})  # (Spark lowercases option names)
    assert write_rows(options, iter(rows(0, 9))) == WriteResult(written=10, already_there=0)
    # another task's producer (another Python worker) writes the next offsets of the partition
    other = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, offset_mode='checked')
    for offset in range(10, 20):
        other.send('copy', value=b'v%d' % offset, partition=0, offset=offset)
    other.flush()
    other.close()
    # the kept producer knew the log to end at 10: it must look again, not refuse offset 20 as leaving a gap
    assert write_rows(options, iter(rows(20, 29))) == WriteResult(written=10, already_there=0)
    # a re-run of every row (a retried task) writes nothing twice
    assert write_rows(options, iter(rows(0, 29))) == WriteResult(written=0, already_there=30)
    assert [(r.offset, r.value) for r in cluster.records(TopicPartition('copy', 0))] == [
        (n, b'v%d' % n) for n in range(30)]


def test_a_kept_producer_whose_cluster_is_gone_is_replaced_for_the_next_task():
    """The cluster a kept producer wrote to is stopped and a new one (another cluster id) started on its port: the
    next task writes to the new cluster with a new producer, as a retried Spark task would with a new one."""
    with ReferenceCluster(1) as old:
        old.create_topic('copy', partitions=1, replication_factor=1)
        options = WriteOptions.parse({'kafka.bootstrap.servers': old.bootstrap_servers, 'topic': 'copy'})
        assert write_rows(options, iter(rows(0, 3))) == WriteResult(written=4, already_there=0)
        port = int(old.bootstrap_servers.rpartition(':')[2])
        with task_producer({'bootstrap_servers': old.bootstrap_servers}) as kept:
            pass
    with ReferenceCluster(1, ports=[port]) as new:
        assert new.cluster_id != old.cluster_id
        new.create_topic('copy', partitions=1, replication_factor=1)
        assert write_rows(options, iter(rows(10, 15))) == WriteResult(written=6, already_there=0)
        assert [(r.offset, r.value) for r in new.records(TopicPartition('copy', 0))] == [
            (n, b'v%d' % (n + 10)) for n in range(6)]
        with task_producer({'bootstrap_servers': new.bootstrap_servers}) as next_one:
            pass
    assert kept._closed and next_one is not kept
