"""Record futures built and completed in kafka-python's ``__slots__``, by the compiled codec.

kafka-python's ``Future.__init__`` makes two empty callback lists and a lock for every record a producer
sends, and ``FutureRecordMetadata`` registers each record future as a callback on its batch's future:
per-record Python frames and objects the garbage collector keeps walking. kafka_kip's compiled codec writes
the same attributes straight into the slots (no callback lists until a callback is registered: see
:class:`kafka_kip.producer.records.RecordFuture`) and completes the futures of a batch in one loop.

The tripwire: the slots must still be there, and a future built and completed that way must look exactly
like one kafka-python builds and completes (state, value, callbacks run once).
"""
from __future__ import annotations

from types import ModuleType

from kafka.producer.future import FutureProduceResult, FutureRecordMetadata, RecordMetadata
from kafka.structs import TopicPartition

from kafka_kip._patch.rebind import KAFKA_PYTHON_VERSION, KafkaPythonChanged

_TP = TopicPartition('tripwire', 0)
_ARGS = (3, 1_700_000_000_000, None, 1, 2, -1)
_METADATA = RecordMetadata('tripwire', 0, _TP, 3, 1_700_000_000_000, None, 1, 2, -1)


def _state(future: FutureRecordMetadata) -> tuple:
    return future.is_done, future.value, future.exception, future.args, future.succeeded(), type(future._lock)


def _changed(problem: str) -> KafkaPythonChanged:
    return KafkaPythonChanged(f'kafka-python {KAFKA_PYTHON_VERSION}: FutureRecordMetadata {problem}; the compiled '
                              'record codec builds record futures in its slots, so kafka_kip must be adapted')


def install(codec: ModuleType, record_future: type) -> None:
    """Let ``codec`` build and complete ``record_future`` s in kafka-python's slots, after checking that it
    gives what kafka-python does; raises KafkaPythonChanged otherwise."""
    try:
        codec.bind_future_slots()
    except (KeyError, TypeError) as exc:
        raise _changed(f'no longer keeps its attributes in __slots__ ({type(exc).__name__}: {exc})') from None
    stock = FutureRecordMetadata(FutureProduceResult(_TP), *_ARGS)
    ours = codec.new_record_future(record_future, FutureProduceResult(_TP), _ARGS)
    built_alike = _state(ours) == _state(stock) and ours._produce_future.topic_partition == _TP
    stock.success(_METADATA)
    codec.succeed(ours, _METADATA)
    completed_alike = _state(ours) == _state(stock) and (ours._callbacks, ours._errbacks) == (None, None)
    seen = []
    late = codec.new_record_future(record_future, FutureProduceResult(_TP), _ARGS)
    late.add_callback(seen.append)
    late.add_errback(seen.append)
    codec.succeed(late, _METADATA)
    late.add_callback(seen.append)
    if not (built_alike and completed_alike and seen == [_METADATA, _METADATA]):
        raise _changed('futures built in its slots no longer behave like the ones it builds')


__all__ = ['install']
