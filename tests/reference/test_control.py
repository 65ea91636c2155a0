"""ReferenceCluster: request controls (answer, delay, drop, pass), advertised features and API versions."""
from __future__ import annotations

import threading
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.api_key import ApiKey

from kafka_kip.errors import InvalidPartitionEpochError
from kafka_kip.protocol.constants import INVALID_RECORD, NONE, OFFSET_NOT_AVAILABLE
from kafka_kip.protocol.features import parse_supported_features
from kafka_kip.protocol.messages import REQUESTS, RESPONSES
from kafka_kip.protocol.requests import (
    fetch_request,
    list_offsets_request,
    metadata_request,
    offset_for_leader_epoch_request,
    produce_request,
)
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.control import Answer, ControlledRequest, Delay, Drop, Pass
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.support.clusters import cluster_with_topic_t
from tests.support.consuming import read_to_end

TP = TopicPartition('t', 0)
LIST_OFFSETS, METADATA = ApiKey.ListOffsets, ApiKey.Metadata
PRODUCE, API_VERSIONS = ApiKey.Produce, ApiKey.ApiVersions


def _list_offsets(address, timestamp: int = -1):
    with WireClient(address) as wire:
        return wire.request(list_offsets_request('t', 0, timestamp)).topics[0].partitions[0]


def _not_available(request: ControlledRequest) -> Answer:
    """A ListOffsets answer with OFFSET_NOT_AVAILABLE for every partition asked about."""
    topic_class = RESPONSES[LIST_OFFSETS].ListOffsetsTopicResponse
    partition_class = topic_class.ListOffsetsPartitionResponse
    return Answer(request.response(topics=[topic_class(name=t.name, partitions=[
        partition_class(partition_index=p.partition_index, error_code=OFFSET_NOT_AVAILABLE, timestamp=-1,
                        offset=-1, leader_epoch=-1) for p in t.partitions]) for t in request.request.topics]))


cluster = cluster_with_topic_t(brokers=1, partitions=1, replication_factor=1)


# -- control() ------------------------------------------------------------------------------------------


def test_answer_replaces_the_handler_once_then_the_control_is_gone(cluster):
    handle = cluster.control(LIST_OFFSETS, _not_available)
    address = cluster.brokers()[0]

    assert (handle.fired, handle.active) == (0, True)
    assert _list_offsets(address).error_code == OFFSET_NOT_AVAILABLE
    assert (handle.fired, handle.active) == (1, False)
    answered = _list_offsets(address)
    assert (answered.error_code, answered.offset) == (NONE, 0)


def test_keep_answers_every_request_until_removed(cluster):
    handle = cluster.control(LIST_OFFSETS, _not_available, keep=True)
    address = cluster.brokers()[0]

    assert [_list_offsets(address).error_code for _ in range(3)] == [OFFSET_NOT_AVAILABLE] * 3
    handle.remove()
    handle.remove()  # idempotent
    assert (_list_offsets(address).error_code, handle.fired, handle.active) == (NONE, 3, False)


def test_a_passing_control_sees_every_request_and_stays(cluster):
    seen = []

    def observe(request: ControlledRequest) -> None:
        seen.append((request.broker_id, request.api_key, request.api_version, request.client_id,
                     [t.name for t in request.request.topics]))

    handle = cluster.control(METADATA, observe)
    with WireClient(cluster.brokers()[0], client_id='observed') as wire:
        wire.request(metadata_request(['t'], version=12))
        wire.request(metadata_request(['t', 'u'], version=9))

    assert seen == [(0, METADATA, 12, 'observed', ['t']), (0, METADATA, 9, 'observed', ['t', 'u'])]
    assert (handle.fired, handle.active) == (0, True)


def test_controls_run_in_order_and_pass_on_to_the_next(cluster):
    calls = []
    first = cluster.control(LIST_OFFSETS, lambda request: calls.append('first') or Pass(), keep=True)
    second = cluster.control(None, lambda request: calls.append(f'second {request.api_key}') or None, keep=True)
    third = cluster.control(LIST_OFFSETS, lambda request: calls.append('third') or _not_available(request))

    assert _list_offsets(cluster.brokers()[0]).error_code == OFFSET_NOT_AVAILABLE
    assert calls == ['first', f'second {LIST_OFFSETS}', 'third']
    assert [first.fired, second.fired, third.fired] == [0, 0, 1]


def test_broker_id_limits_a_control_to_one_broker(reference_cluster_factory):
    cluster = reference_cluster_factory(2)
    cluster.create_topic('t', 1, 2)
    follower = cluster.replicas(TP)[1]
    cluster.control(LIST_OFFSETS, _not_available, broker_id=follower, keep=True)

    assert _list_offsets(cluster.brokers()[cluster.leader(TP)]).error_code == NONE
    assert _list_offsets(cluster.brokers()[follower]).error_code == OFFSET_NOT_AVAILABLE
    with pytest.raises(ValueError, match=r'unknown broker id 5; the brokers are \[0, 1\]'):
        cluster.control(LIST_OFFSETS, _not_available, broker_id=5)


