"""The Spark source's read path gives exactly the rows kafka-python's records make, for any fetched data.

Each example builds a fetch with kafka-python's own batch builder (every codec, every record shape, transactions
with markers, LogAppendTime, a fetch offset inside a batch) and reads it twice up to an ``until`` offset: with
kafka_kip's :class:`~kafka_kip.consumer.batches.BatchPartitionRecords` into the compiled
:class:`~kafka_kip._codec._columns.SparkColumns` (the read tasks' path), and with kafka-python's own
``PartitionRecords`` into :class:`~kafka_kip.arrow.columns.PyColumns`. The Arrow rows, the error (type and
message) and where the fetch position ends must be equal. Corrupted fetches must fail the same way.
"""
from __future__ import annotations

import struct

import pytest

pytest.importorskip('pyspark')

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from kafka.consumer.fetcher import Fetcher  # noqa: E402
from kafka.errors import CorruptRecordError  # noqa: E402
from kafka.protocol.consumer import IsolationLevel  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402
from kafka.structs import TopicPartition  # noqa: E402
from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402

from kafka_kip import _codec  # noqa: E402
from kafka_kip.arrow.columns import PyColumns, append_fetched, new_columns  # noqa: E402
from kafka_kip.consumer.batches import BatchPartitionRecords, FetchedBatch  # noqa: E402
from kafka_kip.spark.records import record_schema  # noqa: E402
from tests.support.record_batches import (  # noqa: E402
    CORRUPTIONS,
    AbortedTransaction,
    Batch,
    Record,
    batch_lists,
    build,
    corrupted,
    fetched,
    fix_crc,
)

pytestmark = pytest.mark.skipif(_codec.compiled is None, reason='the compiled record codec is not built')

TP = TopicPartition('columns-topic', 3)
SCHEMAS = {with_headers: to_arrow_schema(record_schema(with_headers), timezone='UTC') for with_headers in (False, True)}


def read(part_class: type, columns_class: type, data: bytes, until: int, with_headers: bool,
         fetch_offset: int = 0, **options) -> tuple[list[dict], tuple | None, int | None]:
    """Rows read from ``data`` below ``until``, the error that ended the read (or None), and without an error where
    the read stopped in the range (a BatchConsumer's position moves past whole batches: past ``until``, and past a
    batch it handed out that the reader then failed on)."""
    part = part_class(fetch_offset, TP, MemoryRecords(data), **options)
    columns = columns_class(TP.topic, TP.partition, SCHEMAS[with_headers], with_headers)
    error = None
    try:
        while part and part.next_fetch_offset < until:  # as a read task polls until its position reaches until
            for item in part.take(None):
                append_fetched(columns, item, until)
    except Exception as exc:  # the exceptions are what is compared
        error = (type(exc), str(exc))
    table = columns.take()
    table.validate(full=True)
    return table.to_pylist(), error, min(part.next_fetch_offset, until) if error is None else None


def compiled_columns(topic: str, partition: int, schema, with_headers: bool):
    columns = new_columns(topic, partition, schema, with_headers)
    assert not isinstance(columns, PyColumns)
    return columns


def assert_same(data: bytes, until: int, with_headers: bool, corrupt: bool = False,
                **options) -> tuple:
    """Both reads give the same rows, error and stopping point. In ``corrupt`` data the stopping point is not
    compared: a BatchConsumer's position follows the batch header's last offset, kafka-python's the last record's,
    which a batch with a valid CRC may put elsewhere. Returns (rows, error[, stopping point])."""
    ours = read(BatchPartitionRecords, compiled_columns, data, until, with_headers, **options)
    theirs = read(Fetcher.PartitionRecords, PyColumns, data, until, with_headers, **options)
    if corrupt:
        ours, theirs = ours[:2], theirs[:2]
    assert ours == theirs
    return ours


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batch_lists(), with_headers=st.booleans(), check_crcs=st.booleans(),
       isolation_level=st.sampled_from([IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED]),
       data=st.data())
