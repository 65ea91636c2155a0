"""Fetching by topic id (KIP-516, Fetch v13+): how kafka_kip addresses kafka-python's fetch requests, and how the
reference cluster answers them (as Apache Kafka does). The consumer end to end is in test_kip232_recreated_topic.py.
"""
from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from kafka.consumer.fetcher import FetchMetadata, FetchRequestData, FetchSessionHandler
from kafka.protocol.api_key import ApiKey
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.consumer import FetchRequest
from kafka.structs import TopicPartition

from kafka_kip.consumer.fetch_topic_ids import TopicIdAddressing
from kafka_kip.protocol.constants import (
    INCONSISTENT_TOPIC_ID,
    NONE,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip.protocol.requests import produce_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.fixtures.wire_client import WireClient

pytestmark = pytest.mark.kip232

OLD_ID = uuid.UUID('00000000-0000-0000-0000-00000000000a')
NEW_ID = uuid.UUID('00000000-0000-0000-0000-00000000000b')
OTHER_ID = uuid.UUID('00000000-0000-0000-0000-00000000000c')
A0, A1, B0 = TopicPartition('a', 0), TopicPartition('a', 1), TopicPartition('b', 0)
NODE = 1
FetchResponse = RESPONSES[ApiKey.Fetch]


def _partition(tp: TopicPartition, offset: int = 0):
    return FetchRequest.FetchTopic.FetchPartition(partition=tp.partition, current_leader_epoch=0, fetch_offset=offset,
                                                  last_fetched_epoch=-1, partition_max_bytes=1024)


def _request(to_send: dict[TopicPartition, object], forgotten: set[TopicPartition] = frozenset(),
             metadata: FetchMetadata = FetchMetadata.INITIAL) -> FetchRequest:
    return _built(FetchRequestData(to_send, set(forgotten), metadata))


def _built(data: FetchRequestData) -> FetchRequest:
    """The request kafka-python's fetcher builds from a session's ``data`` (topics by name, v12 at most)."""
    return FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=data.id,
                        session_epoch=data.epoch, topics=data.to_send, forgotten_topics_data=data.to_forget,
                        rack_id='', min_version=0, max_version=12)


def _negotiated(request: FetchRequest, broker_max: int) -> int:
    return BrokerVersionData(api_versions={1: (4, broker_max)}).api_version(request)


def _shape(entries) -> list[tuple]:
    return sorted((e.topic, e.topic_id, sorted(p if isinstance(p, int) else p.partition for p in e.partitions))
                  for e in entries)


# -- requests ---------------------------------------------------------------------------------------------


def test_a_request_whose_partitions_all_have_topic_ids_goes_by_topic_id_as_v13():
    request = _request({A0: _partition(A0), A1: _partition(A1), B0: _partition(B0)})
    TopicIdAddressing().address(NODE, request, {A0: OLD_ID, A1: OLD_ID, B0: OTHER_ID})
    assert _shape(request.topics) == [('a', OLD_ID, [0, 1]), ('b', OTHER_ID, [0])]
    assert (_negotiated(request, 17), _negotiated(request, 12)) == (13, 12)
    encoded = request.encode(version=13)
    assert FetchRequest.decode(encoded, version=13).topics[0].topic_id in (OLD_ID, OTHER_ID)


def test_partitions_of_one_name_tied_to_two_incarnations_go_as_two_topic_ids():
    request = _request({A0: _partition(A0), A1: _partition(A1)})
    TopicIdAddressing().address(NODE, request, {A0: OLD_ID, A1: NEW_ID})
    assert _shape(request.topics) == [('a', OLD_ID, [0]), ('a', NEW_ID, [1])]


def test_a_partition_without_topic_id_keeps_the_request_by_name_at_v12():
    request = _request({A0: _partition(A0), B0: _partition(B0)})
    TopicIdAddressing().address(NODE, request, {A0: OLD_ID, B0: None})
    assert _shape(request.topics) == [('a', None, [0]), ('b', None, [0])]
    assert _negotiated(request, 17) == 12


