"""A restarted reference broker keeps what Kafka keeps across a restart: records and log start offsets, committed
offsets, transaction state (a transactional id's producer id and epoch), SCRAM credentials (one added at run time),
client quotas, ACLs, dynamic topic configs (set at creation, by AlterConfigs and by IncrementalAlterConfigs, one
deleted) and broker configs. Restarted three ways: the cluster's only broker stops (every partition and coordinator goes
offline) and starts again (``stop_broker`` / ``start_broker``); the whole cluster closes and a new one starts from
its data directory (``ReferenceCluster(data_dir=...)``); ``kafka-kip broker --data-dir`` stops and starts again as
a new process."""
from __future__ import annotations

import subprocess
import sys

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    ScramMechanism,
)
from kafka.admin import UserScramCredentialUpsertion as ScramUpsertion
from kafka.protocol.api_key import ApiKey
from kafka.structs import OffsetAndMetadata, TopicPartition

from kafka_kip.protocol.constants import MESSAGE_TOO_LARGE, NONE
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import produce_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.data_dir import DataDirError
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.broker_process import BrokerProcess

SASL = {'security_protocol': 'SASL_PLAINTEXT', 'sasl_mechanism': 'SCRAM-SHA-256',
        'sasl_plain_username': 'admin', 'sasl_plain_password': 'admin-pw'}
TP = TopicPartition('kept', 0)
ALTERED = 'altered'


def as_admin(cluster: ReferenceCluster) -> WireClient:
    """A connection to the cluster's broker authenticated as admin (SASL PLAIN)."""
    wire = WireClient(cluster.brokers()[0])
    assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN')).error_code == NONE
    assert wire.request(REQUESTS[ApiKey.SaslAuthenticate](version=2, auth_bytes=b'\0admin\0admin-pw')).error_code == NONE
    return wire


def dynamic_topic_configs(admin: KafkaAdminClient, topic: str) -> dict[str, str]:
    """The configs set on ``topic`` (DescribeConfigs' source DYNAMIC_TOPIC_CONFIG): ``{name: value}``."""
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])['topic'][topic]
    assert {entry['config_source'] for entry in described.values()} == {'DYNAMIC_TOPIC_CONFIG'}
    return {name: entry['value'] for name, entry in described.items()}


def oversized_produce_error(wire: WireClient) -> int:
    """The error of a Produce to :data:`ALTERED` of a 600,000-byte batch (over its max.message.bytes)."""
    answer = wire.request(produce_request(ALTERED, 0, build_batch([(None, b'x' * 600_000)])))
    return answer.responses[0].partition_responses[0].error_code


def transactional_producer(bootstrap: str) -> KafkaProducer:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id='tx', **SASL)
    producer.init_transactions()
    return producer


def producer_id_and_epoch(producer: KafkaProducer) -> tuple[int, int]:
    state = producer._transaction_manager.producer_id_and_epoch
    return state.producer_id, state.epoch


