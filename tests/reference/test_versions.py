"""The reference cluster's API versions are Apache Kafka 4.1's, for every API it implements.

Two independent sources: Kafka 4.1's own message specs (``common/message/*Request.json`` inside the
``kafka-clients`` jar from Maven Central; skipped where Maven cannot be used) and the ApiVersions table
kafka-python records for 4.1 brokers. kafka-python's version inference names the cluster 4.1. The extensions'
own APIs (LeaderEpochsForPartition, KIP-253) come on top, from a key range no Kafka API uses.
"""
from __future__ import annotations

import json
import re
import zipfile

import kafka
import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS, infer_broker_version_from_api_versions

from kafka_kip.protocol.constants import NONE, UNSUPPORTED_VERSION
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import fetch_request, list_offsets_request, metadata_request
from kafka_kip_reference.broker.advertised import FEATURE_APIS
from kafka_kip_reference.broker.apis import HANDLERS
from kafka_kip_reference.broker.registry import DuplicateHandlerError, HandlerRegistry, handles
from kafka_kip_reference.external.maven import JavaUnavailable, resolve
from kafka_kip_reference.fixtures.wire_client import WireClient

RELEASE = (4, 1)
KAFKA_CLIENTS = 'org.apache.kafka:kafka-clients:4.1.2'
EXTENSION_APIS = {key for keys in FEATURE_APIS.values() for key in keys}


def kafka_apis() -> dict[int, tuple[int, int]]:
    """The versions the reference brokers handle of Apache Kafka's own APIs."""
    return {key: versions for key, versions in HANDLERS.versions().items() if key not in EXTENSION_APIS}


def kafka_release_ranges() -> dict[int, tuple[int, int]]:
    """``{api_key: (min, max)}`` a Kafka 4.1 broker advertises, read from the release's message specs.

    A spec's ``latestVersionUnstable`` version is not advertised (``unstable.api.versions.enable`` is off), and
    Produce is advertised from v0 although only v3+ is served (KAFKA-18659, said in the spec's comment).
    """
    try:
        directory = resolve('kafka-clients-4.1', [KAFKA_CLIENTS])
    except JavaUnavailable as exc:
        pytest.skip(f'Kafka 4.1 message specs unavailable: {exc}')
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


def test_every_handled_api_has_apache_kafka_4_1_ranges_from_its_message_specs():
    release = kafka_release_ranges()
    assert release[ApiKey.Produce] == (0, 13) and release[ApiKey.OffsetCommit] == (2, 9)  # the two exceptions
    assert kafka_apis() == {key: release[key] for key in kafka_apis()}


def test_every_handled_api_has_the_ranges_kafka_python_records_for_4_1_brokers():
    recorded = BROKER_API_VERSIONS[RELEASE]
    assert kafka_apis() == {key: recorded[key] for key in kafka_apis()}
    assert EXTENSION_APIS == {10000} and all(key not in recorded for key in EXTENSION_APIS)


def test_kafka_python_infers_apache_kafka_4_1(reference_cluster):
    with WireClient(reference_cluster.brokers()[0]) as wire:
        answer = wire.request(REQUESTS[ApiKey.ApiVersions](version=3, client_software_name='t',
                                                           client_software_version='1'))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert advertised == HANDLERS.versions() and advertised[10000] == (0, 0)
    assert infer_broker_version_from_api_versions(advertised) == RELEASE
    producer = kafka.KafkaProducer(bootstrap_servers=reference_cluster.bootstrap_servers)
    try:
        assert producer.config['api_version'] == RELEASE
    finally:
        producer.close()


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


def test_list_offsets_v9_latest_tiered_offset_is_minus_one_without_tiered_storage(reference_cluster):
    reference_cluster.create_topic('t', 1, 1)
    with WireClient(reference_cluster.brokers()[reference_cluster.leader(kafka.TopicPartition('t', 0))]) as wire:
        partition = wire.request(list_offsets_request('t', 0, -5, version=9)).topics[0].partitions[0]
        fetched = wire.request(fetch_request('t', 0, 0, version=18, topic_id=reference_cluster.topic_id('t')))\
            .responses[0].partitions[0]
    assert (partition.error_code, partition.offset, partition.leader_epoch) == (NONE, -1, -1)
    assert (fetched.error_code, fetched.high_watermark) == (NONE, 0)


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