def test_drop_closes_the_connection_and_a_producer_retries_without_duplicating(cluster):
    handle = cluster.control(PRODUCE, lambda request: Drop())
    with WireClient(cluster.brokers()[0]) as wire, pytest.raises(ConnectionError):
        wire.request(produce_request('t', 0, build_batch([(None, b'lost')])))
    assert (handle.fired, cluster.records(TP)) == (1, [])

    handle = cluster.control(PRODUCE, lambda request: Drop())
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True,
                             retry_backoff_ms=10)
    try:
        metadata = producer.send('t', b'once', partition=0).get(timeout=20)
    finally:
        producer.close()
    assert (handle.fired, metadata.offset, [r.value for r in cluster.records(TP)]) == (1, 0, [b'once'])


def test_delay_until_an_event_holds_the_request_while_other_connections_are_served(cluster):
    release = threading.Event()
    handle = cluster.control(LIST_OFFSETS, lambda request: Delay(until=release))
    address = cluster.brokers()[0]
    answers = []
    held = threading.Thread(target=lambda: answers.append(_list_offsets(address)))
    held.start()
    try:
        with WireClient(address) as other:  # the broker still serves others while one request is held
            deadline = time.monotonic() + 10
            while not handle.fired and time.monotonic() < deadline:
                other.request(metadata_request(['t']))
            assert (handle.fired, answers) == (1, [])
            assert other.request(metadata_request(['t'])).topics[0].error_code == NONE
    finally:
        release.set()
        held.join(10)
    assert [(a.error_code, a.offset) for a in answers] == [(NONE, 0)]


def test_delay_seconds_answers_after_at_least_that_long(cluster):
    cluster.control(LIST_OFFSETS, lambda request: Delay(0.3))
    started = time.monotonic()
    assert _list_offsets(cluster.brokers()[0]).error_code == NONE
    assert time.monotonic() - started >= 0.3


def test_a_failing_control_is_an_internal_error_and_closes_the_connection():
    with ReferenceCluster(brokers=1) as cluster:
        cluster.create_topic('t', 1, 1)
        cluster.control(LIST_OFFSETS, lambda request: 1 / 0)
        cluster.control(METADATA, lambda request: 'answer')
        with pytest.raises(ConnectionError):
            _list_offsets(cluster.brokers()[0])
        with WireClient(cluster.brokers()[0]) as wire, pytest.raises(ConnectionError):
            wire.request(metadata_request(['t']))
        errors = cluster.internal_errors
    assert [type(e) for e in errors] == [ZeroDivisionError, TypeError]
    assert str(errors[1]) == "control function returned 'answer'; expected Answer, Delay, Drop, Pass or None"


def test_bad_actions_are_refused_when_made():
    with pytest.raises(ValueError, match='Delay needs seconds, until, or both'):
        Delay()
    with pytest.raises(ValueError, match='must not be negative, got -1'):
        Delay(-1)


# -- features= ------------------------------------------------------------------------------------------


def _features(cluster) -> dict:
    with WireClient(cluster.brokers()[0]) as wire:
        return parse_supported_features(wire.request(REQUESTS[API_VERSIONS](version=3, client_software_name='t',
                                                                             client_software_version='1')))


#: Apache Kafka 4.4's own supported features, advertised whatever ``features=`` names (KIP-848's group.version,
#: KIP-890's transaction.version)
KAFKA_FEATURES = {'group.version': (0, 1), 'transaction.version': (0, 2)}


def test_default_features_are_every_implemented_extension(reference_cluster_factory):
    assert _features(reference_cluster_factory(1)) == {'kip.232': (1, 1), 'kip.253': (1, 1), 'kip.391': (1, 1),
                                                       'kip.1243': (1, 1), **KAFKA_FEATURES}
    assert _features(reference_cluster_factory(1, features=['kip.391'])) == {'kip.391': (1, 1), **KAFKA_FEATURES}


