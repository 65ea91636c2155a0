"""ReferenceCluster: lifecycle, topics, partition state, fault injection API, SASL, plugin and CLI."""
from __future__ import annotations

import gc
import io
import os
import socket
import subprocess
import sys
import threading
import uuid
import warnings
from pathlib import Path

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import (
    ELIGIBLE_LEADERS_NOT_AVAILABLE,
    ILLEGAL_SASL_STATE,
    INVALID_PARTITIONS,
    INVALID_REPLICATION_FACTOR,
    LEADER_NOT_AVAILABLE,
    NONE,
    SASL_AUTHENTICATION_FAILED,
    TOPIC_ALREADY_EXISTS,
    UNSUPPORTED_SASL_MECHANISM,
    UNSUPPORTED_VERSION,
)
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import metadata_request, produce_request
from kafka_kip_reference import ClusterError, ReferenceCluster
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.cli import run_broker
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient

T0 = TopicPartition('t', 0)


@pytest.fixture
def cluster(reference_cluster: ReferenceCluster) -> ReferenceCluster:
    return reference_cluster


def produce(cluster, tp, *values, broker=None):
    address = cluster.brokers()[cluster.leader(tp) if broker is None else broker]
    with WireClient(address) as wire:
        response = wire.request(produce_request(tp.topic, tp.partition,
                                                build_batch([(None, v) for v in values]), acks=1))
    return response.responses[0].partition_responses[0]


def values_of(cluster, tp, broker_id=None):
    return [r.value for r in cluster.records(tp, broker_id)]


# -- lifecycle --------------------------------------------------------------------------------------


def test_starts_and_closes_every_thread_and_socket():
    threads_before = set(threading.enumerate())
    gc.collect()  # sockets earlier tests left to the garbage collector warn now, not inside the block
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        cluster = ReferenceCluster(brokers=3).start()
        addresses = cluster.brokers()
        with WireClient(addresses[0]) as wire:
            assert wire.request(metadata_request()).brokers[0].node_id == 0
        cluster.close()
        cluster.close()  # idempotent
        gc.collect()
    assert [a.node_id for a in addresses] == [0, 1, 2]
    assert len({a.port for a in addresses}) == 3
    assert cluster.bootstrap_servers == ','.join(f'127.0.0.1:{a.port}' for a in addresses)
    # threads of earlier tests may end meanwhile: what counts is that none of the cluster's is left
    assert set(threading.enumerate()) - threads_before == set()
    # any unclosed socket of the cluster names one of its ports; another unclosed resource always counts
    ports = [f', {a.port})' for a in addresses]
    assert [w for w in caught if issubclass(w.category, ResourceWarning)
            and ('socket' not in str(w.message) or any(port in str(w.message) for port in ports))] == []
    for address in addresses:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((address.host, address.port), timeout=1).close()


# -- topics -----------------------------------------------------------------------------------------


def test_create_topic_assigns_replicas_round_robin_with_epochs(cluster):
    topic_id = cluster.create_topic('t', partitions=4, replication_factor=2)
    assert isinstance(topic_id, uuid.UUID) and cluster.topic_id('t') == topic_id
    assert [cluster.replicas(TopicPartition('t', p)) for p in range(4)] == [[0, 1], [1, 2], [2, 0], [0, 1]]
    assert [cluster.leader(TopicPartition('t', p)) for p in range(4)] == [0, 1, 2, 0]
    assert [cluster.isr(TopicPartition('t', p)) for p in range(4)] == [[0, 1], [1, 2], [2, 0], [0, 1]]
    assert [cluster.leader_epoch(TopicPartition('t', p)) for p in range(4)] == [0, 0, 0, 0]
    assert [cluster.partition_epoch(TopicPartition('t', p)) for p in range(4)] == [1, 2, 3, 4]
    assert cluster.max_partition_epoch() == 4


