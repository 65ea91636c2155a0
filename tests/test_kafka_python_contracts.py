"""kafka_kip's collaborators accept what kafka-python's own accept (issue #31): the inputs kafka-python's unit suite
(3.0.11) hands its ConsumerCoordinator and KafkaProducer, given to kafka_kip's. The metadata cache's contract
(a recreated topic's leader epochs reset to -1) is in tests/metadata/test_kip232_cluster_metadata.py.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from unittest.mock import MagicMock

import pytest
from kafka.partitioner import StickyPartitioner
from kafka.producer.future import FutureProduceResult, FutureRecordMetadata
from kafka.protocol.consumer import OffsetCommitResponse
from kafka.structs import TopicPartition

from kafka_kip import KafkaProducer, OffsetAndMetadata
from kafka_kip.consumer.coordinator import ConsumerCoordinator
from kafka_kip.consumer.subscription import SubscriptionState
from kafka_kip.errors import InvalidLeaderEpochError, InvalidPartitionEpochError
from kafka_kip.metadata import KipNetClient

T0, T1 = TopicPartition('foobar', 0), TopicPartition('foobar', 1)
OFFSETS = {T0: OffsetAndMetadata(10, '', 3), T1: OffsetAndMetadata(20, '', 4)}


@pytest.fixture
def coordinator(reference_cluster) -> Iterator[ConsumerCoordinator]:
    client = KipNetClient(bootstrap_servers=reference_cluster.bootstrap_servers)
    coordinator = ConsumerCoordinator(client, SubscriptionState(), group_id='g')
    try:
        yield coordinator
    finally:
        coordinator.close(timeout_ms=0)
        client.close()


@pytest.mark.parametrize('version', range(9))
def test_a_tuple_built_offset_commit_response_is_read_as_kafka_python_reads_it(coordinator, version):
    throttle = () if version < 3 else (0,)
    ok = OffsetCommitResponse[version](*throttle, [('foobar', [(0, 0), (1, 0)])])
    assert coordinator._handle_offset_commit_response(OFFSETS, time.monotonic(), ok) is None
    fenced = OffsetCommitResponse[version](*throttle, [('foobar', [(0, 0), (1, InvalidLeaderEpochError.errno)])])
    with pytest.raises(InvalidLeaderEpochError, match=r'foobar-1 \(leader epoch 4\)$'):
        coordinator._handle_offset_commit_response(OFFSETS, time.monotonic(), fenced)
    other = OffsetCommitResponse[version](*throttle, [('foobar', [(0, InvalidPartitionEpochError.errno), (1, 0)])])
    with pytest.raises(InvalidPartitionEpochError) as raised:
        coordinator._handle_offset_commit_response(OFFSETS, time.monotonic(), other)
    assert raised.value.partition_epochs == {T0: -1}


@pytest.fixture
def producer_with_mocks(reference_cluster) -> Iterator[KafkaProducer]:
    """A kafka_kip producer whose accumulator, sender and metadata are then replaced with mocks, as kafka-python's
    test_producer.py replaces them to watch what send() hands the accumulator."""
    producer = KafkaProducer(bootstrap_servers=reference_cluster.bootstrap_servers)
    real_sender = producer._sender
    real_sender.initiate_close()
    real_sender.join(5)
    producer._accumulator = MagicMock()
    producer._sender = MagicMock()
    producer._metadata = MagicMock()
    producer._metadata.topics.return_value = {'t'}
    producer._metadata.partitions_for_topic.return_value = set(range(20))
    producer._metadata.available_partitions_for_topic.return_value = set(range(20))
    producer.config['partitioner'] = partitioner = MagicMock(spec=StickyPartitioner)
    partitioner.partition.side_effect = [3, 7]
    try:
        yield producer
    finally:
        producer.close(timeout=0)


def _appended() -> tuple:
    return FutureRecordMetadata(FutureProduceResult(TopicPartition('t', 0)), 0, 0, 0, 0, 0, 0), False, True, False


def test_a_send_with_a_mock_accumulator_takes_kafka_pythons_path(producer_with_mocks):
    producer = producer_with_mocks
    assert producer._lean_send  # the compiled path applies to this producer as built
    producer._accumulator.append.side_effect = [(None, False, False, True), _appended()]  # declined, then appended
    producer.send('t', value=b'no key')
    partitioner = producer.config['partitioner']
    assert partitioner.partition.call_count == 2
    partitioner.on_new_batch.assert_called_once_with('t', producer._metadata, 3)
    assert [call.args[0] for call in producer._accumulator.append.call_args_list] == [
        TopicPartition('t', 3), TopicPartition('t', 7)]