def test_a_stock_cluster_advertises_no_extension_and_ignores_their_fields(reference_cluster_factory):
    cluster = reference_cluster_factory(1, features=())
    cluster.create_topic('t', 1, 1)
    assert (_features(cluster), cluster.features) == (KAFKA_FEATURES, frozenset())
    address = cluster.brokers()[0]
    with WireClient(address) as wire:
        # use_offset is an unknown tag to a stock broker: a batch at offset 5 is an ordinary produce with a base
        # offset other than 0, which Kafka refuses; one at offset 0 lands at the log end
        produced = wire.request(produce_request('t', 0, build_batch([(None, b'a')], base_offset=5), use_offset=True))
        partition = produced.responses[0].partition_responses[0]
        assert (partition.error_code, partition.base_offset, partition.log_end_offset) == (INVALID_RECORD, -1, -1)
        produced = wire.request(produce_request('t', 0, build_batch([(None, b'a')], base_offset=0), use_offset=True))
        partition = produced.responses[0].partition_responses[0]
        assert (partition.error_code, partition.base_offset, partition.log_end_offset) == (NONE, 0, -1)
        metadata = wire.request(metadata_request(['t']))
        assert (metadata.max_partition_epoch, metadata.topics[0].partitions[0].partition_epoch) == (-1, -1)
        fetched = wire.request(fetch_request('t', 0, 0)).responses[0].partitions[0]
        assert (fetched.error_code, fetched.partition_epoch) == (NONE, -1)
        listed = wire.request(list_offsets_request('t', 0, -1)).topics[0].partitions[0]
        assert (listed.offset, listed.partition_epoch) == (1, -1)
    assert [(r.offset, r.value) for r in cluster.records(TP)] == [(0, b'a')]


def test_a_stock_cluster_stores_commits_without_partition_epoch_checks(reference_cluster_factory):
    commit_class = REQUESTS[ApiKey.OffsetCommit]
    commit_topic = commit_class.OffsetCommitRequestTopic
    fetch_class = REQUESTS[ApiKey.OffsetFetch]

    def commit_and_fetch(cluster):
        with WireClient(cluster.brokers()[0]) as wire:
            committed = wire.request(commit_class(
                version=8, group_id='g', generation_id_or_member_epoch=-1, member_id='', group_instance_id=None,
                topics=[commit_topic(name='t', partitions=[commit_topic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=3, committed_leader_epoch=0, committed_metadata='',
                    partition_epoch=99, commit_timestamp=1234)])]))
            fetched = wire.request(fetch_class(version=7, group_id='g', require_stable=False, topics=[
                fetch_class.OffsetFetchRequestTopic(name='t', partition_indexes=[0])]))
        row = fetched.topics[0].partitions[0]
        return committed.topics[0].partitions[0].error_code, (row.committed_offset, row.partition_epoch,
                                                              row.commit_timestamp)

    extended = reference_cluster_factory(1)
    extended.create_topic('t', 1, 1)
    stock = reference_cluster_factory(1, features=())
    stock.create_topic('t', 1, 1)
    assert commit_and_fetch(extended) == (InvalidPartitionEpochError.errno, (-1, -1, -1))
    assert commit_and_fetch(stock) == (NONE, (3, -1, -1))


def test_features_are_checked():
    with pytest.raises(ValueError, match="unknown feature 'kip.999'; features are kip.232, kip.253, kip.391, kip.1243"):
        ReferenceCluster(1, features=['kip.999'])
    with pytest.raises(TypeError, match="got the string 'kip.232'"):
        ReferenceCluster(1, features='kip.232')


# -- api_versions= --------------------------------------------------------------------------------------


def test_an_api_left_out_is_not_advertised_and_its_requests_close_the_connection(reference_cluster_factory):
    cluster = reference_cluster_factory(1, api_versions={23: None})
    cluster.create_topic('t', 1, 1)
    assert 23 not in cluster.api_versions
    with WireClient(cluster.brokers()[0]) as wire:
        keys = {k.api_key for k in wire.request(REQUESTS[API_VERSIONS](version=3, client_software_name='t',
                                                                       client_software_version='1')).api_keys}
        assert 23 not in keys and 1 in keys
        with pytest.raises(ConnectionError):
            wire.request(offset_for_leader_epoch_request('t', 0, 0))


def test_narrowed_versions_are_advertised_and_enforced(reference_cluster_factory):
    cluster = reference_cluster_factory(1, api_versions={1: (4, 11)})
    cluster.create_topic('t', 1, 1)
    with WireClient(cluster.brokers()[0]) as wire:
        ranges = {k.api_key: (k.min_version, k.max_version) for k in wire.request(
            REQUESTS[API_VERSIONS](version=3, client_software_name='t', client_software_version='1')).api_keys}
        assert ranges[1] == (4, 11)
        with pytest.raises(ConnectionError):
            wire.request(fetch_request('t', 0, 0, version=12))
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    producer.send('t', b'v', partition=0).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset='earliest',
                             enable_auto_commit=False)
    consumer.assign([TP])
    try:
        assert [r.value for r in read_to_end(consumer, [TP])] == [b'v']
    finally:
        consumer.close()


def test_api_versions_are_checked():
    with pytest.raises(ValueError, match='versions 0-20 of api 1: the reference cluster handles 4-18'):
        ReferenceCluster(1, api_versions={1: (0, 20)})
    with pytest.raises(ValueError, match='api key 999 is not implemented by the reference cluster'):
        ReferenceCluster(1, api_versions={999: (0, 1)})
    with pytest.raises(ValueError, match=r'ApiVersions \(18\) cannot be left out'):
        ReferenceCluster(1, api_versions={18: None})