def test_create_topic_refusals_carry_kafkas_error_codes(cluster):
    cluster.create_topic('t', 1, 1)
    with pytest.raises(ClusterError) as exists:
        cluster.create_topic('t', 1, 1)
    assert exists.value.error_code == TOPIC_ALREADY_EXISTS
    with pytest.raises(ClusterError) as factor:
        cluster.create_topic('u', 1, 4)
    assert factor.value.error_code == INVALID_REPLICATION_FACTOR
    with pytest.raises(ClusterError) as shrink:
        cluster.create_partitions('t', 1)
    assert shrink.value.error_code == INVALID_PARTITIONS


def test_delete_and_expand_move_the_partition_epoch_counter(cluster):
    cluster.create_topic('t', 2, 3)
    cluster.create_partitions('t', 3)
    assert cluster.partition_epoch(TopicPartition('t', 2)) == 3
    assert cluster.replicas(TopicPartition('t', 2)) == [2, 0, 1]
    old_id = cluster.topic_id('t')
    cluster.delete_topic('t')
    assert cluster.topic_id('t') is None
    assert cluster.max_partition_epoch() == 4
    new_id = cluster.create_topic('t', 1, 3)
    assert new_id != old_id
    assert cluster.partition_epoch(T0) == 5


# -- replication and fault injection --------------------------------------------------------------


def test_paused_follower_leaves_the_isr_falls_behind_and_catches_up(cluster):
    cluster.create_topic('t', 1, 3)
    assert produce(cluster, T0, b'a').base_offset == 0
    cluster.pause_replication(T0, 2)
    assert cluster.isr(T0) == [0, 1]
    produce(cluster, T0, b'b', b'c')
    assert (cluster.log_end_offset(T0, 2), cluster.log_end_offset(T0)) == (1, 3)
    assert cluster.high_watermark(T0) == 3
    assert values_of(cluster, T0, 2) == [b'a']
    cluster.resume_replication(T0, 2)
    assert cluster.isr(T0) == [0, 1, 2]
    assert values_of(cluster, T0, 2) == [b'a', b'b', b'c']
    assert cluster.high_watermark(T0, 2) == 3


def test_pause_of_the_leader_is_refused(cluster):
    cluster.create_topic('t', 1, 3)
    with pytest.raises(ClusterError):
        cluster.pause_replication(T0, 0)


def test_clean_election_requires_the_isr_and_bumps_the_epoch(cluster):
    cluster.create_topic('t', 1, 3)
    produce(cluster, T0, b'a')
    cluster.pause_replication(T0, 2)
    with pytest.raises(ClusterError) as refused:
        cluster.elect_leader(T0, 2)
    assert refused.value.error_code == ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert cluster.elect_leader(T0, 1) == 1
    assert (cluster.leader(T0), cluster.leader_epoch(T0), cluster.isr(T0)) == (1, 1, [0, 1])
    assert cluster.epochs(T0) == [(0, 0), (1, 1)]
    assert produce(cluster, T0, b'b').base_offset == 1
    assert cluster.records(T0, 0)[-1][:3] == (1, 1, None)


def test_stop_broker_closes_the_listener_and_moves_leadership(cluster):
    cluster.create_topic('t', 1, 3)
    produce(cluster, T0, b'a')
    port = cluster.brokers()[0].port
    with WireClient(cluster.brokers()[0]) as wire:
        cluster.stop_broker(0)
        with pytest.raises(ConnectionError):
            wire.request(metadata_request())
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(('127.0.0.1', port), timeout=1).close()
    assert (cluster.leader(T0), cluster.leader_epoch(T0), cluster.isr(T0)) == (1, 1, [1, 2])
    produce(cluster, T0, b'b')
    with WireClient(cluster.brokers()[1]) as wire:
        assert [b.node_id for b in wire.request(metadata_request()).brokers] == [1, 2]
    cluster.start_broker(0)
    assert cluster.brokers()[0].port == port
    assert cluster.isr(T0) == [0, 1, 2]
    assert values_of(cluster, T0, 0) == [b'a', b'b']


