"""``kafka_kip.arrow.read_table`` on real sockets: the rows are what kafka_kip's KafkaConsumer returns for the
same range (compiled decoder and pure-Python fallback), read_committed leaves aborted records out, a truncated
partition raises ``TruncatedPartitionError``, bad arguments name the value and what is accepted.

The reference cluster's topic ``t``:

    partition 0   offsets 0..9, log start offset 3 (DeleteRecords), headers on even offsets
    partition 1   0..2 committed (marker 3), 4..5 aborted (marker 6), 7..8 plain
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

pa = pytest.importorskip('pyarrow')

from kafka import KafkaAdminClient, KafkaProducer  # noqa: E402
from kafka.errors import KafkaConfigurationError, OffsetOutOfRangeError  # noqa: E402

from kafka_kip import KafkaConsumer, OffsetAndMetadata, TopicPartition  # noqa: E402
from kafka_kip.arrow import read_table  # noqa: E402
from kafka_kip.arrow.columns import record_schema  # noqa: E402
from kafka_kip.errors import TruncatedPartitionError  # noqa: E402
from kafka_kip_reference import ReferenceCluster  # noqa: E402
from kafka_kip_reference.fixtures.conditions import wait_until  # noqa: E402

TOPIC = 't'
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
BASE_MS = 1_700_000_000_000
COLUMNS = ['key', 'value', 'topic', 'partition', 'offset', 'timestamp', 'timestampType', 'headers', 'leaderEpoch']

Row = tuple  # (partition, offset, key, value, headers, timestamp ms, timestamp type, leader epoch)


def consumer_rows(bootstrap: str, tp: TopicPartition, start: int, end: int, **configs: Any) -> list[Row]:
    """What kafka_kip's KafkaConsumer returns for ``tp`` from ``start`` until its position reaches ``end``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **configs)
    rows: list[Row] = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)

        def at_end() -> bool:
            rows.extend((r.partition, r.offset, r.key, r.value, [tuple(h) for h in r.headers], r.timestamp,
                         r.timestamp_type, r.leader_epoch) for r in consumer.poll(timeout_ms=100).get(tp, ()))
            return consumer.position(tp) >= end
        wait_until(at_end, f'{tp} read to offset {end}')
    finally:
        consumer.close()
    return [row for row in rows if row[1] < end]


