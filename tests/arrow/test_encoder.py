"""The compiled Arrow -> record batch encoder against kafka-python's own builder and partitioner."""
from __future__ import annotations

import random

import pytest

pa = pytest.importorskip('pyarrow')
_encoder = pytest.importorskip('kafka_kip._codec._encoder')

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from kafka.errors import MessageSizeTooLargeError  # noqa: E402
from kafka.partitioner.default import DefaultPartitioner  # noqa: E402
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402

from kafka_kip.protocol.record_batch import HEADER_SIZE, parse_header  # noqa: E402

TopicEncoder = _encoder.TopicEncoder
HEADERS = pa.list_(pa.struct([('key', pa.string()), ('value', pa.binary())]))
TS0 = 1_700_000_000_000
CODECS = {'none': 0, 'gzip': 1, 'snappy': 2, 'lz4': 3, 'zstd': 4}

payloads = st.one_of(st.none(), st.binary(max_size=300))
rows = st.lists(st.tuples(payloads, payloads,
                          st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
                                   max_size=3),
                          st.integers(-5000, 5000)), min_size=1, max_size=40)


def kafka_python_batches(records: list[tuple], codec: int, batch_size: int) -> list[bytes]:
    """The batches kafka-python's builder makes of ``records`` appended in order, a new one when full."""
    out, builder, offset = [], None, 0
    for key, value, headers, timestamp in records:
        if builder is None or builder.append(offset, timestamp, key, value, headers) is None:
            if builder is not None:
                out.append(bytes(builder.build()))
            builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, batch_size)
            offset = 0
            assert builder.append(offset, timestamp, key, value, headers) is not None
        offset += 1
    out.append(bytes(builder.build()))
    return out


def encoded(records: list[tuple], codec: int, batch_size: int) -> list[bytes]:
    encoder = TopicEncoder('t', 1, compression=codec, batch_size=batch_size, max_record_bytes=1 << 20)
    built = encoder.encode(pa.array([r[1] for r in records], pa.binary()),
                           key=pa.array([r[0] for r in records], pa.binary()),
                           partition=pa.array([0] * len(records), pa.int32()),
                           timestamp=pa.array([TS0 + r[3] for r in records], pa.int64()),
                           headers=pa.array([[{'key': k, 'value': v} for k, v in r[2]] for r in records], HEADERS))
    built += encoder.finish()
    assert [b[0] for b in built] == [0] * len(built)
    return [bytes(b[4]) for b in built]


def decoded(batch: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in DefaultRecordBatch(batch)]


@settings(max_examples=60, deadline=None)
@given(records=rows, codec=st.sampled_from(sorted(CODECS.values())), batch_size=st.sampled_from([100, 700, 16384]))
def test_encoder_builds_kafka_python_s_batches(records, codec, batch_size):
    """Byte for byte, except gzip, whose stream carries the compression time: there the header fields (CRC
    aside) and the decompressed records are the same."""
    records = [(key, value, headers, TS0 + ts) for key, value, headers, ts in records]
    expected = kafka_python_batches(records, codec, batch_size)
    ours = encoded([(k, v, h, ts - TS0) for k, v, h, ts in records], codec, batch_size)
    assert len(ours) == len(expected)
    for mine, theirs in zip(ours, expected, strict=True):
        if codec != CODECS['gzip']:
            assert mine == theirs
        else:
            assert parse_header(mine)._replace(crc=0, length=0) == parse_header(theirs)._replace(crc=0, length=0)
            assert decoded(mine) == decoded(theirs)
        DefaultRecordBatch(mine).validate_crc()


def test_every_codec_compresses_a_compressible_batch():
    records = [(b'k%d' % n, b'value ' * 20, [('h', b'x')], n) for n in range(50)]
    for name, codec in CODECS.items():
        (batch,) = encoded(records, codec, 1 << 20)
        assert (name, parse_header(batch).attributes & 0x07) == (name, codec)
        assert [r[0] for r in decoded(batch)] == list(range(50))


# Java's org.apache.kafka.clients.producer.internals.DefaultPartitioner for 1000 partitions (kafka-python's test)
JAVA_PARTITIONS = [(b'', 681), (b'a', 524), (b'ab', 434), (b'abc', 107), (b'123456789', 566), (b'\x00 ', 742)]