def test_partition_without_a_live_isr_member_goes_offline_until_it_returns(cluster):
    cluster.create_topic('t', 1, 1)
    produce(cluster, T0, b'a')
    cluster.stop_broker(0)
    assert (cluster.leader(T0), cluster.leader_epoch(T0)) == (-1, 1)
    with WireClient(cluster.brokers()[1]) as wire:
        partition = wire.request(metadata_request(['t'])).topics[0].partitions[0]
    assert (partition.error_code, partition.leader_id, partition.offline_replicas) == (LEADER_NOT_AVAILABLE, -1, [0])
    cluster.start_broker(0)
    assert (cluster.leader(T0), cluster.leader_epoch(T0)) == (0, 2)
    assert values_of(cluster, T0) == [b'a']


# -- protocol surface -----------------------------------------------------------------------------


def test_api_versions_advertises_the_extensions_and_answers_too_new_versions_as_kafka(cluster):
    api_versions = REQUESTS[ApiKey.ApiVersions]
    with WireClient(cluster.brokers()[0]) as wire:
        response = wire.request(api_versions(version=3, client_software_name='t', client_software_version='1'))
        assert response.error_code == NONE
        assert {(f.name, f.min_version, f.max_version) for f in response.supported_features} == {
            ('kip.232', 1, 1), ('kip.253', 1, 1), ('kip.391', 1, 1), ('kip.1243', 1, 1), ('group.version', 0, 1),
            ('transaction.version', 0, 2)}
        versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert versions[0] == (0, 13) and versions[1] == (4, 18) and versions[11][0] == 0  # Apache Kafka 4.4
        # A version newer than supported: Kafka answers v0 with UNSUPPORTED_VERSION and its versions.
        wire.send(ApiKey.ApiVersions, 99, b'\0\0')
        old = wire.read_response(18, 0)
    assert old.error_code == UNSUPPORTED_VERSION
    assert {k.api_key: (k.min_version, k.max_version) for k in old.api_keys} == versions


def test_metadata_serves_leader_epochs_topic_ids_and_partition_epochs(cluster):
    topic_id = cluster.create_topic('t', 2, 3)
    cluster.elect_leader(TopicPartition('t', 1), 2)
    with WireClient(cluster.brokers()[1]) as wire:
        response = wire.request(metadata_request(['t', 'missing']))
    assert (response.cluster_id, response.controller_id, response.max_partition_epoch) == (cluster.cluster_id, 0, 2)
    topic, missing = response.topics
    assert (topic.name, topic.topic_id, topic.error_code) == ('t', topic_id, NONE)
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.partition_epoch)
            for p in topic.partitions] == [(0, 0, 0, [0, 1, 2], [0, 1, 2], 1), (1, 2, 1, [1, 2, 0], [1, 2, 0], 2)]
    assert missing.error_code == 3


# -- SASL -------------------------------------------------------------------------------------------


@pytest.mark.reference_cluster(brokers=1, users={'alice': 'secret'})
def test_sasl_plain_is_required_when_the_cluster_has_users(reference_cluster):
    reference_cluster.create_topic('t', 1, 1)
    with WireClient(reference_cluster.brokers()[0]) as wire:
        with pytest.raises(ConnectionError):
            wire.request(metadata_request())  # unauthenticated: Kafka closes the connection
    producer = KafkaProducer(bootstrap_servers=reference_cluster.bootstrap_servers, security_protocol='SASL_PLAINTEXT',
                             sasl_mechanism='PLAIN', sasl_plain_username='alice',
                             sasl_plain_password='secret')
    producer.send('t', b'hello').get(timeout=10)
    producer.close()
    with WireClient(reference_cluster.brokers()[0]) as wire:
        refused = wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='GSSAPI'))
        assert (refused.error_code, refused.mechanisms) == (UNSUPPORTED_SASL_MECHANISM,
                                                            ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'])
        with pytest.raises(ConnectionError):  # then closed, as Kafka closes it
            wire.read_frame()
    with WireClient(reference_cluster.brokers()[0]) as wire:
        assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN')).error_code == NONE
        failed = wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=b'\0alice\0wrong'))
        assert (failed.error_code, failed.error_message) == (
            SASL_AUTHENTICATION_FAILED, 'Authentication failed: Invalid username or password')
        with pytest.raises(ConnectionError):
            wire.read_frame()
    with WireClient(reference_cluster.brokers()[0]) as wire:
        wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN'))
        assert wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=b'\0alice\0secret')).error_code == NONE
        assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN')).error_code == ILLEGAL_SASL_STATE
        assert wire.request(metadata_request(['t'])).topics[0].partitions[0].leader_id == 0
    assert [r.value for r in reference_cluster.records(T0)] == [b'hello']
    assert reference_cluster.internal_errors == []