def table_rows(table: Any) -> list[Row]:
    columns = table.to_pydict()
    micros = table.column('timestamp').cast(pa.int64()).to_pylist()
    assert micros == [ms * 1000 for ms in (m // 1000 for m in micros)], 'timestamps are whole milliseconds'
    assert set(columns['topic']) <= {TOPIC}
    return [(p, o, k, v, [(h['key'], h['value']) for h in hs or ()], ts // 1000, tt, e) for p, o, k, v, hs, ts, tt, e
            in zip(columns['partition'], columns['offset'], columns['key'], columns['value'], columns['headers'],
                   micros, columns['timestampType'], columns['leaderEpoch'], strict=True)]


def fill(bootstrap: str) -> None:
    """The topic of the module docstring (``t``, 2 partitions, created by the caller)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks='all', linger_ms=0)
    try:
        for offset in range(10):
            headers = [('h', b'%d' % offset), ('empty', b'')] if offset % 2 == 0 else []
            producer.send(TOPIC, value=b'v%d' % offset, key=None if offset == 4 else b'k%d' % offset,
                          headers=headers, partition=0, timestamp_ms=BASE_MS + offset).get(10)
    finally:
        producer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({P0: 3})
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id='arrow-tx', linger_ms=0)
    try:
        producer.init_transactions()
        for values, commit in (((b'c0', b'c1', b'c2'), True), ((b'a4', b'a5'), False)):
            producer.begin_transaction()
            for value in values:
                producer.send(TOPIC, value=value, partition=1, timestamp_ms=BASE_MS)
            producer.flush()  # (an abort drops what was not sent yet)
            producer.commit_transaction() if commit else producer.abort_transaction()
    finally:
        producer.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks='all', linger_ms=0)
    try:
        for value in (b'p7', b'p8'):
            producer.send(TOPIC, value=value, partition=1, timestamp_ms=BASE_MS + 7).get(10)
    finally:
        producer.close()


@pytest.fixture
def filled(reference_cluster_factory: Callable[..., ReferenceCluster]) -> str:
    cluster = reference_cluster_factory(1)
    cluster.create_topic(TOPIC, 2, 1)
    fill(cluster.bootstrap_servers)
    assert (cluster.log_start_offset(P0), cluster.log_end_offset(P1), cluster.last_stable_offset(P1)) == (3, 9, 9)
    return cluster.bootstrap_servers


@pytest.mark.usefixtures('codec_mode')
def test_rows_are_the_consumers_records(filled: str) -> None:
    committed = read_table(filled, TOPIC, isolation_level='read_committed')
    assert committed.column_names == COLUMNS
    rows = table_rows(committed)
    assert rows == (consumer_rows(filled, P0, 3, 10, isolation_level='read_committed')
                    + consumer_rows(filled, P1, 0, 9, isolation_level='read_committed'))
    assert [(p, o) for p, o, *_ in rows] == [(0, o) for o in range(3, 10)] + [(1, o) for o in (0, 1, 2, 7, 8)]
    assert rows[1] == (0, 4, None, b'v4', [('h', b'4'), ('empty', b'')], BASE_MS + 4, 0, 0)
    assert committed.column('headers').to_pylist()[:2] == [None, [{'key': 'h', 'value': b'4'},
                                                                  {'key': 'empty', 'value': b''}]]
    uncommitted = read_table(filled, TOPIC)
    assert table_rows(uncommitted) == (consumer_rows(filled, P0, 3, 10) + consumer_rows(filled, P1, 0, 9))
    assert uncommitted.column('value').to_pylist()[7:] == [b'c0', b'c1', b'c2', b'a4', b'a5', b'p7', b'p8']
    assert (committed.num_rows, uncommitted.num_rows) == (12, 14)


def test_partition_offset_bounds(filled: str) -> None:
    table = read_table(filled, TOPIC, start={0: 5, 1: 1}, end={0: 8, 1: 8}, isolation_level='read_committed')
    assert table_rows(table) == (consumer_rows(filled, P0, 5, 8, isolation_level='read_committed')
                                 + consumer_rows(filled, P1, 1, 8, isolation_level='read_committed'))
    assert [(p, o) for p, o, *_ in table_rows(table)] == [(0, 5), (0, 6), (0, 7), (1, 1), (1, 2), (1, 7)]
    # one partition; a partition left out of a bound takes the default ('earliest' / 'latest')
    only = read_table(filled, TOPIC, partitions=[1], start={1: 4}, end='latest')
    assert only.column('offset').to_pylist() == [4, 5, 7, 8]
    assert read_table(filled, TOPIC, end={1: 2}).column('offset').to_pylist() == [3, 4, 5, 6, 7, 8, 9, 0, 1]
    assert read_table(filled, TOPIC, start='latest').num_rows == 0
    empty = read_table(filled, TOPIC, start={0: 7}, end={0: 7}, partitions=[0])
    assert (empty.num_rows, empty.schema) == (0, record_schema(with_headers=True))


BAD_ARGUMENTS = {
    'unknown partition': ({'partitions': [0, 2]}, ValueError,
                          "partitions: topic 't' has no partition 2; its partitions are [0, 1]"),
    'unknown partition in a bound': ({'start': {5: 0}}, ValueError,
                                     "start: partition 5 is not read; the partitions read are [0, 1]"),
    'partition not read': ({'partitions': [0], 'end': {1: 3}}, ValueError,
                           "end: partition 1 is not read; the partitions read are [0]"),
    'start after end': ({'start': {0: 8}, 'end': {0: 6}}, ValueError,
                        'start of t-0 (offset 8) is after its end (offset 6)'),
    'start after latest': ({'start': {1: 12}}, ValueError, 'start of t-1 (offset 12) is after its end (offset 9)'),
    'end past latest': ({'end': {0: 11}}, ValueError,
                        "end of t-0 (offset 11) is past its end offset 10: at most 10 (or 'latest')"),
    'negative offset': ({'start': {0: -1}}, ValueError,
                        "start of t-0: an offset is an int >= 0, an OffsetAndMetadata, 'earliest' or 'latest'; "
                        'got -1'),
    'offset not an int': ({'end': {0: '7'}}, ValueError,
                          "end of t-0: an offset is an int >= 0, an OffsetAndMetadata, 'earliest' or 'latest'; "
                          "got '7'"),
    'bad string': ({'start': 'beginning'}, ValueError,
                   "start must be 'earliest', 'latest' or {partition: offset}, got 'beginning'"),
    'partition not an int': ({'partitions': ['0']}, ValueError, "partitions: a partition is an int, got '0'"),
    'below the log start': ({'start': {0: 1}}, OffsetOutOfRangeError,
                            "t-0: offsets 1..2 are no longer in the log (log start offset 3: retention or "
                            "DeleteRecords); start at 3 or 'earliest'"),
    'fixed setting': ({'group_id': 'g'}, KafkaConfigurationError,
                      'read_table sets group_id itself (it reads exact offset ranges without a group and raises on '
                      'truncation); leave them out'),
    'poll timeout': ({'poll_timeout_ms': 0}, ValueError, 'poll_timeout_ms must be a positive int, got 0'),
}


def test_bad_arguments_name_the_value_and_what_is_accepted(filled: str) -> None:
    for name, (arguments, error, message) in BAD_ARGUMENTS.items():
        with pytest.raises(error) as raised:
            read_table(filled, TOPIC, **arguments)
        assert message in str(raised.value), name
    with pytest.raises(ValueError, match="topic 'nope' does not exist"):
        read_table(filled, 'nope', allow_auto_create_topics=False)
    with pytest.raises(ValueError, match="topic must be a non-empty string, got ''"):
        read_table(filled, '')


def test_truncation_raises_with_the_truncated_offsets(reference_cluster_factory: Callable[..., ReferenceCluster]) -> None:
    """An unclean election (as in tests/consumer/test_kip320.py) cuts the log at 5: a read resuming after the rows an
    earlier read_table returned (offset 10, their leader epoch 0) raises before reading anything."""
    cluster = reference_cluster_factory(3)
    cluster.create_topic(TOPIC, 1, 3)
    produce(cluster, range(0, 5))
    cluster.pause_replication(P0, 1)
    produce(cluster, range(5, 10))
    before = read_table(cluster.bootstrap_servers, TOPIC)
    assert (before.column('offset').to_pylist(), before.column('leaderEpoch').to_pylist()) == (
        list(range(10)), [0] * 10)
    assert cluster.elect_leader(P0, 1, unclean=True) == 1
    produce(cluster, range(5, 13))
    resume = {0: OffsetAndMetadata(10, '', before.column('leaderEpoch')[-1].as_py())}
    with pytest.raises(TruncatedPartitionError) as raised:
        read_table(cluster.bootstrap_servers, TOPIC, start=resume)
    assert raised.value.truncated_offsets == {P0: 5}
    assert str(raised.value).startswith('[Error 10006] TruncatedPartitionError: t-0: the log was truncated at offset '
                                        '5 (unclean leader election?) while read_table read it from offset 10')
    after = read_table(cluster.bootstrap_servers, TOPIC)
    assert after.column('offset').to_pylist() == list(range(13))
    assert after.column('leaderEpoch').to_pylist() == [0] * 5 + [1] * 8
    assert after.column('value').to_pylist()[4:7] == [b'4', b'5', b'6']


def produce(cluster: ReferenceCluster, offsets: range) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all')
    try:
        for offset in offsets:
            producer.send(TOPIC, value=b'%d' % offset, partition=0, timestamp_ms=BASE_MS + offset).get(10)
    finally:
        producer.close()


def test_on_apache_kafka(apache_kafka: Any) -> None:
    topic = f'arrow-read-table-{uuid.uuid4().hex[:8]}'
    apache_kafka.create_topic(topic, partitions=1)
    producer = KafkaProducer(bootstrap_servers=apache_kafka.bootstrap_servers, acks='all', linger_ms=5)
    try:
        for offset in range(300):
            producer.send(topic, key=b'k%d' % (offset % 7), value=b'v' * (offset % 50), partition=0,
                          headers=[('n', b'%d' % offset)] if offset % 3 == 0 else [], timestamp_ms=BASE_MS + offset)
        producer.flush()
    finally:
        producer.close()
    tp = TopicPartition(topic, 0)
    table = read_table(apache_kafka.bootstrap_servers, topic, start={0: 10}, end={0: 290})
    columns = table.to_pydict()
    assert columns['offset'] == list(range(10, 290))
    consumer = consumer_rows(apache_kafka.bootstrap_servers, tp, 10, 290)
    assert [(o, k, v, [(h['key'], h['value']) for h in hs or ()], e) for o, k, v, hs, e in zip(
        columns['offset'], columns['key'], columns['value'], columns['headers'], columns['leaderEpoch'],
        strict=True)] == [(o, k, v, hs, e) for _, o, k, v, hs, _, _, e in consumer]
    assert table.column('timestamp').cast(pa.int64()).to_pylist() == [(BASE_MS + o) * 1000 for o in range(10, 290)]


def test_a_table_comes_in_chunks_of_table_rows_per_batch(reference_cluster: ReferenceCluster,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A table's chunks are not a Spark task's batches: a chunk is taken once it holds TABLE_ROWS_PER_BATCH rows (here
    5,000, and one fetched batch of at most 1 KiB per poll, so each chunk but the last ends within a batch past that),
    every row once, in offset order."""
    from kafka_kip import KafkaProducer as KipProducer
    from kafka_kip.arrow import read as read_module

    monkeypatch.setattr(read_module, 'TABLE_ROWS_PER_BATCH', 5_000)
    count = 2 * 5_000 + 2_000
    reference_cluster.create_topic(TOPIC, 1, 1)
    producer = KipProducer(bootstrap_servers=reference_cluster.bootstrap_servers, linger_ms=20, batch_size=1024)
    try:
        for offset in range(count):
            producer.send(TOPIC, value=b'%d' % offset, partition=0)
        producer.flush(timeout=60)
    finally:
        producer.close()
    table = read_table(reference_cluster.bootstrap_servers, TOPIC, max_poll_records=1)
    chunks = [len(chunk) for chunk in table.column('offset').chunks]
    assert sum(chunks) == count
    assert len(chunks) == 3, chunks
    assert all(5_000 <= rows < 5_000 + 1024 for rows in chunks[:2]), chunks
    assert table.column('offset').to_pylist() == list(range(count))
    assert table.column('value').to_pylist()[-1] == b'%d' % (count - 1)