def test_any_fetch_gives_the_rows_of_kafka_pythons_records(batches, with_headers, check_crcs, isolation_level, data):
    start, end = batches[0].base_offset, batches[-1].next_offset
    fetch_offset = data.draw(st.integers(min_value=start, max_value=end), label='fetch_offset')
    until = data.draw(st.integers(min_value=fetch_offset, max_value=end + 1), label='until')
    aborted = [AbortedTransaction(b.producer_id, b.base_offset) for b in batches
               if b.producer_id >= 0 and data.draw(st.booleans(), label='aborted')]
    assert_same(fetched(batches), until, with_headers, fetch_offset=fetch_offset, aborted_transactions=aborted,
                check_crcs=check_crcs, isolation_level=isolation_level)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batch_lists(max_batches=3), with_headers=st.booleans(), seed=st.integers(0, 2**32),
       how=st.sampled_from(CORRUPTIONS), data=st.data())
def test_corrupt_fetch_fails_as_kafka_python_does(batches, with_headers, seed, how, data):
    # A range ending at a record of a batch or past the last batch. (Where one ends in a gap -- before a batch, or
    # in the offsets a batch spans after its last record -- a read task takes what follows no further: kafka-python's
    # records would be decoded up to the next one, and its error, if any, raised.)
    ends = sorted({until for batch in batches
                   for until in range(batch.base_offset + 1, batch.next_offset - batch.compacted_tail + 1)})
    until = data.draw(st.sampled_from([*ends, batches[-1].next_offset + 1]), label='until')
    assert_same(corrupted(batches, seed, how), until, with_headers, corrupt=True)


def test_a_corrupt_record_past_the_range_does_not_fail_the_read():
    batch = bytearray(build(Batch([Record(5, b'a', b'b', []), Record(6, b'c', b'd', [('k', b'v')])])))
    batch[-3] = 0xff  # the second record's header key 'k': now not UTF-8
    fix_crc(batch)
    rows, error = assert_same(bytes(batch), 1, True, corrupt=True)
    assert ([(row['offset'], row['key'], row['value'], row['headers']) for row in rows], error) == (
        [(0, b'a', b'b', None)], None)
    rows, error = assert_same(bytes(batch), 2, True, corrupt=True)  # the range includes the corrupt record
    assert [row['offset'] for row in rows] == [0]
    assert error[0] is CorruptRecordError


def test_a_timestamp_spark_cannot_hold_fails_the_read_after_the_records_before_it():
    records = [Record(0, b'k', b'v', [('good', b'0')]), Record(2**62, b'k', b'v', [('bad', b'1')])]
    rows, error, _ = assert_same(fetched([Batch(records)]), 10, True)
    assert [(row['offset'], row['headers']) for row in rows] == [(0, [{'key': 'good', 'value': b'0'}])]
    assert error == (OverflowError, f'columns-topic-3 offset 1: timestamp {2**62} ms is outside what a Spark '
                                    'timestamp holds (microseconds in 64 bits)')
    beyond_int64 = bytearray(fetched([Batch([Record(0, None, b'v'), Record(2**40, None, b'w')])]))
    struct.pack_into('>q', beyond_int64, 27, 2**63 - 1)  # the first timestamp: the second record's is past int64
    fix_crc(beyond_int64)
    rows, error, _ = assert_same(bytes(beyond_int64), 10, False)
    assert [row['offset'] for row in rows] == []
    assert error == (OverflowError, f'columns-topic-3 offset 0: timestamp {2**63 - 1} ms is outside what a Spark '
                                    'timestamp holds (microseconds in 64 bits)')


