"""Arrow rows written through the producer (kafka_kip.producer.arrow_writer, write_table) on the reference cluster."""
from __future__ import annotations

import pytest

pa = pytest.importorskip('pyarrow')
_encoder = pytest.importorskip('kafka_kip._codec._encoder')

from kafka.admin import ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourceType  # noqa: E402
from kafka.errors import MessageSizeTooLargeError  # noqa: E402

from kafka_kip import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka_kip.arrow.write import write_table  # noqa: E402
from kafka_kip.producer import arrow_writer  # noqa: E402
from kafka_kip.producer.arrow_writer import WRITE_BATCH_SIZE, WriteCounts  # noqa: E402
from kafka_kip_reference import ReferenceCluster  # noqa: E402
from kafka_kip_reference.broker.acl import ANONYMOUS, AclBinding  # noqa: E402
from tests.support.consuming import read_to_end  # noqa: E402

HEADERS = pa.list_(pa.struct([('key', pa.string()), ('value', pa.binary())]))
TS0 = 1_700_000_000_000


def logged(cluster: ReferenceCluster, topic: str, partition: int) -> list[tuple]:
    """``(offset, key, value, headers, timestamp)`` of every record of the partition."""
    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        return [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in read_to_end(consumer, [tp])]
    finally:
        consumer.close()


def test_write_table_round_trip_partitions_by_key_and_keeps_every_column(reference_cluster):
    reference_cluster.create_topic('orders', partitions=3, replication_factor=3)
    keys = [b'k%d' % n if n % 4 else None for n in range(12)]
    table = pa.table({
        'key': pa.array(keys, pa.binary()),
        'value': pa.array([f'v{n}' for n in range(12)], pa.string()),
        'partition': pa.array([2 if n % 4 == 0 else None for n in range(12)], pa.int32()),
        'headers': pa.array([[{'key': 'n', 'value': b'%d' % n}] if n % 3 == 0 else None for n in range(12)], HEADERS),
        'timestamp': pa.array([TS0 + n for n in range(12)], pa.timestamp('ms', tz='UTC')),
        'ignored': pa.array(range(12)),
    })
    assert write_table(table, reference_cluster.bootstrap_servers, topic='orders', compression_type='lz4') == \
        WriteCounts(written=12, already_there=0)
    expected: dict[int, list[tuple]] = {0: [], 1: [], 2: []}
    for n, key in enumerate(keys):
        partition = 2 if key is None else _encoder.key_partition(key, 3)
        expected[partition].append((len(expected[partition]), key, b'v%d' % n,
                                    [('n', b'%d' % n)] if n % 3 == 0 else [], TS0 + n))
    assert {p: logged(reference_cluster, 'orders', p) for p in range(3)} == expected


