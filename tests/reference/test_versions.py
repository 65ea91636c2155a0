"""The reference cluster's API versions are Apache Kafka 4.4's, for every API it implements.

Two independent sources: Kafka 4.4's own message specs (``common/message/*Request.json`` inside the
``kafka-clients`` jar from Maven Central; skipped where Maven cannot be used) and the ApiVersions table
kafka-python records for 4.3 brokers, the newest it knows, plus the three APIs 4.4 moved on. kafka-python's version
inference names the cluster 4.3. The extensions' own APIs (LeaderEpochsForPartition, KIP-253) come on top, from a
key range no Kafka API uses.
"""
from __future__ import annotations

import json
import re
import uuid
import zipfile

import kafka
import pytest
from kafka.errors import GroupIdNotFoundError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS, infer_broker_version_from_api_versions

from kafka_kip.protocol.constants import (
    INVALID_REQUEST,
    NONE,
    REBOOTSTRAP_REQUIRED,
    UNKNOWN_TOPIC_ID,
    UNSUPPORTED_VERSION,
)
from kafka_kip.protocol.features import KIP_253, KIP_391
from kafka_kip.protocol.messages import LEADER_EPOCHS_FOR_PARTITION_API_KEY, REQUESTS, RESPONSES
from kafka_kip.protocol.requests import fetch_request, list_offsets_request, metadata_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.advertised import FEATURE_APIS, FEATURES
from kafka_kip_reference.broker.apis import HANDLERS
from kafka_kip_reference.broker.registry import DuplicateHandlerError, HandlerRegistry, handles
from kafka_kip_reference.external.maven import JavaUnavailable, resolve
from kafka_kip_reference.fixtures.wire_client import WireClient

#: The newest release kafka-python records the ApiVersions of, and what Kafka 4.4 advertises beyond it.
RECORDED_RELEASE = (4, 3)
SINCE_RECORDED = {ApiKey.ApiVersions: (0, 5), ApiKey.TxnOffsetCommit: (0, 6), ApiKey.DeleteGroups: (0, 3)}
KAFKA_CLIENTS = 'org.apache.kafka:kafka-clients:4.4.0'
GROUP_ID_NOT_FOUND = GroupIdNotFoundError.errno
#: the admin APIs' ranges, named as well
ADMIN_APIS = (ApiKey.DescribeClientQuotas, ApiKey.AlterClientQuotas, ApiKey.DescribeUserScramCredentials,
              ApiKey.AlterUserScramCredentials, ApiKey.DescribeProducers, ApiKey.DescribeTransactions,
              ApiKey.ListTransactions)
EXTENSION_APIS = {key for keys in FEATURE_APIS.values() for key in keys}


def kafka_apis() -> dict[int, tuple[int, int]]:
    """The versions the reference brokers handle of Apache Kafka's own APIs."""
    return {key: versions for key, versions in HANDLERS.versions().items() if key not in EXTENSION_APIS}


def kafka_release_ranges() -> dict[int, tuple[int, int]]:
    """``{api_key: (min, max)}`` a Kafka 4.4 broker advertises, read from the release's message specs.

    A spec's ``latestVersionUnstable`` version is not advertised (``unstable.api.versions.enable`` is off), and
    Produce is advertised from v0 although only v3+ is served (KAFKA-18659, said in the spec's comment).
    """
    try:
        directory = resolve('kafka-clients', [KAFKA_CLIENTS])
    except JavaUnavailable as exc:
        pytest.skip(f'Kafka 4.4 message specs unavailable: {exc}')
    [jar] = directory.glob('kafka-clients-*.jar')
    ranges = {}
    with zipfile.ZipFile(jar) as archive:
        for name in archive.namelist():
            if not re.fullmatch(r'common/message/\w+Request\.json', name):
                continue
            text = archive.read(name).decode()
            spec = json.loads(re.sub(r'^\s*//.*$', '', text, flags=re.M))
            if 'broker' not in spec.get('listeners', []):
                continue
            low, _, high = spec['validVersions'].partition('-')
            low, high = int(low), int(high or low)
            if spec.get('latestVersionUnstable'):
                high -= 1
            if 'KAFKA-18659' in text:
                low = 0
            ranges[spec['apiKey']] = (low, high)
    return ranges


