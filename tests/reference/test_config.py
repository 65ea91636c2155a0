"""ReferenceCluster broker configs: Apache Kafka's names and defaults, broker_config=, kafka-kip broker --config."""
from __future__ import annotations

import io
import subprocess
import sys
import threading

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.protocol.api_key import ApiKey

from kafka_kip.cli import build_parser
from kafka_kip.protocol.constants import (
    INVALID_CONFIG,
    INVALID_TOPIC_EXCEPTION,
    MESSAGE_TOO_LARGE,
    NONE,
    NOT_ENOUGH_REPLICAS,
    TOPIC_DELETION_DISABLED,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import metadata_request, produce_request
from kafka_kip.settings.properties import parse_properties
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.cli import run_broker
from kafka_kip_reference.broker.config import BROKER_CONFIGS
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.conftest import one_broker_address

DEFAULT, STATIC, DYNAMIC_TOPIC = 'DEFAULT_CONFIG', 'STATIC_BROKER_CONFIG', 'DYNAMIC_TOPIC_CONFIG'
INVALID_SESSION_TIMEOUT = 26


def describe(cluster: ReferenceCluster, resource_type: ConfigResourceType, name: str) -> dict[str, tuple]:
    """``{config: (value, source name, read_only)}`` as kafka-python's admin client describes it."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        described = admin.describe_configs([ConfigResource(resource_type, name)], config_filter='all')
    finally:
        admin.close()
    return {key: (c['value'], c['config_source'], c['read_only'])
            for key, c in described[resource_type.name.lower()][name].items()}


def metadata_of(cluster: ReferenceCluster, topic: str, allow_create: bool = True):
    request = metadata_request([topic])
    request.allow_auto_topic_creation = allow_create
    with WireClient(cluster.brokers()[0]) as wire:
        return wire.request(request).topics[0]


def test_broker_configs_have_apache_kafkas_defaults(reference_cluster):
    configs = describe(reference_cluster, ConfigResourceType.BROKER, '0')
    assert {name: configs[name] for name in (
        'auto.create.topics.enable', 'num.partitions', 'default.replication.factor', 'min.insync.replicas',
        'message.max.bytes', 'log.retention.hours', 'log.retention.bytes', 'log.segment.bytes',
        'delete.topic.enable', 'group.min.session.timeout.ms', 'group.max.session.timeout.ms')} == {
        'auto.create.topics.enable': ('true', DEFAULT, True),
        'num.partitions': ('1', DEFAULT, True),
        'default.replication.factor': ('1', DEFAULT, True),
        'min.insync.replicas': ('1', DEFAULT, False),  # Kafka can change these at runtime: not read-only
        'message.max.bytes': ('1048588', DEFAULT, False),
        'log.retention.hours': ('168', DEFAULT, True),
        'log.retention.bytes': ('-1', DEFAULT, False),
        'log.segment.bytes': ('1073741824', DEFAULT, False),
        'delete.topic.enable': ('true', DEFAULT, True),
        'group.min.session.timeout.ms': ('6000', DEFAULT, True),
        'group.max.session.timeout.ms': ('1800000', DEFAULT, True),
    }
    assert configs['broker.id'] == ('0', STATIC, True)
    assert set(configs) == set(BROKER_CONFIGS) | {'broker.id', 'node.id', 'listeners', 'advertised.listeners',
                                                  'log.dirs', 'process.roles'}


def test_topic_configs_default_to_their_broker_configs(reference_cluster_factory):
    cluster = reference_cluster_factory(1, broker_config={'log.retention.minutes': 5, 'message.max.bytes': '2000'})
    cluster.create_topic('t', 1, 1, configs={'retention.bytes': '1000'})
    configs = describe(cluster, ConfigResourceType.TOPIC, 't')
    assert {name: configs[name] for name in ('retention.ms', 'max.message.bytes', 'retention.bytes',
                                             'segment.bytes', 'cleanup.policy')} == {
        'retention.ms': ('300000', STATIC, False),
        'max.message.bytes': ('2000', STATIC, False),
        'retention.bytes': ('1000', DYNAMIC_TOPIC, False),
        'segment.bytes': ('1073741824', DEFAULT, False),
        'cleanup.policy': ('delete', DEFAULT, False),
    }
    assert describe(cluster, ConfigResourceType.BROKER, '0')['log.retention.minutes'] == ('5', STATIC, True)


def test_retention_ms_takes_precedence_over_minutes_and_hours(reference_cluster_factory):
    cluster = reference_cluster_factory(1, broker_config={'log.retention.ms': '1234', 'log.retention.minutes': '5',
                                                          'log.retention.hours': '1'})
    assert cluster.broker_config.retention_ms == 1234
    assert reference_cluster_factory(1, broker_config={'log.retention.hours': '-1'}).broker_config.retention_ms == -1
    assert reference_cluster_factory(1).broker_config.retention_ms == 168 * 3_600_000


def test_unknown_topics_are_auto_created_with_one_partition_and_one_replica_by_default(reference_cluster):
    producer = KafkaProducer(bootstrap_servers=reference_cluster.bootstrap_servers)
    try:
        metadata = producer.send('auto', b'v').get(timeout=20)
    finally:
        producer.close()
    tp = TopicPartition('auto', 0)
    assert (metadata.partition, metadata.offset) == (0, 0)
    assert len(reference_cluster.replicas(tp)) == 1
    with pytest.raises(ValueError, match='unknown partition'):
        reference_cluster.leader(TopicPartition('auto', 1))


def test_metadata_creates_only_when_both_broker_and_request_allow_it(reference_cluster_factory):
    cluster = reference_cluster_factory(3, broker_config={'num.partitions': 4, 'default.replication.factor': 3})
    assert metadata_of(cluster, 'kept-out', allow_create=False).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.topic_id('kept-out') is None
    assert metadata_of(cluster, 'wanted').error_code == UNKNOWN_TOPIC_OR_PARTITION  # Kafka 4.4's: being created
    assert len(metadata_of(cluster, 'wanted').partitions) == 4
    assert cluster.replicas(TopicPartition('wanted', 3)) == [0, 1, 2]

    off = reference_cluster_factory(1, broker_config={'auto.create.topics.enable': 'false'})
    assert metadata_of(off, 'never').error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert off.topic_id('never') is None


#: the Apache Kafka fixture's settings of the internal topics
INTERNAL_TOPICS = {'offsets.topic.num.partitions': 5, 'transaction.state.log.num.partitions': 5,
                   'transaction.state.log.min.isr': 1}


@pytest.fixture(params=['reference', 'apache-kafka'])
def one_broker(request) -> tuple[str, int]:
    """A fresh one-broker cluster's address: the reference cluster, or an Apache Kafka 4.4 of its own (its
    internal topics are created here)."""
    return one_broker_address(request, INTERNAL_TOPICS, 'auto-creation')


def test_metadata_auto_creation_answered_as_apache_kafka(one_broker):
    names = ['auto-a', 'bad name', '__consumer_offsets', '__transaction_state', 'x' * 250, '.', 'auto-a']

    def metadata(allow_create: bool) -> dict[str, tuple[int, bool, int]]:
        request = metadata_request(names)
        request.allow_auto_topic_creation = allow_create
        with WireClient(one_broker) as wire:
            topics = wire.request(request).topics
        assert len(topics) == len(set(names))  # each topic once, as Kafka answers
        return {t.name: (t.error_code, t.is_internal, len(t.partitions)) for t in topics}

    invalid = {'bad name': (INVALID_TOPIC_EXCEPTION, False, 0), 'x' * 250: (INVALID_TOPIC_EXCEPTION, False, 0),
               '.': (INVALID_TOPIC_EXCEPTION, False, 0)}
    assert metadata(True) == {'auto-a': (UNKNOWN_TOPIC_OR_PARTITION, False, 0),  # being created
                              '__consumer_offsets': (UNKNOWN_TOPIC_OR_PARTITION, True, 0),
                              '__transaction_state': (UNKNOWN_TOPIC_OR_PARTITION, True, 0), **invalid}
    created = {'auto-a': (NONE, False, 1), '__consumer_offsets': (NONE, True, 5),  # with their partition counts
               '__transaction_state': (NONE, True, 5), **invalid}
    wait_until(lambda: metadata(False) == created, 'the auto-created topics listed with their partitions')


def test_create_topics_without_counts_uses_num_partitions_and_default_replication_factor(reference_cluster_factory):
    cluster = reference_cluster_factory(3, broker_config={'num.partitions': '2', 'default.replication.factor': '2'})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic('counted', -1, -1)])
    finally:
        admin.close()
    assert [len(cluster.replicas(TopicPartition('counted', p))) for p in range(2)] == [2, 2]


def test_message_max_bytes_and_min_insync_replicas_apply_to_every_topic(reference_cluster_factory):
    cluster = reference_cluster_factory(2, broker_config={'message.max.bytes': 200, 'min.insync.replicas': 2})
    cluster.create_topic('t', 1, 2)
    cluster.create_topic('roomy', 1, 2, configs={'max.message.bytes': '100000'})
    big = build_batch([(None, b'x' * 300)])
    tp = TopicPartition('t', 0)

    def produce(topic: str, records: bytes) -> int:
        with WireClient(cluster.brokers()[cluster.leader(TopicPartition(topic, 0))]) as wire:
            return wire.request(produce_request(topic, 0, records)).responses[0].partition_responses[0].error_code

    assert produce('t', big) == MESSAGE_TOO_LARGE
    assert produce('roomy', big) == NONE
    cluster.pause_replication(tp, cluster.replicas(tp)[1])
    assert produce('t', build_batch([(None, b'small')])) == NOT_ENOUGH_REPLICAS


def test_topic_deletion_can_be_disabled(reference_cluster_factory):
    cluster = reference_cluster_factory(1, broker_config={'delete.topic.enable': False})
    cluster.create_topic('kept', 1, 1)
    with WireClient(cluster.brokers()[0]) as wire:
        answer = wire.request(REQUESTS[ApiKey.DeleteTopics](version=4, topic_names=['kept'], timeout_ms=1000)).responses[0]
    assert answer.error_code == TOPIC_DELETION_DISABLED
    assert cluster.topic_id('kept') is not None


def test_sessions_below_group_min_session_timeout_are_refused(reference_cluster_factory):
    def join(cluster: ReferenceCluster, session_ms: int) -> int:
        request = REQUESTS[ApiKey.JoinGroup](version=5, group_id='g', session_timeout_ms=session_ms, rebalance_timeout_ms=10000,
                               member_id='', group_instance_id='static', protocol_type='consumer',
                               protocols=[REQUESTS[ApiKey.JoinGroup].JoinGroupRequestProtocol(name='range', metadata=b'')])
        coordinator = cluster.brokers()[0]
        with WireClient(coordinator) as wire:
            return wire.request(request).error_code

    assert join(reference_cluster_factory(1), 5999) == INVALID_SESSION_TIMEOUT
    assert join(reference_cluster_factory(1, broker_config={'group.min.session.timeout.ms': 1000}), 5999) == NONE


def test_topic_config_values_are_checked_as_kafka_does(reference_cluster):
    admin = KafkaAdminClient(bootstrap_servers=reference_cluster.bootstrap_servers)
    try:
        response = admin.create_topics([NewTopic('bad', 1, 1, topic_configs={'message.timestamp.type': 'Now'})],
                                       raise_errors=False)
    finally:
        admin.close()
    [topic] = response['topics']
    assert (topic['error_code'], topic['error_message']) == (
        INVALID_CONFIG,
        'Invalid value Now for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime')


def test_bad_broker_configs_are_refused_naming_the_value_and_what_is_accepted():
    with pytest.raises(ValueError, match=r"unknown broker config 'log\.flush\.interval\.ms'; the reference cluster "
                                         r"accepts: allow\.everyone\.if\.no\.acl\.found, authorizer\.class\.name, auto\.create\.topics\.enable, "):
        ReferenceCluster(1, broker_config={'log.flush.interval.ms': '1'})
    with pytest.raises(ValueError, match='^Invalid value yes for configuration auto.create.topics.enable: Expected value to be either true or false$'):
        ReferenceCluster(1, broker_config={'auto.create.topics.enable': 'yes'})
    with pytest.raises(ValueError, match='^Invalid value 0 for configuration num.partitions: Value must be at least 1$'):
        ReferenceCluster(1, broker_config={'num.partitions': '0'})
    with pytest.raises(ValueError, match='^Invalid value many for configuration message.max.bytes: Not a number of type INT$'):
        ReferenceCluster(1, broker_config={'message.max.bytes': 'many'})
    with pytest.raises(ValueError, match='num.partitions is given both in broker_config and as a constructor'):
        ReferenceCluster(1, broker_config={'num.partitions': '2'}, default_partitions=3)
    with pytest.raises(ValueError, match='group.min.session.timeout.ms 9000 exceeds group.max.session.timeout.ms 8000'):
        ReferenceCluster(1, broker_config={'group.min.session.timeout.ms': 9000,
                                           'group.max.session.timeout.ms': 8000})


def test_the_constructor_flags_set_their_broker_configs():
    cluster = ReferenceCluster(3, auto_create_topics=False, default_partitions=3, default_replication_factor=2)
    assert [cluster.broker_config[name] for name in ('auto.create.topics.enable', 'num.partitions',
                                                     'default.replication.factor')] == ['false', '3', '2']
    assert cluster.broker_config.is_set('num.partitions') and not cluster.broker_config.is_set('message.max.bytes')


def test_server_properties_are_parsed_like_kafkas():
    text = '# a comment\n! another\n\nnum.partitions=3\nauto.create.topics.enable : false\nlog.dirs=/tmp/a=b\n'
    assert parse_properties(io.StringIO(text)) == {'num.partitions': '3', 'auto.create.topics.enable': 'false',
                                                   'log.dirs': '/tmp/a=b'}
    with pytest.raises(ValueError, match="line 2: expected key=value, got 'just-a-key'"):
        parse_properties(['a=1', 'just-a-key'])


def test_kafka_kip_broker_takes_configs_and_a_properties_file(tmp_path):
    properties = tmp_path / 'server.properties'
    properties.write_text('num.partitions=2\nauto.create.topics.enable=false\n')
    args = build_parser().parse_args(['broker', '--brokers', '1', '--config-file', str(properties),
                                      '--config', 'num.partitions=5', '--features', ''])
    assert (args.config_file, args.config, args.features) == (
        {'num.partitions': '2', 'auto.create.topics.enable': 'false'}, [('num.partitions', '5')], ())

    out, stop = io.StringIO(), threading.Event()
    runner = threading.Thread(target=run_broker, kwargs={
        'brokers': 1, 'out': out, 'stop': stop, 'features': (),
        'broker_config': {**args.config_file, **dict(args.config)}})
    runner.start()
    try:
        host, port = wait_until(out.getvalue, 'the broker to print its address').strip().split(':')
        with WireClient((host, int(port))) as wire:
            request = metadata_request(['x'])
            request.allow_auto_topic_creation = True
            assert wire.request(request).topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    finally:
        stop.set()
        runner.join(10)
    assert not runner.is_alive()


def test_kafka_kip_broker_reports_a_bad_config_and_exits_2():
    result = subprocess.run([sys.executable, '-m', 'kafka_kip', 'broker', '--config', 'num.partitions=zero'],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == \
        'kafka-kip broker: Invalid value zero for configuration num.partitions: Not a number of type INT'
    result = subprocess.run([sys.executable, '-m', 'kafka_kip', 'broker', '--config', 'novalue'],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "argument --config: expected key=value, got 'novalue'" in result.stderr