@pytest.mark.parametrize('restart', ['broker', 'data_dir'])
def test_a_restarted_broker_keeps_what_kafka_keeps(reference_cluster_factory, tmp_path, restart):
    security = {'users': {'admin': 'admin-pw', 'app': 'app-pw'}, 'authorizer': True, 'super_users': {'admin'}}
    data_dir = {'data_dir': tmp_path} if restart == 'data_dir' else {}
    cluster = reference_cluster_factory(1, **security, **data_dir)
    bootstrap = cluster.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **SASL)
    admin.create_topics([NewTopic(TP.topic, 1, 1, topic_configs={'retention.ms': '86400000'})])
    acl = ACL('User:app', '*', ACLOperation.READ, ACLPermissionType.ALLOW,
              ResourcePattern(ResourceType.TOPIC, TP.topic, ACLResourcePatternType.LITERAL))
    admin.create_acls([acl])
    # topic configs changed at run time: AlterConfigs (the whole set; kafka-python sends the other dynamic ones
    # along), then IncrementalAlterConfigs SET and DELETE
    admin.create_topics([NewTopic(ALTERED, 1, 1, topic_configs={'retention.ms': '86400000', 'segment.ms': '3600000'})])
    assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, ALTERED, configs={
        'segment.bytes': '1048576'})], incremental=False) == {'topic': {ALTERED: 'OK'}}
    assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, ALTERED, configs={
        'max.message.bytes': '500000', 'segment.ms': (AlterConfigOp.DELETE, None)})], incremental=True) == {
        'topic': {ALTERED: 'OK'}}
    altered = dynamic_topic_configs(admin, ALTERED)
    with as_admin(cluster) as wire:
        too_large = oversized_produce_error(wire)
    broker_default = ConfigResource(ConfigResourceType.BROKER, '0', configs={'message.max.bytes': '2000000'})
    assert admin.alter_configs([broker_default], incremental=True) == {'broker': {'0': 'OK'}}
    admin.alter_user_scram_credentials([ScramUpsertion('carol', ScramMechanism.SCRAM_SHA_512, 'carol-pw', 8192)])
    with as_admin(cluster) as wire:  # AlterClientQuotas on the wire, as an admin client sends it
        request_class = REQUESTS[ApiKey.AlterClientQuotas]
        entry = request_class.EntryData
        assert wire.request(request_class(version=1, validate_only=False, entries=[entry(
            entity=[entry.EntityData(entity_type='user', entity_name='app')],
            ops=[entry.OpData(key='producer_byte_rate', value=1024.0, remove=False)])])).entries[0].error_code == NONE
    producer = transactional_producer(bootstrap)
    producer.begin_transaction()
    for i in range(3):
        producer.send(TP.topic, b'%d' % i)
    producer.commit_transaction()
    before = producer_id_and_epoch(producer)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id='g', enable_auto_commit=False, **SASL)
    consumer.commit({TP: OffsetAndMetadata(2, 'kept?', -1)})
    consumer.close()
    admin.close()
    with_records = cluster.records(TP)

    if restart == 'broker':
        cluster.stop_broker(0)
        cluster.start_broker(0)
    else:
        cluster.close()
        cluster = reference_cluster_factory(1, **security, **data_dir, ports=[cluster.brokers()[0].port])

    assert cluster.bootstrap_servers == bootstrap  # the same port
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **SASL)  # SCRAM users: the login still works
    try:
        assert cluster.records(TP) == with_records
        assert (cluster.log_start_offset(TP), cluster.log_end_offset(TP)) == (0, 4)  # 3 records, a commit marker
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TP.topic)])
        assert described['topic'][TP.topic]['retention.ms']['value'] == '86400000'
        assert dynamic_topic_configs(admin, ALTERED) == altered == {
            'retention.ms': '86400000', 'segment.bytes': '1048576', 'max.message.bytes': '500000'}  # segment.ms gone
        with as_admin(cluster) as wire:  # in effect: a batch over max.message.bytes is refused
            assert oversized_produce_error(wire) == too_large == MESSAGE_TOO_LARGE
        broker = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, '0')])
        assert broker['broker']['0']['message.max.bytes']['value'] == '2000000'
        acls, _ = admin.describe_acls(ACLFilter('User:app', None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                ResourcePatternFilter(ResourceType.ANY, None,
                                                                      ACLResourcePatternType.ANY)))
        assert acls == [acl]
        assert admin.describe_user_scram_credentials(['carol']) == {'carol': {  # added at run time
            'error': None, 'credential_infos': [{'mechanism': ScramMechanism.SCRAM_SHA_512, 'iterations': 8192}]}}
        carol = KafkaAdminClient(bootstrap_servers=bootstrap, **{**SASL, 'sasl_mechanism': 'SCRAM-SHA-512',
                                                                 'sasl_plain_username': 'carol',
                                                                 'sasl_plain_password': 'carol-pw'})
        carol.close()
        with as_admin(cluster) as wire:
            request_class = REQUESTS[ApiKey.DescribeClientQuotas]
            quotas = wire.request(request_class(version=1, strict=False, components=[])).entries
        assert [([(e.entity_type, e.entity_name) for e in q.entity], [(v.key, v.value) for v in q.values])
                for q in quotas] == [([('user', 'app')], [('producer_byte_rate', 1024.0)])]
        assert admin.list_group_offsets('g') == {'g': {TP: OffsetAndMetadata(2, 'kept?', -1)}}
        # the transactional id's state: the next producer gets the same producer id, one epoch on
        producer = wait_until(lambda: transactional_producer(bootstrap), 'a transactional producer initialized')
        assert producer_id_and_epoch(producer) == (before[0], before[1] + 1)
        producer.close()
    finally:
        admin.close()