# -- pytest plugin and CLI --------------------------------------------------------------------------


def test_pytest_plugin_fixtures_load_only_when_asked_for_and_take_their_arguments_from_the_marker(tmp_path):
    (tmp_path / 'test_uses_fixtures.py').write_text(
        'def test_fixtures(reference_cluster, reference_cluster_factory):\n'
        '    assert len(reference_cluster.brokers()) == 3\n'
        '    other = reference_cluster_factory(brokers=1, auto_create_topics=True)\n'
        '    assert len(other.brokers()) == 1\n'
        '    assert other.bootstrap_servers != reference_cluster.bootstrap_servers\n')

    # the marker gives the test and module clusters their ReferenceCluster arguments
    (tmp_path / 'test_marked.py').write_text(
        'import pytest\n'
        'pytestmark = pytest.mark.reference_cluster(2, features=())\n'
        'seen = []\n'
        'def test_module_marker(reference_cluster, module_reference_cluster):\n'
        '    assert (len(reference_cluster.brokers()), sorted(reference_cluster.features)) == (2, [])\n'
        '    assert module_reference_cluster is not reference_cluster\n'
        '    seen.append(module_reference_cluster)\n'
        '@pytest.mark.reference_cluster(brokers=1, broker_config={"num.partitions": 4})\n'
        'def test_own_marker(reference_cluster, module_reference_cluster):\n'
        '    assert (len(reference_cluster.brokers()), reference_cluster.broker_config.int("num.partitions")) == (1, 4)\n'
        '    assert len(module_reference_cluster.brokers()) == 2 and seen == [module_reference_cluster]\n'
        '@pytest.mark.reference_cluster(1, brokers=1)\n'
        'def test_bad_marker(reference_cluster):\n'
        '    pass\n')

    def pytest(*options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', *options, str(tmp_path)],
                              capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                              env={**os.environ, 'PYTHONPATH': str(Path(__file__).parents[2])})

    result = pytest('-p', 'kafka_kip_reference.fixtures.pytest_plugin', '--strict-markers')
    summary = result.stdout.strip().splitlines()[-1]
    assert ('3 passed' in summary, '1 error' in summary, 'failed' in summary) == (True, True, False), result.stdout
    assert ('TypeError: reference_cluster takes the broker count as its one positional argument or as brokers=, '
            "then ReferenceCluster keyword arguments; got (1,), {'brokers': 1}") in result.stdout
    result = pytest()  # installing the package registers no pytest plugin
    assert result.returncode == 1, result.stdout + result.stderr
    assert "fixture 'reference_cluster' not found" in result.stdout


def test_run_broker_prints_the_bootstrap_servers_until_stopped():
    out, stop = io.StringIO(), threading.Event()
    runner = threading.Thread(target=run_broker, kwargs={'brokers': 2, 'out': out, 'stop': stop})
    runner.start()
    servers = wait_until(out.getvalue, 'the brokers to print their addresses').strip().split(',')
    assert len(servers) == 2 and all(s.startswith('127.0.0.1:') for s in servers)
    host, port = servers[0].split(':')
    socket.create_connection((host, int(port)), timeout=1).close()
    stop.set()
    runner.join(5)
    assert not runner.is_alive()
