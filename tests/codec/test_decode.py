"""The compiled decoder hands out exactly what kafka-python's PartitionRecords does, for any fetched data.

Each example builds a fetch with kafka-python's own batch builder (every codec, every record shape,
transactions with markers, LogAppendTime, gaps, a fetch offset inside a batch), then drains it through
kafka_kip's ``DecodedPartitionRecords`` and kafka-python's ``PartitionRecords`` in the same steps: every
record, every exception (type and message) and the state after each step must be equal. Corrupted
fetches (flipped bytes with and without a valid CRC, truncation) must fail the same way.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kafka.consumer.fetcher import ConsumerRecord, Fetcher
from kafka.errors import CorruptRecordError
from kafka.protocol.consumer import IsolationLevel
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from kafka.serializer import Deserializer
from kafka.structs import TopicPartition

from kafka_kip import _codec
from kafka_kip._patch import record_bytes
from kafka_kip._patch.rebind import KafkaPythonChanged
from kafka_kip.consumer.records import DecodedPartitionRecords
from tests.support.record_batches import (
    CODECS,
    CORRUPTIONS,
    AbortedTransaction,
    Batch,
    Record,
    batch_lists,
    build,
    control_batch,
    corrupted,
    fetched,
    fix_crc,
)

pytestmark = pytest.mark.skipif(_codec.compiled is None, reason='the compiled record codec is not built')

TP = TopicPartition('codec-topic', 3)
STOCK = Fetcher.PartitionRecords


class Upper(Deserializer):
    """A deserializer with an observable failure: values starting with b'!' raise ValueError."""

    def deserialize(self, topic, headers, data):
        if data is not None and data.startswith(b'!'):
            raise ValueError(f'cannot deserialize {data[:8]!r}')
        return None if data is None else data.upper()


def drained(cls: type, data: bytes, steps: list[int | None], fetch_offset: int = 0, **options) -> list:
    """Everything observable while taking ``steps`` records at a time from ``data``, then the rest."""
    part = cls(fetch_offset, TP, MemoryRecords(data), **options)
    seen = []
    for count in [*steps, None, None]:
        if not part:  # drained: kafka-python's fetcher takes no more from it
            break
        try:
            seen.append(('records', part.take(count)))
        except Exception as exc:  # the exceptions are what is compared
            seen.append(('error', type(exc), str(exc)))
        seen.append(('state', part.next_fetch_offset, part.leader_epoch, part.records_read, part.bytes_read,
                     bool(part)))
    return seen


def assert_same(data: bytes, steps: list[int | None], **options) -> list:
    ours = drained(DecodedPartitionRecords, data, steps, **options)
    assert ours == drained(STOCK, data, steps, **options)
    return ours


_steps = st.lists(st.one_of(st.none(), st.integers(min_value=1, max_value=30)), max_size=4)
_options = st.fixed_dictionaries({
    'check_crcs': st.booleans(),
    'isolation_level': st.sampled_from([IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED]),
    'value_deserializer': st.sampled_from([None, Upper()]),
    'key_deserializer': st.sampled_from([None, Upper()]),
})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batch_lists(), steps=_steps, options=_options, data=st.data())
def test_any_fetch_is_handed_out_as_kafka_python_does(batches, steps, options, data):
    start = batches[0].base_offset
    fetch_offset = data.draw(st.integers(min_value=start, max_value=batches[-1].next_offset), label='fetch_offset')
    aborted = [AbortedTransaction(b.producer_id, b.base_offset) for b in batches
               if b.producer_id >= 0 and data.draw(st.booleans(), label='aborted')]
    assert_same(fetched(batches), steps, fetch_offset=fetch_offset, aborted_transactions=aborted, **options)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batch_lists(max_batches=3), steps=_steps, check_crcs=st.booleans(), seed=st.integers(0, 2**32),
       how=st.sampled_from(CORRUPTIONS))
def test_corrupt_fetch_fails_as_kafka_python_does(batches, steps, check_crcs, seed, how):
    assert_same(corrupted(batches, seed, how), steps, check_crcs=check_crcs)


def test_plain_batch_decodes_to_exact_records():
    batch = Batch([Record(1_700_000_000_000, b'k', b'v', [('h', b'1'), ('n', None)]),
                   Record(1_700_000_000_005, None, b'', [])], base_offset=40, leader_epoch=7)
    seen = assert_same(fetched([batch]), [1, 5])
    assert seen[0] == ('records', [ConsumerRecord(TP.topic, TP.partition, 7, 40, 1_700_000_000_000, 0, b'k', b'v',
                                                  [('h', b'1'), ('n', None)], None, 1, 1, 3)])
    assert seen[2] == ('records', [ConsumerRecord(TP.topic, TP.partition, 7, 41, 1_700_000_000_005, 0, None, b'',
                                                  [], None, -1, 0, -1)])
    assert seen[3] == ('state', 42, 7, 2, seen[3][4], False)


def test_fetch_offset_inside_a_compressed_batch_skips_the_records_before_it():
    batch = Batch([Record(10 + i, None, b'v%d' % i) for i in range(5)], codec='gzip', base_offset=100)
    seen = assert_same(fetched([batch]), [10], fetch_offset=103)
    assert [record.offset for record in seen[0][1]] == [103, 104]


def test_crc_failure_raises_kafka_pythons_error_after_the_records_before_it():
    good = Batch([Record(1, None, b'a')], base_offset=0)
    bad = bytearray(build(Batch([Record(1, None, b'b')], base_offset=1)))
    bad[-1] ^= 0xFF
    seen = assert_same(fetched([good]) + bytes(bad), [5, 5], check_crcs=True)
    assert [record.value for record in seen[0][1]] == [b'a']
    assert seen[2] == ('error', CorruptRecordError,
                       f'[Error 2] CorruptRecordError: Record batch for partition {TP} at offset 1 failed crc check')


def test_deserializer_error_comes_after_the_records_before_it():
    batch = Batch([Record(1, None, b'ok'), Record(2, None, b'!no'), Record(3, None, b'never')])
    seen = assert_same(fetched([batch]), [3, 3], value_deserializer=Upper())
    assert [record.value for record in seen[0][1]] == [b'OK']
    assert seen[2][:2] == ('error', ValueError)


@example(b'\x01')
@given(value=st.binary(min_size=1, max_size=1))
def test_aborted_transaction_is_skipped_under_read_committed(value):
    aborted = Batch([Record(1, None, value)], base_offset=0, producer_id=5)
    committed = Batch([Record(2, None, value)], base_offset=2, producer_id=6)
    batches = [aborted, control_batch(1, 5, commit=False), committed, control_batch(3, 6, commit=True)]
    seen = assert_same(fetched(batches), [10], isolation_level=IsolationLevel.READ_COMMITTED,
                       aborted_transactions=[AbortedTransaction(5, 0)])
    assert [record.offset for record in seen[0][1]] == [2]
    assert seen[1][1] == 4  # the next fetch offset is past the last marker


def test_stop_iteration_in_a_deserializer_becomes_kafka_pythons_runtime_error():
    class Stops(Deserializer):
        def deserialize(self, topic, headers, data):
            raise StopIteration

    seen = assert_same(fetched([Batch([Record(1, None, b'x')])]), [1], value_deserializer=Stops())
    assert seen[0] == ('error', RuntimeError, 'StopIteration raised unpacking messageset')


def test_varint_beyond_int64_is_left_to_kafka_python():
    # A timestamp delta of 2**64 - 1 (a 10-byte varint): kafka-python computes it as a Python int.
    raw = bytearray(fetched([Batch([Record(0, None, b'x')])]))
    record_start = 61 + 1  # after the record's length varint
    body = bytes([0]) + b'\xfe' + b'\xff' * 8 + b'\x03' + raw[record_start + 2:]  # attributes, huge delta, rest
    raw[61:] = bytes([len(body) * 2]) + body
    struct.pack_into('>i', raw, 8, len(raw) - 12)
    fix_crc(raw)
    seen = assert_same(bytes(raw), [1])
    assert seen[0][1][0].timestamp == 2**64 - 1


def test_well_formed_batches_are_all_decoded_by_the_compiled_codec(monkeypatch):
    def handed_over(*_args):
        raise AssertionError("a well-formed batch was handed to kafka-python's generator")

    monkeypatch.setattr(STOCK, '_unpack_records', handed_over)
    shapes = [Record(5, b'key', b'value' * 30, [('h', b'v'), ('', None)]), Record(-1, None, None), Record(7, b'', b'')]
    batches = [Batch(shapes, codec=codec, base_offset=3 * index, leader_epoch=index)
               for index, codec in enumerate(sorted(CODECS))]
    part = DecodedPartitionRecords(0, TP, MemoryRecords(fetched(batches)))
    taken = part.take(None)
    assert [(record.offset, record.leader_epoch, record.key) for record in taken] == [
        (3 * index + i, index, key) for index in range(len(CODECS)) for i, key in enumerate([b'key', None, b''])]
    assert (part.next_fetch_offset, part.records_read, bool(part)) == (15, 15, False)


class _RecordsMoved(DefaultRecordBatch):
    """A DefaultRecordBatch whose _pos no longer says where the records start."""

    __slots__ = ()

    def __init__(self, buffer):
        super().__init__(buffer)
        self._pos = 0


class _NoBuffer:
    """A batch class that keeps its bytes elsewhere."""

    CODEC_NONE, HEADER_STRUCT = DefaultRecordBatch.CODEC_NONE, DefaultRecordBatch.HEADER_STRUCT

    def __init__(self, buffer):
        self.data = buffer

    def __iter__(self):
        return iter(())


@pytest.mark.parametrize(('batch_class', 'message'), [(_RecordsMoved, r'\(BadGzipFile: Not a gzipped file'),
                                                       (_NoBuffer, r"\(AttributeError: '_NoBuffer' object")])
def test_record_bytes_trips_when_kafka_python_moved_the_records(monkeypatch, batch_class, message):
    monkeypatch.setattr(record_bytes, 'DefaultRecordBatch', batch_class)
    with pytest.raises(KafkaPythonChanged, match=r'kafka-python 3\.0\.\d+: DefaultRecordBatch no longer holds its '
                                                 r'\(decompressed\) records in _buffer/_pos ' + message):
        record_bytes.install()