def test_plain_batches_give_exact_rows_in_spark_s_columns():
    batches = [Batch([Record(1_700_000_000_000, b'k', b'v', [('h', b'1'), ('n', None)]),
                      Record(1_700_000_000_005, None, b'', [])], base_offset=40, leader_epoch=7),
               Batch([Record(1_700_000_000_009, b'k2', None, [])], codec='gzip', base_offset=42, leader_epoch=8)]
    rows, error, next_fetch_offset = assert_same(fetched(batches), 43, True, fetch_offset=41)
    assert error is None and next_fetch_offset == 43
    assert [(r['offset'], r['key'], r['value'], r['headers'], r['leaderEpoch'], r['timestampType'],
             r['timestamp'].timestamp(), r['topic'], r['partition']) for r in rows] == [
        (41, None, b'', None, 7, 0, 1_700_000_000.005, 'columns-topic', 3),
        (42, b'k2', None, None, 8, 0, 1_700_000_000.009, 'columns-topic', 3)]
    rows, _, _ = assert_same(fetched(batches), 41, True)
    assert rows[0]['headers'] == [{'key': 'h', 'value': b'1'}, {'key': 'n', 'value': None}]


def test_a_batch_the_compiled_decoder_declines_appends_nothing_of_it():
    good = fetched([Batch([Record(5, b'a', b'b', [])], base_offset=0)])
    bad = bytearray(build(Batch([Record(6, b'c', b'd', [('k', b'v')])], base_offset=1)))
    bad[-3] = 0xff  # the header key 'k': now not UTF-8
    fix_crc(bad)
    columns = compiled_columns(TP.topic, TP.partition, SCHEMAS[True], True)
    items = BatchPartitionRecords(0, TP, MemoryRecords(good + bytes(bad))).take(None)
    assert [type(item) for item in items] == [FetchedBatch, FetchedBatch]
    append_fetched(columns, items[0], 100)
    second = items[1]
    assert columns.append_batch(second.buffer, second.start, second.count, second.base_offset,
                                second.first_timestamp, second.timestamp, second.log_append_time,
                                second.leader_epoch, 0, 100) == -1
    with pytest.raises(CorruptRecordError):
        append_fetched(columns, second, 100)
    assert [row['offset'] for row in columns.take().to_pylist()] == [0]