def test_every_handled_api_has_apache_kafka_4_4_ranges_from_its_message_specs():
    release = kafka_release_ranges()
    assert release[ApiKey.Produce] == (0, 13) and release[ApiKey.ApiVersions] == (0, 5)
    assert kafka_apis() == {key: release[key] for key in kafka_apis()}
    assert {key: release[key] for key in (ApiKey.ListOffsets, ApiKey.OffsetCommit, ApiKey.OffsetFetch,
                                          ApiKey.DescribeLogDirs, ApiKey.UpdateFeatures, ApiKey.EndTxn)} == {
        ApiKey.ListOffsets: (1, 11), ApiKey.OffsetCommit: (2, 10), ApiKey.OffsetFetch: (1, 10),
        ApiKey.DescribeLogDirs: (1, 5), ApiKey.UpdateFeatures: (0, 2), ApiKey.EndTxn: (0, 5)}


def test_the_quota_scram_producer_and_transaction_admin_apis_have_apache_kafka_4_4_ranges():
    release = kafka_release_ranges()
    assert {key: HANDLERS.versions()[key] for key in ADMIN_APIS} == {key: release[key] for key in ADMIN_APIS} == \
        {48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 61: (0, 0), 65: (0, 0), 66: (0, 2)}


def test_every_handled_api_has_the_ranges_kafka_python_records_for_4_3_brokers_but_4_4s_three():
    recorded = {**BROKER_API_VERSIONS[RECORDED_RELEASE], **SINCE_RECORDED}
    assert kafka_apis() == {key: recorded[key] for key in kafka_apis()}
    assert EXTENSION_APIS == {10000} and all(key not in recorded for key in EXTENSION_APIS)


def test_kafka_python_infers_the_newest_release_it_knows(reference_cluster):
    with WireClient(reference_cluster.brokers()[0]) as wire:
        answer = wire.request(REQUESTS[ApiKey.ApiVersions](version=3, client_software_name='t',
                                                           client_software_version='1'))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert advertised == HANDLERS.versions() and advertised[10000] == (0, 0)
    assert infer_broker_version_from_api_versions(advertised) == RECORDED_RELEASE
    producer = kafka.KafkaProducer(bootstrap_servers=reference_cluster.bootstrap_servers)
    try:
        assert producer.config['api_version'] == RECORDED_RELEASE
    finally:
        producer.close()


@pytest.mark.parametrize(('features', 'extension_apis'), [
    ((KIP_391,), {}),  # KIP-391 adds fields, no API
    ((KIP_253,), {LEADER_EPOCHS_FOR_PARTITION_API_KEY: (0, 0)}),
    (None, {LEADER_EPOCHS_FOR_PARTITION_API_KEY: (0, 0)}),  # every feature (the default)
], ids=['kip.391', 'kip.253', 'every-feature'])
def test_an_extension_api_is_advertised_and_answered_only_while_its_feature_is_on(reference_cluster_factory, features,
                                                                                  extension_apis):
    """A real ApiVersions request: Kafka 4.4's APIs always, an extension's API keys only with its ``kip.*`` feature
    (advertised in SupportedFeatures); a broker without it closes the connection on them, as on any unknown key."""
    cluster = reference_cluster_factory(1, features=features)
    leader_epochs = REQUESTS[LEADER_EPOCHS_FOR_PARTITION_API_KEY]
    with WireClient(cluster.brokers()[0]) as wire:
        answer = wire.request(REQUESTS[ApiKey.ApiVersions](version=4, client_software_name='t',
                                                           client_software_version='1'))
        wire.send(LEADER_EPOCHS_FOR_PARTITION_API_KEY, 0,
                  leader_epochs(version=0, group_id='g', topics=[]).encode(version=0))
        try:
            extension_answer = wire.read_response(LEADER_EPOCHS_FOR_PARTITION_API_KEY, 0).error_code
        except ConnectionError:
            extension_answer = 'connection closed'
    assert answer.error_code == NONE
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == {**kafka_apis(), **extension_apis}
    assert sorted((f.name, f.min_version, f.max_version) for f in answer.supported_features
                  if f.name.startswith('kip.')) == sorted((name, 1, 1) for name in features or FEATURES)
    assert extension_answer == (NONE if extension_apis else 'connection closed')


