"""KIP-391: producing records at given offsets, negotiated with each partition leader.

A leader that advertises ``kip.391`` (the reference cluster) is sent the batch with ``use_offset`` and
writes it at its offsets, gaps allowed. Any other leader is never sent ``use_offset`` (a stock broker
would ignore the tag and write elsewhere): ``offset_mode='broker'`` (the default) fails the records with
``UnsupportedFeatureError('kip.391')``, and ``offset_mode='checked'`` writes a batch as an ordinary
produce only when it starts at the log end offset, since a stock broker cannot leave a gap. Which
outcome a test expects therefore follows from what the target advertises.
"""
from __future__ import annotations

from typing import Any

import pytest

import kafka_kip as kafka
from integration.support import CONSUMER_CONFIG, TP, consume, produce_one_batch
from integration.targets import BrokerTarget
from kafka_kip.errors import InvalidProduceOffsetError, UnsupportedFeatureError
from kafka_kip.producer import OFFSET_MODES

pytestmark = pytest.mark.kip391


def _log(clients: Any, tp: Any, count: int) -> list[tuple[int, bytes]]:
    """``count`` records of ``tp`` from offset 0 as (offset, value), checking nothing follows them."""
    consumer = clients(kafka.KafkaConsumer, **CONSUMER_CONFIG)
    consumer.assign([tp])
    records = [(r.offset, r.value) for r in consume(consumer, count)]
    assert consumer.poll(timeout_ms=200) == {}
    return records


def _send_at(producer: Any, tp: Any, offsets: list[int]) -> list[Any]:
    futures = [producer.send(kafka.ProducerRecordWithOffset(tp.topic, tp.partition, value=b'at-%d' % offset,
                                                            offset=offset)) for offset in offsets]
    producer.flush(timeout=10)
    return futures


@pytest.mark.parametrize('mode', OFFSET_MODES)
def test_records_at_offsets_past_the_log_end(target: BrokerTarget, topic: str, clients: Any, mode: str) -> None:
    """Records at offsets 5-6 of an empty partition: written there by a kip.391 leader; elsewhere refused
    unwritten, with UnsupportedFeatureError('kip.391') (broker mode) or InvalidProduceOffsetError(0) (checked)."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    producer = clients(kafka.KafkaProducer, offset_mode=mode, linger_ms=50)
    futures = _send_at(producer, tp, [5, 6])
    if 'kip.391' in target.capabilities:
        assert [f.get(timeout=10).offset for f in futures] == [5, 6]
        written = [(5, b'at-5'), (6, b'at-6')]
    elif mode != 'checked':
        assert [(type(f.exception), f.exception.feature) for f in futures] == \
            [(UnsupportedFeatureError, 'kip.391')] * 2
        written = []
    else:
        assert [(type(f.exception), f.exception.log_end_offset) for f in futures] == \
            [(InvalidProduceOffsetError, 0)] * 2
        written = []
    # A plain record lands right after whatever was written.
    plain = producer.send(topic, value=b'plain', partition=0).get(timeout=10).offset
    assert plain == (7 if written else 0)
    assert _log(clients, tp, len(written) + 1) == written + [(plain, b'plain')]


def test_records_at_the_log_end_are_written_there(target: BrokerTarget, topic: str, clients: Any) -> None:
    """offset_mode='checked', log end 3: records at offsets 3-4 are written at 3-4 on every target."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    assert produce_one_batch(clients, tp, [b'p0', b'p1', b'p2']) == [0, 1, 2]
    producer = clients(kafka.KafkaProducer, offset_mode='checked', linger_ms=50)
    assert [f.get(timeout=10).offset for f in _send_at(producer, tp, [3, 4])] == [3, 4]
    assert _log(clients, tp, 5) == [(0, b'p0'), (1, b'p1'), (2, b'p2'), (3, b'at-3'), (4, b'at-4')]


def test_record_below_the_log_end_is_refused_with_the_log_end_offset(target: BrokerTarget, topic: str,
                                                                    clients: Any) -> None:
    """offset_mode='checked', log end 3: a record at offset 1 fails with InvalidProduceOffsetError(
    log_end_offset=3) on every target (the kip.391 leader refuses it, checked mode does not send it)."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    assert produce_one_batch(clients, tp, [b'p0', b'p1', b'p2']) == [0, 1, 2]
    producer = clients(kafka.KafkaProducer, offset_mode='checked', linger_ms=50)
    (future,) = _send_at(producer, tp, [1])
    assert (type(future.exception), future.exception.log_end_offset) == (InvalidProduceOffsetError, 3)
    assert _log(clients, tp, 3) == [(0, b'p0'), (1, b'p1'), (2, b'p2')]