def test_forgotten_partitions_are_named_by_the_topic_id_the_session_holds_them_under():
    addressing = TopicIdAddressing()
    addressing.address(NODE, _request({A0: _partition(A0), A1: _partition(A1)}), {A0: OLD_ID, A1: OLD_ID})
    # A1 leaves the session (held, or unassigned) in the next, incremental request, which sends nothing new
    incremental = _request({}, forgotten={A1}, metadata=FetchMetadata(7, 1))
    addressing.address(NODE, incremental, {A0: OLD_ID})
    assert _shape(incremental.forgotten_topics_data) == [('a', OLD_ID, [1])]
    assert _negotiated(incremental, 17) == 13


def _session(addressing: TopicIdAddressing, ids: dict[TopicPartition, uuid.UUID]) -> FetchSessionHandler:
    """A fetch session with ``ids``' partitions in it, established by a full request and its answer."""
    handler = FetchSessionHandler(NODE)
    partitions = {tp: _partition(tp) for tp in ids}
    addressing.address(NODE, _built(handler.build_next(partitions)), ids)
    response = FetchResponse(version=13, throttle_time_ms=0, error_code=0, session_id=7, responses=[
        FetchResponse.FetchableTopicResponse(topic_id=topic_id, partitions=[
            FetchResponse.FetchableTopicResponse.PartitionData(partition_index=tp.partition, error_code=0)])
        for tp, topic_id in ids.items()])
    addressing.name_topics(NODE, response)
    assert handler.handle_response(response)
    assert not handler.next_metadata.is_full
    return handler


def test_a_partition_fetched_by_another_topic_id_restarts_its_session_with_a_full_request():
    addressing = TopicIdAddressing()
    handler = _session(addressing, {A0: OLD_ID, B0: OTHER_ID})
    addressing.restart_changed_sessions({NODE: handler}, {A0: OLD_ID, B0: OTHER_ID}.get)
    assert not handler.next_metadata.is_full                   # nothing changed: the session goes on
    addressing.restart_changed_sessions({NODE: handler}, {A0: NEW_ID, B0: OTHER_ID}.get)
    assert (handler.next_metadata.session_id, handler.next_metadata.epoch) == (7, 0)   # full, replacing session 7
    request = _built(handler.build_next({A0: _partition(A0), B0: _partition(B0)}))
    addressing.address(NODE, request, {A0: NEW_ID, B0: OTHER_ID})
    assert _shape(request.topics) == [('a', NEW_ID, [0]), ('b', OTHER_ID, [0])]


def test_a_switch_from_names_to_topic_ids_restarts_the_session():
    addressing = TopicIdAddressing()
    handler = _session(addressing, {A0: OLD_ID})
    addressing.restart_changed_sessions({NODE: handler}, {A0: None}.get)
    assert handler.next_metadata.epoch == 0


# -- responses --------------------------------------------------------------------------------------------


def test_a_v13_response_gets_the_names_of_the_topic_ids_its_request_named():
    addressing = TopicIdAddressing()
    addressing.address(NODE, _request({A0: _partition(A0)}), {A0: OLD_ID})
    known = FetchResponse.FetchableTopicResponse(topic_id=OLD_ID, partitions=[
        FetchResponse.FetchableTopicResponse.PartitionData(partition_index=0, error_code=UNKNOWN_TOPIC_ID)])
    # Tansu 0.6.0 answers an unknown topic id with the nil id (decoded as None) and UNKNOWN_TOPIC_OR_PARTITION
    foreign = FetchResponse.FetchableTopicResponse(topic_id=None, partitions=[
        FetchResponse.FetchableTopicResponse.PartitionData(partition_index=0, error_code=UNKNOWN_TOPIC_OR_PARTITION)])
    response = FetchResponse(version=13, throttle_time_ms=0, error_code=0, session_id=0, responses=[known])
    assert addressing.name_topics(NODE, response) is True
    assert [(t.topic, t.topic_id) for t in response.responses] == [('a', OLD_ID)]
    assert (addressing.answered_for(A0), addressing.answered_for(A0)) == (OLD_ID, None)
    response.responses = [known, foreign]
    assert addressing.name_topics(NODE, response) is False
    assert [(t.topic, t.topic_id) for t in response.responses] == [('a', OLD_ID)]