def test_every_handler_handles_every_version_it_declares():
    for key in HANDLERS:
        handler = HANDLERS[key]
        assert REQUESTS[key].min_version <= handler.min_version <= handler.max_version <= REQUESTS[key].max_version


def test_produce_v0_to_v2_are_advertised_but_close_the_connection(reference_cluster):
    with WireClient(reference_cluster.brokers()[0]) as wire:
        wire.send(ApiKey.Produce, 2, b'\xff\xff\x00\x00\x00\x01\x00\x00\x13\x88\x00\x00\x00\x00')
        with pytest.raises(ConnectionError):
            wire.read_frame()
    with WireClient(reference_cluster.brokers()[0]) as wire:  # ApiVersions itself answers in the v0 layout
        wire.send(ApiKey.ApiVersions, 9, b'')
        answer = wire.read_response(ApiKey.ApiVersions, 0)
    assert answer.error_code == UNSUPPORTED_VERSION


@pytest.mark.parametrize(('version', 'timestamp'), [(9, -5), (11, -6)])  # latest tiered, earliest pending upload
def test_list_offsets_tiered_offsets_are_minus_one_without_tiered_storage(reference_cluster, version, timestamp):
    reference_cluster.create_topic('t', 1, 1)
    with WireClient(reference_cluster.brokers()[reference_cluster.leader(kafka.TopicPartition('t', 0))]) as wire:
        partition = wire.request(list_offsets_request('t', 0, timestamp, version=version)).topics[0].partitions[0]
        fetched = wire.request(fetch_request('t', 0, 0, version=18, topic_id=reference_cluster.topic_id('t')))\
            .responses[0].partitions[0]
    assert (partition.error_code, partition.offset, partition.leader_epoch) == (NONE, -1, -1)
    assert (fetched.error_code, fetched.high_watermark) == (NONE, 0)


def test_api_versions_v5_answers_rebootstrap_required_to_a_client_that_meant_another_node(reference_cluster):
    """KIP-1242: a client names the cluster and node it means to reach; both or neither."""
    api_versions = REQUESTS[ApiKey.ApiVersions]

    def ask(cluster_id, node_id):
        with WireClient(reference_cluster.brokers()[1]) as wire:
            wire.send(ApiKey.ApiVersions, 5, bytes(api_versions(
                version=5, client_software_name='t', client_software_version='1', cluster_id=cluster_id,
                node_id=node_id).encode(version=5)))
            body = wire.read_frame()[4:]  # after the correlation id (ApiVersions' header is always v0)
        # kafka-python's ApiVersionsResponse.decode reads any error answer as v0; Kafka's client, as the broker
        # sends it, reads the version it asked for first
        answer = ApiMessage.decode.__func__(RESPONSES[ApiKey.ApiVersions], body, version=5)
        return answer.error_code, len(answer.api_keys)
    cluster_id = reference_cluster.state.cluster_id
    assert ask(cluster_id, 1) == ask(None, -1) == (NONE, len(HANDLERS.versions()))
    assert ask(cluster_id, 0) == ask('another-cluster', 1) == (REBOOTSTRAP_REQUIRED, 0)
    assert ask(cluster_id, -1) == ask(None, 1) == (INVALID_REQUEST, 0)