def test_kafka_kip_broker_keeps_its_data_directory_across_a_restart(tmp_path):
    first = BrokerProcess('--data-dir', str(tmp_path))
    try:
        admin = KafkaAdminClient(bootstrap_servers=first.bootstrap_servers)
        admin.create_topics([NewTopic(TP.topic, 2, 1, topic_configs={'retention.ms': '86400000'})])
        assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TP.topic, configs={
            'retention.ms': '3600000', 'max.message.bytes': '500000'})], incremental=True) == {
            'topic': {TP.topic: 'OK'}}
        admin.close()
        producer = KafkaProducer(bootstrap_servers=first.bootstrap_servers)
        for i in range(5):
            producer.send(TP.topic, b'%d' % i, partition=i % 2)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=first.bootstrap_servers, group_id='g', enable_auto_commit=False)
        consumer.commit({TP: OffsetAndMetadata(2, '', -1)})
        consumer.close()
    finally:
        first.close()  # SIGTERM: the data directory is written
    second = BrokerProcess('--data-dir', str(tmp_path), '--port', str(first.address[1]))
    try:
        assert second.bootstrap_servers == first.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=second.bootstrap_servers)
        assert dynamic_topic_configs(admin, TP.topic) == {'retention.ms': '3600000', 'max.message.bytes': '500000'}
        admin.close()
        consumer = KafkaConsumer(bootstrap_servers=second.bootstrap_servers, group_id='g', enable_auto_commit=False,
                                 auto_offset_reset='earliest')
        other = TopicPartition(TP.topic, 1)
        assert consumer.committed(TP) == 2
        assert (consumer.beginning_offsets([TP]), consumer.end_offsets([TP])) == ({TP: 0}, {TP: 3})
        consumer.assign([TP, other])
        consumer.seek(other, 0)
        records = []
        wait_until(lambda: records.extend(r for batch in consumer.poll(timeout_ms=300).values() for r in batch)
                   or len(records) >= 3, 'the records after the committed offset and the other partition')
        assert sorted((r.partition, r.offset, r.value) for r in records) == [
            (0, 2, b'4'), (1, 0, b'1'), (1, 1, b'3')]
        consumer.close()
    finally:
        second.close()


def test_a_data_directory_of_another_cluster_is_refused(tmp_path):
    ReferenceCluster(1, data_dir=tmp_path, cluster_id='one').start().close()
    result = subprocess.run([sys.executable, '-m', 'kafka_kip', 'broker', '--brokers', '2', '--data-dir', str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr.strip()) == (
        2, f'kafka-kip broker: {tmp_path} holds a cluster of 1 brokers, not 2')
    with pytest.raises(DataDirError, match=f"{tmp_path} belongs to cluster 'one', not 'two'"):
        ReferenceCluster(1, data_dir=tmp_path, cluster_id='two')


@pytest.mark.parametrize('restart', ['broker', 'data_dir'])
def test_an_open_transaction_survives_a_restart_and_is_aborted_by_the_next_producer(reference_cluster_factory,
                                                                                    tmp_path, restart):
    data_dir = {'data_dir': tmp_path} if restart == 'data_dir' else {}
    cluster = reference_cluster_factory(1, **data_dir)
    cluster.create_topic(TP.topic)
    bootstrap = cluster.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id='open')
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(TP.topic, b'a')
    producer.send(TP.topic, b'b')
    producer.send_offsets_to_transaction({TP: OffsetAndMetadata(2, '', -1)}, 'g')
    producer.flush()
    before = producer_id_and_epoch(producer)
    producer.close(timeout=0)
    assert (cluster.log_end_offset(TP), cluster.last_stable_offset(TP)) == (2, 0)
    if restart == 'broker':
        cluster.stop_broker(0)
        cluster.start_broker(0)
    else:
        cluster.close()
        cluster = reference_cluster_factory(1, **data_dir, ports=[cluster.brokers()[0].port])
    assert (cluster.log_end_offset(TP), cluster.last_stable_offset(TP)) == (2, 0)  # still open
    producer = wait_until(lambda: KafkaProducer(bootstrap_servers=bootstrap, transactional_id='open'), 'a producer')
    # aborts the open transaction (an abort marker, the held offsets dropped) at a bumped epoch, as Kafka's
    # coordinator does, then answers the retried InitProducerId with the next one
    producer.init_transactions()
    assert producer_id_and_epoch(producer) == (before[0], before[1] + 2)
    producer.close()
    assert (cluster.log_end_offset(TP), cluster.last_stable_offset(TP)) == (3, 3)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id='g', isolation_level='read_committed',
                             enable_auto_commit=False)
    try:
        assert consumer.committed(TP) is None
    finally:
        consumer.close()
