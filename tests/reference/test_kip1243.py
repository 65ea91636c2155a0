"""KIP-1243 on the reference brokers: the metadata log, response header offsets, the consistency check.

Raw requests (:class:`~kafka_kip_reference.fixtures.wire_client.WireClient`) with and without a consistency state in their
header, against a 3-broker cluster whose broker 2 has its metadata delayed where a test needs a stale broker.
"""
from __future__ import annotations

import io
import threading
import time

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.protocol.constants import (
    INCONSISTENT_CLUSTER_ID,
    NONE,
    STALE_METADATA,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from kafka_kip.protocol.headers import (
    ConsistencyState,
    RequestConsistencyState,
    RequestHeader,
    ResponseConsistencyState,
    ResponseHeader,
    consistency_state_tags,
    read_header_tags,
)
from kafka_kip.protocol.messages import REQUESTS, RESPONSES
from kafka_kip.protocol.requests import metadata_request, produce_request
from kafka_kip_reference import Delay, ReferenceCluster
from kafka_kip_reference.broker.apis import HANDLERS
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.error_responses import error_response
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient

pytestmark = pytest.mark.kip1243

WAIT_MS = 300


@pytest.fixture
def cluster(reference_cluster_factory) -> ReferenceCluster:
    return reference_cluster_factory(broker_config={'metadata.consistency.wait.max.ms': WAIT_MS})


def describe_cluster(version: int = 0):
    return REQUESTS[ApiKey.DescribeCluster](version=version, include_cluster_authorized_operations=False)


def test_every_metadata_change_is_a_record_and_images_contain_it(cluster):
    start = cluster.metadata_offset()
    assert [r.change for r in cluster.metadata_log()] == [
        'broker 0 started', 'broker 0 rejoined', 'broker 1 started', 'broker 1 rejoined', 'broker 2 started',
        'broker 2 rejoined']
    assert start == 5 and [r.offset for r in cluster.metadata_log()] == list(range(6))
    cluster.create_topic('t', partitions=2, replication_factor=3)
    cluster.create_partitions('t', 3)
    assert [(r.offset, r.change) for r in cluster.metadata_log(6)] == [
        (6, 'create topic t (2 partitions)'), (7, 'create partitions of t: 2 -> 3')]
    assert [cluster.metadata_offset(b) for b in range(3)] == [7, 7, 7]


def test_a_delayed_broker_keeps_its_image_offset_until_released(cluster):
    cluster.delay_metadata(2)
    held = cluster.metadata_offset(2)
    cluster.create_topic('t', partitions=1, replication_factor=3)
    assert cluster.metadata_offset(2) == held < cluster.metadata_offset() == cluster.metadata_offset(0)
    cluster.release_metadata(2)
    assert cluster.metadata_offset(2) == cluster.metadata_offset()


def test_response_headers_carry_cluster_id_and_the_image_offset(cluster):
    cluster.delay_metadata(2)
    cluster.create_topic('t', partitions=1, replication_factor=3)
    for broker in (0, 2):
        with WireClient(cluster.brokers()[broker]) as wire:
            wire.request(describe_cluster())
            assert wire.last_consistency == ConsistencyState(cluster.cluster_id, cluster.metadata_offset(broker))
            wire.request(metadata_request(version=8))  # not flexible: no tags
            assert wire.last_consistency is None


@pytest.mark.parametrize('cluster_id, token', [('ref-é', 300), (None, -1), ('c' * 200, 2 ** 63 - 1)])
def test_header_tags_are_kafka_pythons_encoding(cluster_id, token):
    response = ResponseHeader(correlation_id=0, consistency_state=ResponseConsistencyState(
        cluster_id=cluster_id, consistency_token=token)).encode(flexible=True)
    assert response[4:] == consistency_state_tags(cluster_id, token)
    request = RequestHeader(request_api_key=ApiKey.Metadata, request_api_version=12, correlation_id=7, client_id='c',
                            consistency_state=RequestConsistencyState(cluster_id=cluster_id, consistency_token=token))
    assert request.encode(flexible=True) == RequestHeader(
        request_api_key=ApiKey.Metadata, request_api_version=12, correlation_id=7, client_id='c').encode(flexible=True)[:-1] + \
        consistency_state_tags(cluster_id, token)
    assert read_header_tags(response, 4) == (ConsistencyState(cluster_id, token), len(response))
    assert ResponseHeader.decode(io.BytesIO(response), flexible=True).consistency_state.consistency_token == token
    unknown_tag = b'\x01\x07\x02ab'
    assert read_header_tags(unknown_tag, 0) == (None, len(unknown_tag))


def test_a_stock_broker_ignores_the_state_and_sends_empty_tags(reference_cluster_factory):
    cluster = reference_cluster_factory(features=())
    with WireClient(cluster.brokers()[0]) as wire:
        response = wire.request(describe_cluster(), consistency=ConsistencyState('another', 10 ** 9))
        assert (response.error_code, response.cluster_id, wire.last_consistency) == (NONE, cluster.cluster_id, None)


def test_another_cluster_id_is_refused_with_104_on_every_api(cluster):
    cluster.create_topic('t', partitions=1, replication_factor=1)
    other = ConsistencyState('other-cluster', 0)
    with WireClient(cluster.brokers()[0]) as wire:
        metadata = wire.request(metadata_request(['t'], version=13), consistency=other)
        assert (metadata.error_code, metadata.brokers, metadata.cluster_id) == (
            INCONSISTENT_CLUSTER_ID, [], cluster.cluster_id)
        metadata = wire.request(metadata_request(['t'], version=12), consistency=other)
        assert [(t.name, t.error_code) for t in metadata.topics] == [('t', INCONSISTENT_CLUSTER_ID)]
        produced = wire.request(produce_request('t', 0, build_batch([(None, b'v')])), consistency=other)
        assert [(p.index, p.error_code, p.base_offset) for t in produced.responses
                for p in t.partition_responses] == [(0, INCONSISTENT_CLUSTER_ID, -1)]
        described = wire.request(describe_cluster(), consistency=other)
        assert described.error_code == INCONSISTENT_CLUSTER_ID
        assert described.error_message == (f"the request is for cluster 'other-cluster'; broker 0 belongs to "
                                           f"cluster '{cluster.cluster_id}'")
        assert wire.last_consistency == ConsistencyState(cluster.cluster_id, cluster.metadata_offset())
    assert cluster.records(TopicPartition('t', 0)) == []  # nothing appended


def test_a_token_ahead_of_a_stale_broker_gets_stale_metadata_after_the_wait(cluster):
    cluster.delay_metadata(2)
    cluster.create_topic('t', partitions=1, replication_factor=3)
    token = ConsistencyState(cluster.cluster_id, cluster.metadata_offset())
    with WireClient(cluster.brokers()[2]) as wire:
        started = time.monotonic()
        metadata = wire.request(metadata_request(['t'], version=13), consistency=token)
        assert time.monotonic() - started >= WAIT_MS / 1000
        assert (metadata.error_code, metadata.topics) == (STALE_METADATA, [])
        assert [b.node_id for b in metadata.brokers] == [0, 1, 2]  # the brokers it knows, to go elsewhere
        assert wire.last_consistency == ConsistencyState(cluster.cluster_id, cluster.metadata_offset(2))
        every_topic = wire.request(metadata_request(None, version=12), consistency=token)
        assert every_topic.topics == []  # broker 2 knows no topic: nothing to put the error on
        assert wire.request(describe_cluster(), consistency=token).error_code == STALE_METADATA
        # not an API that reads the metadata cache: answered at once, from the broker's own state
        produced = wire.request(produce_request('t', 0, build_batch([(None, b'v')])), consistency=token)
        assert produced.responses[0].partition_responses[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_a_stale_broker_answers_once_released_within_the_wait(reference_cluster_factory):
    cluster = reference_cluster_factory(broker_config={'metadata.consistency.wait.max.ms': 60_000})
    cluster.delay_metadata(2)
    cluster.create_topic('t', partitions=2, replication_factor=3)
    token = ConsistencyState(cluster.cluster_id, cluster.metadata_offset())
    answers = []
    arrived = cluster.control(ApiKey.Metadata, lambda request: Delay(seconds=0), broker_id=2)
    with WireClient(cluster.brokers()[2], timeout=60) as wire:
        thread = threading.Thread(target=lambda: answers.append(
            wire.request(metadata_request(['t'], version=13), consistency=token)))
        thread.start()
        wait_until(lambda: arrived.fired == 1, 'the request at broker 2')
        assert thread.is_alive()  # held: broker 2 would answer STALE_METADATA only after 60 s
        cluster.release_metadata(2)
        thread.join(60)
        [metadata] = answers
        assert (metadata.error_code, metadata.topics[0].error_code, len(metadata.topics[0].partitions)) == (
            NONE, NONE, 2)
        assert wire.last_consistency.consistency_token >= token.consistency_token


def test_a_known_token_is_answered_at_once(cluster):
    token = ConsistencyState(cluster.cluster_id, cluster.metadata_offset())
    with WireClient(cluster.brokers()[1]) as wire:
        assert wire.request(describe_cluster(), consistency=token).error_code == NONE
        assert wire.request(describe_cluster(), consistency=ConsistencyState(None, -1)).error_code == NONE


def _one_of_each(struct, version: int) -> dict:
    """Fields for a request (or struct) with one element in every array: names 'x', numbers 0."""
    fields = {}
    for name, field in struct.fields.items():
        if not field.for_version_q(version):
            continue
        if field.is_struct_array():
            fields[name] = [field.array_of.data_class(**_one_of_each(field.array_of, version))]
        elif field.is_array():
            fields[name] = ['x'] if 'string' in field.type_str else [0]
        elif field.type_str == 'string':
            fields[name] = 'x'
    return fields


def _sample_request(api_key: int, version: int):
    request_class = REQUESTS[api_key]
    return request_class(version=version, **_one_of_each(request_class._struct, version))


def test_api_versions_is_answered_whatever_the_state(cluster):
    request = REQUESTS[ApiKey.ApiVersions](version=3, client_software_name='t', client_software_version='1')
    with WireClient(cluster.brokers()[0]) as wire:
        assert wire.request(request, consistency=ConsistencyState('other', 10 ** 9)).error_code == NONE


@pytest.mark.parametrize('api_key', sorted(set(HANDLERS) - {ApiKey.ApiVersions}))
def test_an_error_response_exists_for_every_flexible_version_of_every_handled_api(api_key):
    low, high = HANDLERS[api_key].versions
    response_class = RESPONSES[api_key]
    flexible = [v for v in range(low, high + 1) if response_class.flexible_version_q(v)]
    for version in flexible:
        request = REQUESTS[api_key].decode(_sample_request(api_key, version).encode(version=version),
                                           version=version)
        response = error_response(api_key, version, request, INCONSISTENT_CLUSTER_ID, 'no')
        decoded = response_class.decode(response.encode(version=version), version=version)
        assert INCONSISTENT_CLUSTER_ID in _error_codes(decoded), (api_key, version, decoded)


def _error_codes(obj) -> set:
    codes = set()
    for name in getattr(obj, 'fields', None) or ():
        value = getattr(obj, name, None)
        if name.endswith('error_code'):
            codes.add(value)
        for item in value if isinstance(value, list) else [value]:
            if hasattr(item, 'fields'):
                codes |= _error_codes(item)
    return codes