# -- the reference cluster answers Fetch v13+ as Apache Kafka does -----------------------------------------------


@pytest.fixture
def stock_broker() -> Iterator[ReferenceCluster]:
    with ReferenceCluster(1, features=()) as running:
        yield running


def _fetch(topics: list[tuple[str, uuid.UUID, int]], max_wait_ms: int) -> FetchRequest:
    request_class = FetchRequest
    return request_class(
        version=13, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id='',
        topics=[request_class.FetchTopic(topic_id=topic_id, partitions=[request_class.FetchTopic.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20)]) for _name, topic_id, offset in topics])


def _answers(response) -> list[tuple]:
    return [(t.topic_id, p.error_code, len(p.records or b'')) for t in response.responses for p in t.partitions]


def test_an_unknown_topic_id_does_not_end_the_wait_for_the_other_partitions(stock_broker):
    """As Kafka's KafkaApis: a topic id unknown when the request arrives is answered UNKNOWN_TOPIC_ID together
    with the other partitions, which still wait for data (here: a record produced while the request waits)."""
    known = stock_broker.create_topic('known')
    stranger = uuid.uuid4()
    address = stock_broker.brokers()[0]
    with WireClient(address) as waiting, WireClient(address) as producing:
        request = _fetch([('unknown', stranger, 0), ('known', known, 0)], max_wait_ms=60_000)
        waiting.send(ApiKey.Fetch, 13, request.encode(version=13))
        produced = producing.request(produce_request('known', 0, build_batch([(None, b'r')]), version=9))
        assert produced.responses[0].partition_responses[0].error_code == NONE
        response = waiting.read_response(1, 13)
    assert [(topic_id, error, size > 0) for topic_id, error, size in _answers(response)] == [
        (stranger, UNKNOWN_TOPIC_ID, False), (known, NONE, True)]


def test_an_unknown_topic_id_alone_is_answered_at_once(stock_broker):
    stranger = uuid.uuid4()
    with WireClient(stock_broker.brokers()[0]) as wire:
        response = wire.request(_fetch([('unknown', stranger, 0)], max_wait_ms=60_000))
    assert _answers(response) == [(stranger, UNKNOWN_TOPIC_ID, 0)]


def test_a_topic_recreated_while_a_fetch_by_its_old_id_waits_is_inconsistent_topic_id(stock_broker):
    """The request arrives while the broker still knows the old id (its metadata is held back); the topic is
    recreated; when the broker's metadata catches up, the waiting read finds the partition under another
    id: INCONSISTENT_TOPIC_ID (Kafka's ReplicaManager.readFromLog), never the new incarnation's records."""
    old_id = stock_broker.create_topic('t')
    stock_broker.delay_metadata(0)
    stock_broker.delete_topic('t')
    new_id = stock_broker.create_topic('t')
    arrived = threading.Event()
    stock_broker.control(ApiKey.Fetch, lambda _request: arrived.set())
    with WireClient(stock_broker.brokers()[0]) as wire:
        wire.send(ApiKey.Fetch, 13, _fetch([('t', old_id, 0)], max_wait_ms=60_000).encode(version=13))
        assert arrived.wait(timeout=30)   # the broker took the request in while its metadata still had old_id
        stock_broker.release_metadata(0)
        response = wire.read_response(1, 13)
        with WireClient(stock_broker.brokers()[0]) as producing:
            producing.request(produce_request('t', 0, build_batch([(None, b'new')]), version=9))
        by_new_id = wire.request(_fetch([('t', new_id, 0)], max_wait_ms=0))
        by_old_id = wire.request(_fetch([('t', old_id, 0)], max_wait_ms=0))
    assert _answers(response) == [(old_id, INCONSISTENT_TOPIC_ID, 0)]
    assert [(topic_id, error, size > 0) for topic_id, error, size in _answers(by_new_id)] == [(new_id, NONE, True)]
    assert _answers(by_old_id) == [(old_id, UNKNOWN_TOPIC_ID, 0)]