def test_a_record_spark_cannot_hold_appends_nothing_of_it():
    for columns_class in (compiled_columns, PyColumns):
        columns = columns_class(TP.topic, TP.partition, SCHEMAS[True], True)
        for timestamp in (2**63 - 1, 2**64, -(2**62)):
            with pytest.raises(OverflowError, match=rf'^columns-topic-3 offset 9: timestamp {timestamp} ms is '
                                                    r'outside what a Spark timestamp holds'):
                columns.append_record(b'k', b'v', 9, timestamp, 0, [('bad', b'1')], 0)
        assert len(columns) == 0
        columns.append_record(b'k', b'v', 10, (2**63 - 1) // 1000, 0, [('mine', b'2')], 0)
        table = columns.take()
        assert table.column('offset').to_pylist() == [10]
        assert table.column('timestamp').cast('int64').to_pylist() == [(2**63 - 1) // 1000 * 1000]
        assert table.column('headers').to_pylist() == [[{'key': 'mine', 'value': b'2'}]]


# -- a read task over real sockets, with the compiled path and with the fallbacks ---------------------------

#: a module a fresh process runs: the rows ``read_range`` gives for argv's bootstrap servers, topic and options
_READ_SCRIPT = '''
import json, sys, warnings
warnings.simplefilter('always', RuntimeWarning)
with warnings.catch_warnings(record=True) as caught:
    from kafka.structs import TopicPartition
    from kafka_kip.spark.positions import Position
    from kafka_kip.spark.records import OffsetRange, read_range, record_schema
    bootstrap, topic, start, until = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    part = OffsetRange(TopicPartition(topic, 0), Position(start), until)
    rows = [row for batch in read_range(bootstrap, {}, part, record_schema(True), 'fail', 20000)
            for row in batch.to_pylist()]
for row in rows:
    row['timestamp'] = row['timestamp'].timestamp()
    row['key'], row['value'] = [None if b is None else b.hex() for b in (row['key'], row['value'])]
    row['headers'] = row['headers'] and [[h['key'], None if h['value'] is None else h['value'].hex()]
                                         for h in row['headers']]
print(json.dumps({'rows': rows, 'warnings': sorted({w.category.__name__ for w in caught})}))
'''


@pytest.fixture(scope='module')
def shapes_topic():
    """A one-partition topic of 150 records of every shape (absent and empty keys, values and headers), each codec
    writing a fifth of them, on a reference cluster (null header values: see the fetch tests above)."""
    import kafka

    from kafka_kip_reference import ReferenceCluster

    shapes = [(None, b'v' * 100, []), (b'k', b'', [('h', b'1')]), (b'', None, [('a', b''), ('b', b'x' * 3)]),
              (b'key' * 50, b'value' * 200, [('\u00e9t\u00e9', b'\x00\xff')])]
    with ReferenceCluster(brokers=1) as cluster:
        cluster.create_topic('shapes', 1, 1)
        for codec_index, compression in enumerate([None, 'gzip', 'snappy', 'lz4', 'zstd']):
            producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, compression_type=compression,
                                           linger_ms=20, batch_size=2048)
            for index in range(codec_index * 30, codec_index * 30 + 30):
                key, value, headers = shapes[index % len(shapes)]
                producer.send('shapes', key=key, value=value, headers=headers, partition=0,
                              timestamp_ms=1_700_000_000_000 + index)
            producer.close()
        yield cluster
        assert cluster.internal_errors == []


def read_in_fresh_process(cluster, start: int, until: int, environment: dict[str, str] | None = None,
                          hide_columns: bool = False) -> dict:
    import json
    import os
    import subprocess
    import sys

    script = ('import sys; sys.modules["kafka_kip._codec._columns"] = None\n' if hide_columns else '') + _READ_SCRIPT
    env = {k: v for k, v in os.environ.items() if k != _codec.PURE_PYTHON_ENV} | (environment or {})
    done = subprocess.run([sys.executable, '-c', script, cluster.bootstrap_servers, 'shapes', str(start), str(until)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_read_task_gives_the_same_rows_with_the_compiled_columns_and_both_fallbacks(shapes_topic):
    compiled = read_in_fresh_process(shapes_topic, 7, 143)
    assert compiled['warnings'] == []
    rows = compiled['rows']
    assert [row['offset'] for row in rows] == list(range(7, 143))
    assert rows[0] == {'key': ''.join(f'{b:02x}' for b in b'key' * 50), 'value': (b'value' * 200).hex(),
                       'topic': 'shapes', 'partition': 0, 'offset': 7, 'timestamp': 1_700_000_000.007,
                       'timestampType': 0, 'headers': [['\u00e9t\u00e9', '00ff']], 'leaderEpoch': 0}
    assert [row['headers'] for row in rows[1:4]] == [None, [['h', '31']], [['a', ''], ['b', '787878']]]
    assert [(row['key'], row['value']) for row in rows[1:3]] == [(None, (b'v' * 100).hex()), ('6b', '')]
    assert read_in_fresh_process(shapes_topic, 7, 143, {_codec.PURE_PYTHON_ENV: '1'}) == compiled
    without_columns = read_in_fresh_process(shapes_topic, 7, 143, hide_columns=True)
    assert without_columns == {'rows': rows, 'warnings': ['PurePythonRecordsWarning']}


@pytest.mark.parametrize('with_headers', [False, True])
def test_read_table_has_the_spark_sources_arrow_schema(with_headers: bool) -> None:
    """kafka_kip.arrow.read_table's columns are the Spark source's, as pyspark derives them for its Arrow batches."""
    from kafka_kip.arrow.columns import record_schema as arrow_record_schema

    assert arrow_record_schema(with_headers) == SCHEMAS[with_headers]