def test_key_partition_is_the_java_client_s_and_kafka_python_s():
    assert [_encoder.key_partition(key, 1000) for key, _ in JAVA_PARTITIONS] == [p for _, p in JAVA_PARTITIONS]
    sample = random.Random(7)
    keys = [sample.randbytes(sample.randrange(0, 40)) for _ in range(500)]

    class Cluster:
        def topics(self):
            return {'t'}

        def partitions_for_topic(self, topic):
            return set(range(count))

        def available_partitions_for_topic(self, topic):
            return set(range(count))

    for count in (1, 3, 7, 64):
        partitioner = DefaultPartitioner()
        assert [_encoder.key_partition(key, count) for key in keys] == [
            partitioner.partition('t', key, key, None, None, Cluster()) for key in keys]


def test_rows_without_a_partition_go_by_key_and_keyless_rows_stick_until_a_batch_is_full():
    keys = [b'k%d' % n for n in range(30)]
    encoder = TopicEncoder('t', 4, batch_size=1000, rng=random.Random(3))
    built = encoder.encode(pa.array([b'v' * 10] * 30), key=pa.array(keys)) + encoder.finish()
    placed = {}
    for partition, _, _, partitioned, data in built:
        assert partitioned
        for record in DefaultRecordBatch(bytes(data)):
            placed[record.key] = partition
    assert placed == {key: _encoder.key_partition(key, 4) for key in keys}

    encoder = TopicEncoder('t', 4, batch_size=1000, rng=random.Random(3))
    built = encoder.encode(pa.array([b'v' * 100] * 40)) + encoder.finish()
    # each ~110-byte record counts towards the sticky partition's 1000 bytes: a switch after every 10 rows
    switches = random.Random(3)
    expected = [switches.randrange(4) for _ in range(4)]
    chosen = [p for p, _, count, _, _ in sorted(built, key=lambda b: b[0])]
    assert sum(count for _, _, count, _, _ in built) == 40
    assert sorted(set(chosen)) == sorted(set(expected))


def test_preserved_offsets_make_batches_of_consecutive_offsets():
    encoder = TopicEncoder('t', 2, preserve_offsets=True)
    built = encoder.encode(pa.array([b'a', b'b', b'c', b'd', b'e']), partition=pa.array([0, 0, 1, 0, 0], pa.int32()),
                           offset=pa.array([5, 6, 0, 9, 10], pa.int64()), timestamp=pa.array([TS0] * 5, pa.int64()))
    built += encoder.finish()
    assert sorted((p, base, count) for p, base, count, _, _ in built) == [(0, 5, 2), (0, 9, 2), (1, 0, 1)]
    assert [parse_header(bytes(data)).base_offset for _, _, _, _, data in built] == [0, 0, 0]  # stamped when sent
    with pytest.raises(ValueError) as caught:
        encoder.encode(pa.array([b'f']), partition=pa.array([0], pa.int32()), offset=pa.array([10], pa.int64()))
    assert str(caught.value) == ('preserve_offsets needs the rows of a partition in increasing offset order; '
                                 't-0 has offset 10 after 10')


def test_a_row_over_the_limit_is_refused_naming_its_topic_partition_offset_and_the_limit():
    encoder = TopicEncoder('orders', 2, max_record_bytes=200, limit_name='max_request_size', preserve_offsets=True)
    with pytest.raises(MessageSizeTooLargeError) as caught:
        encoder.encode(pa.array([b'x' * 10, b'x' * 200]), partition=pa.array([1, 1], pa.int32()),
                       offset=pa.array([41, 42], pa.int64()), timestamp=pa.array([TS0, TS0], pa.int64()))
    size = HEADER_SIZE + 2 + 1 + 1 + 1 + 1 + 2 + 200 + 1  # length, attributes, deltas, null key, value, headers
    assert str(caught.value) == (
        f'[Error 10] MessageSizeTooLargeError: a row for orders-1 at offset 42 is {size} bytes as a record batch, '
        'over the limit of 200 bytes (max_request_size); nothing of it or after it was sent')
    plain = TopicEncoder('orders', 2, max_record_bytes=200)
    with pytest.raises(MessageSizeTooLargeError, match='a row for orders-0 is 2'):
        plain.encode(pa.array([b'x' * 200]), partition=pa.array([0], pa.int32()))
    with pytest.raises(Exception, match=r'a row for topic .orders. has partition 2; the topic has partitions 0..1'):
        plain.encode(pa.array([b'x']), partition=pa.array([2], pa.int32()))