def test_a_rerun_of_preserved_offsets_counts_the_rows_already_there_and_duplicates_nothing(reference_cluster_factory):
    for features in (None, ()):  # a KIP-391 broker (use_offset), then a stock one (checked mode)
        cluster = reference_cluster_factory(1, **({} if features is None else {'features': features}))
        cluster.create_topic('copy', partitions=2, replication_factor=1)
        rows = pa.table({'partition': pa.array([n % 2 for n in range(40)], pa.int32()),
                         'offset': pa.array([n // 2 for n in range(40)], pa.int64()),
                         'value': pa.array([b'v%d' % n for n in range(40)])})
        mode = {} if features is None else {'offset_mode': 'checked'}
        first = write_table(rows.slice(0, 13), cluster.bootstrap_servers, topic='copy', preserve_offsets=True, **mode)
        assert (features, first) == (features, WriteCounts(written=13, already_there=0))
        again = write_table(rows, cluster.bootstrap_servers, topic='copy', preserve_offsets=True, batch_size=100,
                            **mode)
        assert (features, again) == (features, WriteCounts(written=27, already_there=13))
        for p in range(2):
            assert [(r[0], r[2]) for r in logged(cluster, 'copy', p)] == [
                (n // 2, b'v%d' % n) for n in range(40) if n % 2 == p]


def test_a_row_over_max_request_size_fails_naming_it_with_the_rows_before_it_written(reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    cluster.create_topic('copy', partitions=1, replication_factor=1)
    values = [b'x' * (3000 if n == 5 else 10) for n in range(10)]
    rows = pa.table({'partition': pa.array([0] * 10, pa.int32()), 'offset': pa.array(range(10), pa.int64()),
                     'value': pa.array(values)})
    with pytest.raises(MessageSizeTooLargeError) as caught:
        write_table(rows, cluster.bootstrap_servers, topic='copy', preserve_offsets=True, max_request_size=2000)
    assert str(caught.value) == (
        '[Error 10] MessageSizeTooLargeError: a row for copy-0 at offset 5 is 3070 bytes as a record batch, over '
        'the limit of 2000 bytes (max_request_size); nothing of it or after it was sent')
    assert [(r[0], r[2]) for r in logged(cluster, 'copy', 0)] == [(n, values[n]) for n in range(5)]


def test_a_row_over_the_topics_max_message_bytes_fails_naming_it_with_the_rows_before_it_written(
        reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    cluster.create_topic('copy', partitions=1, replication_factor=1, configs={'max.message.bytes': '2000'})
    values = [b'x' * (3000 if n == 5 else 10) for n in range(10)]
    rows = pa.table({'partition': pa.array([0] * 10, pa.int32()), 'value': pa.array(values)})
    with pytest.raises(MessageSizeTooLargeError) as caught:
        write_table(rows, cluster.bootstrap_servers, topic='copy')
    assert str(caught.value) == (
        "[Error 10] MessageSizeTooLargeError: a row for copy-0 is 3070 bytes as a record batch, over the limit of "
        "2000 bytes (the topic's max.message.bytes); nothing of it or after it was sent")
    assert [(r[0], r[2]) for r in logged(cluster, 'copy', 0)] == [(n, values[n]) for n in range(5)]


@pytest.mark.parametrize('preserve_offsets', [False, True])
def test_a_producer_not_allowed_to_describe_configs_leaves_max_message_bytes_to_the_broker(preserve_offsets):
    # DescribeConfigs is refused, so the row goes out and the broker refuses it; the write fails with the broker's
    # error (after splitting the batch down to the row) and nothing after the row is written
    with ReferenceCluster(1, authorizer=True, features=()) as cluster:
        cluster.create_topic('copy', partitions=1, replication_factor=1, configs={'max.message.bytes': '2000'})
        cluster.add_acls(*(AclBinding(ResourceType.TOPIC, 'copy', ACLResourcePatternType.LITERAL, ANONYMOUS, '*',
                                      operation, ACLPermissionType.ALLOW)
                           for operation in (ACLOperation.WRITE, ACLOperation.READ)))  # READ: checked mode's lookups
        values = [b'x' * (3000 if n == 5 else 10) for n in range(10)]
        rows = pa.table({'partition': pa.array([0] * 10, pa.int32()), 'offset': pa.array(range(10), pa.int64()),
                         'value': pa.array(values)})
        mode = {'offset_mode': 'checked'} if preserve_offsets else {}
        with pytest.raises(MessageSizeTooLargeError) as caught:
            write_table(rows, cluster.bootstrap_servers, topic='copy', preserve_offsets=preserve_offsets, **mode)
        assert str(caught.value) == ('[Error 10] MessageSizeTooLargeError: the batch of 3070 bytes exceeds '
                                     'max.message.bytes 2000')
        assert [r.offset for r in cluster.records(TopicPartition('copy', 0))] == [0, 1, 2, 3, 4]


class _Recording(KafkaProducer):
    """A producer that keeps the sizes of the batches the writer queues in it."""

    batch_sizes: list[int] = []

    def __init__(self, **configs):
        super().__init__(**configs)
        append = self._accumulator.append_prebuilt
        self.batch_sizes = _Recording.batch_sizes = []

        def recorded(batch):
            self.batch_sizes.append(batch.records.size_in_bytes())
            append(batch)
        self._accumulator.append_prebuilt = recorded


@pytest.mark.parametrize(('configs', 'limit', 'batches'), [
    ({}, WRITE_BATCH_SIZE, 2),  # the writer's default: few large batches
    ({'batch_size': 16384}, 16384, 28),  # a caller's batch_size wins
    ({'max_request_size': 100_000}, 100_000, 5),  # never over max_request_size
])
def test_write_table_batches_rows_by_its_default_or_the_callers_batch_size(reference_cluster, monkeypatch, configs,
                                                                          limit, batches):
    reference_cluster.create_topic('big', partitions=1, replication_factor=3)
    monkeypatch.setattr(arrow_writer, 'KafkaProducer', _Recording)
    table = pa.table({'value': pa.array([b'%0140d' % n for n in range(3000)])})
    assert write_table(table, reference_cluster.bootstrap_servers, topic='big', **configs) == \
        WriteCounts(written=3000, already_there=0)
    assert len(_Recording.batch_sizes) == batches
    assert max(_Recording.batch_sizes) <= limit
    assert len(logged(reference_cluster, 'big', 0)) == 3000
