"""The compiled batch builder writes exactly what kafka-python's MemoryRecordsBuilder writes.

Every example appends the same records to both builders (every codec, every record shape, batches that
fill up, producer state set before closing) and compares each append's result, the builder state after it,
and the closed batch byte for byte; kafka-python decodes our batches into the records appended. Errors for
bad records must be the same. ``estimate_size`` must be kafka-python's ``estimate_size_in_bytes``.
"""
from __future__ import annotations

import threading

import kafka
import kafka.producer.record_accumulator
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.producer.future import FutureRecordMetadata
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from kafka_kip import _codec
from kafka_kip._patch import accumulator_append, record_future
from kafka_kip._patch.rebind import KafkaPythonChanged
from kafka_kip.producer.records import (
    BatchProduceResult,
    CompiledProducerBatch,
    RecordFuture,
    records_builder,
)
from tests.support.record_batches import CODECS

pytestmark = pytest.mark.skipif(_codec.compiled is None, reason='the compiled record codec is not built')

_bytes_like = st.one_of(st.none(), st.binary(max_size=200), st.binary(max_size=50).map(bytearray),
                        st.binary(max_size=50).map(memoryview))
_headers = st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=30))), max_size=3)
_record = st.tuples(st.one_of(st.none(), st.integers(0, 1 << 41)), _bytes_like, _bytes_like,
                    st.one_of(st.none(), _headers))
_producer_state = st.one_of(st.none(), st.tuples(st.integers(0, 1 << 40), st.integers(0, 100),
                                                 st.integers(0, 1 << 30), st.booleans()))


def _appended(result):
    return None if result is None else (result.offset, result.size, result.timestamp, result.crc)


def _outcome(append, *record):
    try:
        return ('ok', _appended(append(*record)))
    except Exception as exc:  # the errors are what is compared
        return ('error', type(exc), str(exc))


def _state(builder):
    return builder.size_in_bytes(), builder.is_full(), builder.next_offset()


@settings(max_examples=300, deadline=None)
@given(records=st.lists(_record, max_size=25), codec=st.sampled_from(sorted(CODECS)),
       batch_size=st.sampled_from([0, 200, 1000, 1 << 20]), state=_producer_state)
def test_batches_are_byte_identical_to_kafka_pythons(records, codec, batch_size, state):
    stock = MemoryRecordsBuilder(2, CODECS[codec], batch_size)
    ours = _codec.compiled.RecordBatchBuilder(2, CODECS[codec], batch_size)
    fixed_time = 1_700_000_000_000
    accepted = []
    for timestamp, key, value, headers in records:
        timestamp = fixed_time if timestamp is None else timestamp  # (None means "now": not comparable)
        expected = _outcome(stock.append, timestamp, key, value, headers)
        assert _outcome(ours.append, timestamp, key, value, headers) == expected
        assert _state(ours) == _state(stock)
        if expected[0] == 'ok' and expected[1] is not None:
            accepted.append((None if key is None else bytes(key), None if value is None else bytes(value),
                             headers or []))
    if state is not None:
        stock.set_producer_state(*state)
        ours.set_producer_state(*state)
    stock.close()
    ours.close()
    assert bytes(ours.buffer()) == bytes(stock.buffer())
    assert (_state(ours), ours.compression_rate()) == (_state(stock), stock.compression_rate())
    assert (ours.producer_id, ours.producer_epoch, ours.base_sequence) == (
        stock.producer_id, stock.producer_epoch, stock.base_sequence)
    decoded = [(r.offset, r.key, r.value, r.headers) for batch in MemoryRecords(bytes(ours.buffer())) for r in batch]
    assert decoded == [(offset, *record) for offset, record in enumerate(accepted)]


@pytest.mark.parametrize(('timestamp', 'key', 'value', 'headers'), [
    (1.5, None, b'v', []),           # float timestamp
    (True, None, b'v', []),          # bool is not an int here
    (1, 'text', b'v', []),           # str key
    (1, None, 7, []),                # int value
    (1, None, b'v', [(b'k', b'v')]),  # bytes header key
    (1, None, b'v', [('\ud800', b'v')]),  # lone surrogate: not UTF-8
    (1, None, b'v', None),
])
def test_bad_records_fail_as_in_kafka_python(timestamp, key, value, headers):
    stock = MemoryRecordsBuilder(2, 0, 1 << 20)
    ours = _codec.compiled.RecordBatchBuilder(2, 0, 1 << 20)
    for builder in (stock, ours):
        builder.append(1, None, b'first', [])
    expected = _outcome(stock.append, timestamp, key, value, headers)
    assert _outcome(ours.append, timestamp, key, value, headers) == expected
    stock.close()
    ours.close()
    assert bytes(ours.buffer()) == bytes(stock.buffer())


