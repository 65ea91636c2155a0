"""Records with offsets take the compiled send path where the codec is built, with the same outcome as the Python
path (fallback): the same offsets, log end offsets, refusals and records in the log."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from kafka_kip import KafkaProducer, ProducerRecordWithOffset, TopicPartition
from kafka_kip.arrow import read_table
from kafka_kip.errors import InvalidProduceOffsetError
from kafka_kip.producer.batch import CompiledOffsetRecordFuture, OffsetRecordFuture
from kafka_kip_reference import ReferenceCluster

pytestmark = pytest.mark.kip391

TP = TopicPartition('offsets', 0)
HEADERS = [('h', b'x'), ('null', None)]


def test_offset_sends_compiled_and_fallback(codec_mode: str,
                                            reference_cluster_factory: Callable[..., ReferenceCluster]) -> None:
    cluster = reference_cluster_factory(1)
    cluster.create_topic(TP.topic, 1, 1)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50)
    try:
        futures = [producer.send(ProducerRecordWithOffset(TP.topic, 0, None, b'v%d' % o, HEADERS, 1000 + o, o))
                   for o in range(5)]
        futures += [producer.send(TP.topic, b'v%d' % o, b'k', partition=0, offset=o) for o in (10, 11)]
        metadata = [f.get(30) for f in futures]
        below = producer.send(TP.topic, b'late', partition=0, offset=3)
        with pytest.raises(InvalidProduceOffsetError) as refused:
            below.get(30)
    finally:
        producer.close()
    expected_type = CompiledOffsetRecordFuture if codec_mode == 'compiled' else OffsetRecordFuture
    assert {type(f) for f in futures + [below]} == {expected_type}
    assert [(m.offset, m.log_end_offset, m.timestamp) for m in metadata[:5]] == [(o, 5, 1000 + o) for o in range(5)]
    assert [(m.offset, m.log_end_offset) for m in metadata[5:]] == [(10, 12), (11, 12)]
    assert [(m.serialized_key_size, m.serialized_value_size, m.serialized_header_size) for m in metadata[:2]] == [
        (-1, 2, 6), (-1, 2, 6)]  # header keys and values: 1 + 1 + 4 + 0
    assert refused.value.log_end_offset == 12
    written = read_table(cluster.bootstrap_servers, TP.topic).to_pydict()
    assert list(zip(written['offset'], written['key'], written['value'], written['headers'], strict=True)) == (
        [(o, None, b'v%d' % o, [{'key': 'h', 'value': b'x'}, {'key': 'null', 'value': None}]) for o in range(5)]
        + [(10, b'k', b'v10', None), (11, b'k', b'v11', None)])