def test_offset_commit_and_fetch_v10_name_topics_by_id(reference_cluster):
    """Kafka 4.4's OffsetCommit/OffsetFetch v10: topics by id, UNKNOWN_TOPIC_ID for an id no topic has."""
    reference_cluster.create_topic('t', 2, 1)
    topic_id, unknown = reference_cluster.topic_id('t'), uuid.UUID(int=1)
    commit, fetch = REQUESTS[ApiKey.OffsetCommit], REQUESTS[ApiKey.OffsetFetch]
    with WireClient(reference_cluster.brokers()[coordinator(reference_cluster, 'g10')]) as wire:
        committed = wire.request(commit(
            version=10, group_id='g', generation_id_or_member_epoch=-1, member_id='', group_instance_id=None,
            topics=[commit.OffsetCommitRequestTopic(topic_id=tid, partitions=[
                commit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=1, committed_offset=7, committed_leader_epoch=-1, committed_metadata='m')])
                for tid in (topic_id, unknown)]))
        groups = fetch.OffsetFetchRequestGroup
        fetched = wire.request(fetch(version=10, require_stable=False, groups=[groups(
            group_id='g', member_id=None, member_epoch=-1, topics=[groups.OffsetFetchRequestTopics(
                topic_id=tid, partition_indexes=[0, 1]) for tid in (topic_id, unknown)])]))
        everything = wire.request(fetch(version=10, require_stable=False, groups=[groups(
            group_id='g', member_id=None, member_epoch=-1, topics=None)]))
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in committed.topics] == [
        (topic_id, [(1, NONE)]), (unknown, [(1, UNKNOWN_TOPIC_ID)])]
    [group] = fetched.groups
    assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
            for t in group.topics] == [(topic_id, [(0, -1, NONE), (1, 7, NONE)]),
                                       (unknown, [(0, -1, UNKNOWN_TOPIC_ID), (1, -1, UNKNOWN_TOPIC_ID)])]
    assert [(t.topic_id, [(p.partition_index, p.committed_offset) for p in t.partitions])
            for t in everything.groups[0].topics] == [(topic_id, [(1, 7)])]


def test_delete_groups_v3_and_describe_log_dirs_v5(reference_cluster):
    """DeleteGroups v3's error_message is null beside the error; DescribeLogDirs v5's directory is not cordoned."""
    delete, log_dirs = REQUESTS[ApiKey.DeleteGroups], REQUESTS[ApiKey.DescribeLogDirs]
    with WireClient(reference_cluster.brokers()[coordinator(reference_cluster, 'none')]) as wire:
        [deleted] = wire.request(delete(version=3, groups_names=['none'])).results
        [directory] = wire.request(log_dirs(version=5, topics=None)).results
    assert (deleted.group_id, deleted.error_code, deleted.error_message) == ('none', GROUP_ID_NOT_FOUND, None)
    assert (directory.error_code, directory.is_cordoned) == (NONE, False)


def coordinator(cluster: ReferenceCluster, key: str) -> int:
    """The broker coordinating group ``key``."""
    return cluster.state.coordinator_for(key)


@pytest.mark.reference_cluster(1, users={'alice': 'secret'})
def test_sasl_handshake_v0_takes_the_plain_token_bare(reference_cluster):
    with WireClient(reference_cluster.brokers()[0]) as wire:
        handshake = wire.request(REQUESTS[ApiKey.SaslHandshake](version=0, mechanism='PLAIN'))
        assert (handshake.error_code, handshake.mechanisms) == (NONE, ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'])
        wire.send_frame(b'\0alice\0secret')
        assert wire.read_frame() == b''  # PLAIN's empty server token: authenticated
        assert wire.request(metadata_request()).brokers[0].node_id == 0
    with WireClient(reference_cluster.brokers()[0]) as wire:
        wire.request(REQUESTS[ApiKey.SaslHandshake](version=0, mechanism='PLAIN'))
        wire.send_frame(b'\0alice\0wrong')
        with pytest.raises(ConnectionError):
            wire.read_frame()
    assert reference_cluster.internal_errors == []


def test_a_second_handler_for_an_api_key_fails_when_its_module_is_imported():
    with pytest.raises(DuplicateHandlerError, match=r'api key 1 is handled twice: by '
                                                    r'kafka_kip_reference\.broker\.apis\.fetch\.handle_fetch and by .*\.fetch_again'):
        @handles(ApiKey.Fetch, 4, 18)
        async def fetch_again(request, ctx):  # never registered: the decorator raises
            raise AssertionError
    registry = HandlerRegistry()
    with pytest.raises(ValueError, match=r'versions 0-20 of api 1 are not all known to its message classes \(0-18\)'):
        registry.register(ApiKey.Fetch, 0, 20, HANDLERS[ApiKey.Fetch].handle)
    assert HANDLERS[ApiKey.Fetch].handle.__name__ == 'handle_fetch'