def test_closed_builder_takes_no_records_and_no_producer_state():
    ours = _codec.compiled.RecordBatchBuilder(2, 0, 1 << 20)
    stock = MemoryRecordsBuilder(2, 0, 1 << 20)
    for builder in (stock, ours):
        builder.close()
        builder.close()  # closing twice is allowed (retries)
    assert ours.append(1, None, b'v') is None
    assert _outcome(ours.set_producer_state, 1, 0, 0, False) == _outcome(stock.set_producer_state, 1, 0, 0, False)
    assert bytes(ours.buffer()) == bytes(stock.buffer())


@settings(max_examples=300, deadline=None)
@given(key=_bytes_like, value=_bytes_like, headers=_headers.map(lambda hs: [(k, v or b'') for k, v in hs]))
def test_estimate_size_is_kafka_pythons(key, value, headers):
    assert _codec.compiled.estimate_size(key, value, headers) == DefaultRecordBatchBuilder.estimate_size_in_bytes(
        key, value, headers)


def test_first_record_failing_to_encode_still_sets_the_batch_timestamp_as_kafka_python_does():
    stock = MemoryRecordsBuilder(2, 0, 1 << 20)
    ours = _codec.compiled.RecordBatchBuilder(2, 0, 1 << 20)
    for builder in (stock, ours):
        with pytest.raises(UnicodeEncodeError):
            builder.append(500, None, b'v', [('\ud800', b'')])
        builder.append(700, None, b'w', [])
        builder.close()
    assert bytes(ours.buffer()) == bytes(stock.buffer())


# -- tripwires ------------------------------------------------------------------------------------------------

class _SlotsGone:
    """A codec whose kafka-python no longer keeps future attributes in slots."""

    @staticmethod
    def bind_future_slots():
        raise TypeError('not a __slots__ attribute')


class _BuildsOtherFutures:
    """A codec whose futures differ from kafka-python's (here: an args field off by one)."""

    bind_future_slots = staticmethod(lambda: None)
    succeed = staticmethod(lambda future, metadata: future.success(metadata))

    @staticmethod
    def new_record_future(future_type, produce_future, args):
        return FutureRecordMetadata(produce_future, args[0] + 1, *args[1:])


@pytest.mark.parametrize(('codec', 'message'), [
    (_SlotsGone, r'no longer keeps its attributes in __slots__ \(TypeError: not a __slots__ attribute\)'),
    (_BuildsOtherFutures, 'futures built in its slots no longer behave like the ones it builds'),
])
def test_record_future_trips_when_kafka_pythons_futures_changed(codec, message):
    with pytest.raises(KafkaPythonChanged, match=r'kafka-python 3\.0\.\d+: FutureRecordMetadata ' + message):
        record_future.install(codec, RecordFuture)


def test_accumulator_append_trips_when_kafka_python_no_longer_builds_batches_by_name(monkeypatch):
    monkeypatch.setattr(kafka.producer.record_accumulator.RecordAccumulator, 'append', lambda *args: None)
    with pytest.raises(KafkaPythonChanged, match=r"no longer uses \['MemoryRecordsBuilder', 'ProducerBatch'\]"):
        accumulator_append.install(records_builder=records_builder, batch=CompiledProducerBatch)


def test_record_futures_complete_as_kafka_pythons():
    """Every way of completing: success with and without callbacks, record errors, a failed batch future."""
    tp = kafka.TopicPartition('t', 1)
    outcomes = []
    for compiled in (False, True):
        seen = []
        for result in [(100, -1, None), (100, 555, None), (-1, -1, None), (100, -1, lambda i: ValueError(i))]:
            batch = BatchProduceResult(tp, [])
            futures = [_codec.compiled.new_record_future(RecordFuture, batch, (i, 10 + i, None, 1, 2, -1),
                                                         batch.records_lock)
                       if compiled else FutureRecordMetadata(batch, i, 10 + i, None, 1, 2, -1) for i in range(3)]
            batch.record_futures.extend(f for f in futures if type(f) is RecordFuture)
            futures[1].add_callback(seen.append)
            futures[2].add_errback(lambda exc, seen=seen: seen.append(repr(exc)))
            batch.success(result)
            seen.append([(f.is_done, f.value, repr(f.exception)) for f in futures])
        outcomes.append(seen)
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == kafka.producer.future.RecordMetadata('t', 1, tp, 101, 11, None, 1, 2, -1)


def test_callbacks_added_while_the_batch_completes_run_once():
    """An application thread registering callbacks while the sender completes the batch (the futures share
    the batch's lock): every callback runs exactly once, with the record's metadata."""
    tp = kafka.TopicPartition('t', 0)
    batch = BatchProduceResult(tp, [])
    futures = [_codec.compiled.new_record_future(RecordFuture, batch, (i, 7, None, -1, 1, -1), batch.records_lock)
               for i in range(20_000)]
    batch.record_futures.extend(futures)
    called = []
    registering = threading.Thread(target=lambda: [f.add_callback(called.append) for f in futures])
    registering.start()
    batch.success((0, -1, None))
    registering.join()
    assert sorted(m.offset for m in called) == list(range(20_000))
    assert all(f.succeeded() and f.value.offset == i for i, f in enumerate(futures))
