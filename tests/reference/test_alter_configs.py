"""AlterConfigs and IncrementalAlterConfigs with unmodified clients (kafka-python's ``alter_configs``,
confluent-kafka's ``incremental_alter_configs``), the same calls against the reference cluster and Apache Kafka 4.4
with the same results; and topic configs that take effect."""
from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from confluent_kafka.admin import (
    NewTopic as ConfluentTopic,
)
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource as StockResource
from kafka.admin import ConfigResourceType, NewTopic
from kafka.errors import InvalidRecordError, MessageSizeTooLargeError, NotEnoughReplicasError
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.protocol.constants import INVALID_CONFIG, INVALID_REQUEST, NONE
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import metadata_request
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient

SET, DELETE, APPEND, SUBTRACT = (AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND,
                                 AlterConfigOpType.SUBTRACT)
DYNAMIC_TOPIC, DEFAULT = 'DYNAMIC_TOPIC_CONFIG', 'DEFAULT_CONFIG'
WATCHED = ('cleanup.policy', 'max.message.bytes', 'retention.ms')


@pytest.fixture(params=['reference', 'apache-kafka'])
def bootstrap(request, reference_cluster_factory) -> str:
    if request.param == 'reference':
        return reference_cluster_factory(3).bootstrap_servers
    return request.getfixturevalue('apache_kafka').bootstrap_servers


def incremental(admin: AdminClient, topic: str, *ops: tuple[str, str | None, Any], validate_only: bool = False) -> str:
    """confluent-kafka's incremental_alter_configs: 'OK' or the error's name."""
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops])
    future = admin.incremental_alter_configs([resource], validate_only=validate_only)[resource]
    try:
        future.result(timeout=30)
    except KafkaException as exc:
        return exc.args[0].name()
    return 'OK'


def described(admin: AdminClient, topic: str) -> dict[str, tuple[str, str]]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: (entries[name].value, ConfigSource(entries[name].source).name) for name in WATCHED}


def settled(admin: AdminClient, topic: str, expected: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """What DescribeConfigs answers once it shows ``expected`` (Apache Kafka's brokers apply config records
    asynchronously), or the last answer after 30 s."""
    seen = {}

    def shows_expected() -> bool:
        seen.clear()
        seen.update(described(admin, topic))
        return seen == expected
    try:
        wait_until(shows_expected, f'{topic} configs {expected}')
    except AssertionError:
        pass
    return seen


def test_alter_configs_as_apache_kafka(bootstrap):
    topic = f'alter-{uuid.uuid4().hex[:8]}'
    stock = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin = AdminClient({'bootstrap.servers': bootstrap})
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=4_000_000, retries=0)
    try:
        stock.create_topics([NewTopic(topic, 1, 1)])
        initial = {'cleanup.policy': ('delete', DEFAULT), 'max.message.bytes': ('1048588', DEFAULT),
                   'retention.ms': ('604800000', DEFAULT)}
        assert settled(admin, topic, initial) == initial
        # the legacy API replaces the topic's dynamic configs whole (kafka-python sends the other keys it set too)
        assert stock.alter_configs([StockResource(ConfigResourceType.TOPIC, topic, configs={
            'retention.ms': '86400000', 'max.message.bytes': '2000'})], incremental=False) == {'topic': {topic: 'OK'}}
        expected = {**initial, 'max.message.bytes': ('2000', DYNAMIC_TOPIC), 'retention.ms': ('86400000', DYNAMIC_TOPIC)}
        assert settled(admin, topic, expected) == expected
        with pytest.raises(MessageSizeTooLargeError):  # takes effect
            producer.send(topic, b'x' * 3000).get(timeout=30)
        assert stock.alter_configs([StockResource(ConfigResourceType.TOPIC, topic, configs={
            'cleanup.policy': 'compact'})], incremental=False) == {'topic': {topic: 'OK'}}
        expected = {**expected, 'cleanup.policy': ('compact', DYNAMIC_TOPIC)}
        assert settled(admin, topic, expected) == expected
        assert legacy_alter(bootstrap, topic, {'cleanup.policy': 'compact'}) == (NONE, None)
        expected = {**initial, 'cleanup.policy': ('compact', DYNAMIC_TOPIC)}  # the keys not named go back
        assert settled(admin, topic, expected) == expected
        # incremental: APPEND / SUBTRACT on a LIST, SET, DELETE, validate_only, refusals
        assert incremental(admin, topic, ('cleanup.policy', 'delete', APPEND), ('max.message.bytes', '3000', SET)) == 'OK'
        expected = {**expected, 'cleanup.policy': ('compact,delete', DYNAMIC_TOPIC),
                    'max.message.bytes': ('3000', DYNAMIC_TOPIC)}
        assert settled(admin, topic, expected) == expected
        assert incremental(admin, topic, ('cleanup.policy', 'compact', SUBTRACT), ('retention.ms', '1000', SET),
                           validate_only=True) == 'OK'
        assert incremental(admin, topic, ('cleanup.policy', 'compact', SUBTRACT)) == 'OK'
        assert incremental(admin, topic, ('max.message.bytes', None, DELETE)) == 'OK'
        expected = {**initial, 'cleanup.policy': ('delete', DYNAMIC_TOPIC)}  # retention.ms untouched: validate_only
        assert settled(admin, topic, expected) == expected
        refusals = [incremental(admin, topic, ('max.message.bytes', '1', APPEND)),  # APPEND to a non-LIST key
                    incremental(admin, topic, ('not.a.topic.config', '1', SET)),
                    incremental(admin, topic, ('retention.ms', 'soon', SET)),
                    incremental(admin, f'missing-{topic}', ('retention.ms', '1000', SET))]
        assert refusals == ['INVALID_CONFIG', 'INVALID_CONFIG', 'INVALID_CONFIG', 'UNKNOWN_TOPIC_OR_PART']
        assert described(admin, topic) == expected
    finally:
        producer.close()
        stock.delete_topics([topic])
        stock.close()


def described_by_every_broker(bootstrap: str, topic: str, name: str) -> set[str | None]:
    """The value of ``topic``'s config ``name`` as each running broker answers DescribeConfigs (Apache Kafka's
    brokers apply config records asynchronously, each in turn; a stopped broker refuses the connection)."""
    request_class = REQUESTS[ApiKey.DescribeConfigs]
    resource = request_class.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=[name])
    values = set()
    for address in bootstrap.split(','):
        host, port = address.split(':')
        try:
            with WireClient((host, int(port))) as wire:
                answer = wire.request(request_class(version=4, resources=[resource], include_synonyms=False,
                                                    include_documentation=False))
        except ConnectionRefusedError:
            continue
        values.update(c.value for c in answer.results[0].configs)
    return values


def published_after(admin: AdminClient, broker: str, fence: str) -> None:
    """Wait until ``broker`` has published a metadata image later than the one it describes now.

    Apache Kafka's broker answers DescribeConfigs from its image as soon as the image is set, and applies a topic config
    to the partition's log later in the same publish (seen in CI: a keyless record refused as compacted right after every
    broker described cleanup.policy=delete). Images are published one at a time, so once a topic created now is listed,
    the publish before it has finished."""
    admin.create_topics([ConfluentTopic(fence, 1, 1)])[fence].result(timeout=30)
    host, port = broker.split(':')

    def listed() -> bool:
        with WireClient((host, int(port))) as wire:
            return wire.request(metadata_request([fence])).topics[0].error_code == NONE

    wait_until(listed, f'{broker} listing {fence}')


def produce_outcome(producer: KafkaProducer, topic: str, key: bytes | None) -> str:
    """'offset N' for a record written, or the name of the error the broker answered."""
    try:
        return f'offset {producer.send(topic, b"v", key=key).get(timeout=30).offset}'
    except (NotEnoughReplicasError, InvalidRecordError) as exc:
        return type(exc).__name__


@pytest.fixture(params=['reference', 'apache-kafka'])
def either_cluster(request, reference_cluster_factory) -> Any:
    """A 3-broker reference cluster or the session's Apache Kafka 4.4 (brokers stopped are started again after)."""
    if request.param == 'reference':
        return reference_cluster_factory(3)
    return request.getfixturevalue('apache_kafka')


def test_altered_min_insync_replicas_and_cleanup_policy_take_effect_as_apache_kafka(either_cluster):
    cluster, topic = either_cluster, f'effect-{uuid.uuid4().hex[:8]}'
    bootstrap, tp = cluster.bootstrap_servers, TopicPartition(topic, 0)
    admin = AdminClient({'bootstrap.servers': bootstrap})
    stock = KafkaAdminClient(bootstrap_servers=bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks='all', retries=0)
    stopped: list[int] = []
    fences: list[str] = []
    try:
        stock.create_topics([NewTopic(topic, 1, 2)])
        first = KafkaProducer(bootstrap_servers=bootstrap)  # retries while the new topic's leader is elected
        try:
            assert first.send(topic, b'v').get(timeout=60).offset == 0
        finally:
            first.close()
        wait_until(lambda: len(cluster.isr(tp)) == 2, f'{tp} with 2 replicas in sync')
        outcomes = []

        def alter(name: str, value: str | None) -> None:
            # with a broker stopped, an admin client that knew it may still send there (its metadata lists the
            # broker until the controller fences it): a new one that starts from the leader asks a live broker
            asking = AdminClient({'bootstrap.servers': bootstrap.split(',')[cluster.leader(tp)]}) if stopped else admin
            assert incremental(asking, topic, (name, value, SET if value else DELETE)) == 'OK'
            shown = value or {'min.insync.replicas': '1', 'cleanup.policy': 'delete'}[name]
            wait_until(lambda: described_by_every_broker(bootstrap, topic, name) == {shown},
                       f'every running broker describing {name}={shown}')
            fences.append(f'{topic}-fence-{len(fences)}')
            published_after(asking, bootstrap.split(',')[cluster.leader(tp)], fences[-1])
            outcomes.append((name, shown, produce_outcome(producer, topic, None),
                             produce_outcome(producer, topic, b'k')))

        alter('min.insync.replicas', '3')  # more than the 2 replicas: Kafka needs them all, not 3
        alter('cleanup.policy', 'compact')  # records without a key refused
        alter('cleanup.policy', None)
        alter('min.insync.replicas', '2')
        follower = next(b for b in cluster.replicas(tp) if b != cluster.leader(tp))
        cluster.stop_broker(follower)
        stopped.append(follower)
        wait_until(lambda: cluster.isr(tp) == [cluster.leader(tp)], f'{tp} with its leader alone in sync')
        outcomes.append(('stopped follower', '', produce_outcome(producer, topic, None), ''))
        alter('min.insync.replicas', None)
        assert outcomes == [('min.insync.replicas', '3', 'offset 1', 'offset 2'),
                            ('cleanup.policy', 'compact', 'InvalidRecordError', 'offset 3'),
                            ('cleanup.policy', 'delete', 'offset 4', 'offset 5'),
                            ('min.insync.replicas', '2', 'offset 6', 'offset 7'),
                            ('stopped follower', '', 'NotEnoughReplicasError', ''),
                            ('min.insync.replicas', '1', 'offset 8', 'offset 9')]
    finally:
        producer.close()
        stock.close()
        for broker in stopped:
            cluster.start_broker(broker)
        # a new admin client: the first one's metadata may still name the stopped broker as the controller
        cleanup = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            cleanup.delete_topics([topic, *fences])
        finally:
            cleanup.close()


def test_a_brokers_own_dynamic_config_applies_on_that_broker_only_as_apache_kafka(either_cluster):
    cluster, topic = either_cluster, f'per-broker-{uuid.uuid4().hex[:8]}'
    addresses = cluster.bootstrap_servers.split(',')  # by broker id on both clusters
    stock = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, retries=0)

    def on(broker: int) -> WireClient:
        host, port = addresses[broker].split(':')
        return WireClient((host, int(port)))

    def topic_max_message_bytes(broker: int) -> tuple[str, int]:
        request_class = REQUESTS[ApiKey.DescribeConfigs]
        with on(broker) as wire:
            answer = wire.request(request_class(version=4, include_synonyms=False, include_documentation=False,
                                                resources=[request_class.DescribeConfigsResource(
                                                    resource_type=2, resource_name=topic,
                                                    configuration_keys=['max.message.bytes'])]))
        entry = answer.results[0].configs[0]
        return entry.value, entry.config_source

    def outcome(partition: int) -> str:
        try:
            return f'offset {producer.send(topic, b"x" * 3000, partition=partition).get(timeout=30).offset}'
        except MessageSizeTooLargeError:
            return 'MessageSizeTooLargeError'

    altered = None
    try:
        stock.create_topics([NewTopic(topic, 3, 1)])
        first = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)  # retries while leaders are elected
        try:
            for partition in range(3):
                assert first.send(topic, b'v', partition=partition).get(timeout=60).offset == 0
        finally:
            first.close()
        leaders = [cluster.leader(TopicPartition(topic, p)) for p in range(3)]
        ours = 0
        other = next(p for p in range(3) if leaders[p] != leaders[ours])  # a partition another broker leads
        with on(leaders[ours]) as wire:
            altered = leaders[ours]
            assert alter_broker(wire, str(altered), ('message.max.bytes', 0, '2000')) == (NONE, None)
        wait_until(lambda: topic_max_message_bytes(altered) == ('2000', 2), 'the broker describing its value')
        seen = [topic_max_message_bytes(leaders[other]), outcome(ours), outcome(other)]
        # DYNAMIC_BROKER_CONFIG (2) on the broker that has it; DEFAULT_CONFIG (5) elsewhere, where records are taken
        assert seen == [('1048588', 5), 'MessageSizeTooLargeError', 'offset 1']
    finally:
        if altered is not None:
            with on(altered) as wire:
                assert alter_broker(wire, str(altered), ('message.max.bytes', 1, None)) == (NONE, None)
        producer.close()
        stock.delete_topics([topic])
        stock.close()


def legacy_alter(bootstrap: str, topic: str, configs: dict[str, str]) -> tuple[int, str | None]:
    """A raw AlterConfigs v2 of ``topic`` to the first bootstrap broker: (error code, message)."""
    host, port = bootstrap.split(',')[0].split(':')
    request_class = REQUESTS[ApiKey.AlterConfigs]
    resource = request_class.AlterConfigsResource
    with WireClient((host, int(port))) as wire:
        answer = wire.request(request_class(version=2, validate_only=False, resources=[resource(
            resource_type=2, resource_name=topic, configs=[resource.AlterableConfig(name=name, value=value)
                                                          for name, value in configs.items()])]))
    return answer.responses[0].error_code, answer.responses[0].error_message


def alter_broker(wire: WireClient, name: str, *ops: tuple[str, int, str | None], validate_only: bool = False):
    request_class = REQUESTS[ApiKey.IncrementalAlterConfigs]
    resource = request_class.AlterConfigsResource
    answer = wire.request(request_class(version=1, validate_only=validate_only, resources=[resource(
        resource_type=4, resource_name=name, configs=[resource.AlterableConfig(name=n, config_operation=op, value=v)
                                                      for n, op, v in ops])]))
    return answer.responses[0].error_code, answer.responses[0].error_message


def legacy_alter_broker(wire: WireClient, name: str, configs: dict[str, str]):
    request_class = REQUESTS[ApiKey.AlterConfigs]
    resource = request_class.AlterConfigsResource
    answer = wire.request(request_class(version=2, validate_only=False, resources=[resource(
        resource_type=4, resource_name=name, configs=[resource.AlterableConfig(name=n, value=v)
                                                      for n, v in configs.items()])]))
    return answer.responses[0].error_code, answer.responses[0].error_message


def described_broker(wire: WireClient, name: str, keys: list[str]) -> list[tuple[str, str | None, int]]:
    request_class = REQUESTS[ApiKey.DescribeConfigs]
    answer = wire.request(request_class(version=4, include_synonyms=False, include_documentation=False, resources=[
        request_class.DescribeConfigsResource(resource_type=4, resource_name=name, configuration_keys=keys)]))
    return [(c.name, c.value, c.config_source) for c in answer.results[0].configs]


def test_dynamic_broker_configs_as_apache_kafka(either_cluster):
    cluster, topic = either_cluster, f'broker-defaults-{uuid.uuid4().hex[:8]}'
    bootstrap = cluster.bootstrap_servers
    host, port = bootstrap.split(',')[0].split(':')  # broker 0 on both clusters
    admin = AdminClient({'bootstrap.servers': bootstrap})
    stock = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        stock.create_topics([NewTopic(topic, 1, 1)])
        wait_until(lambda: described_by_every_broker(bootstrap, topic, 'max.message.bytes') == {'1048588'},
                   f'{topic} on every broker')
        with WireClient((host, int(port))) as wire:
            assert alter_broker(wire, '', ('message.max.bytes', 0, '5000')) == (NONE, None)
            wait_until(lambda: described_by_every_broker(bootstrap, topic, 'max.message.bytes') == {'5000'},
                       'the cluster-wide default on every broker')
            assert described(admin, topic)['max.message.bytes'] == ('5000', 'DYNAMIC_DEFAULT_BROKER_CONFIG')
            assert alter_broker(wire, '0', ('log.retention.ms', 0, '1000'), validate_only=True) == (NONE, None)
            refusals = [
                alter_broker(wire, '0', ('num.partitions', 0, '3')),
                legacy_alter_broker(wire, '0', {'num.partitions': '2'}),
                alter_broker(wire, '7', ('message.max.bytes', 0, '1')),
                alter_broker(wire, 'x', ('message.max.bytes', 0, '1')),
                alter_broker(wire, '', ('message.max.bytes', 0, 'lots')),
                alter_broker(wire, '', ('message.max.bytes', 0, '-1')),
                alter_broker(wire, '', ('message.max.bytes', 2, '1')),
                alter_broker(wire, '', ('log.cleanup.policy', 0, 'shred')),
                alter_broker(wire, '', ('unclean.leader.election.enable', 0, 'maybe')),
            ]
            # a config Kafka does not know is kept (a plugin's), and described without its value
            assert alter_broker(wire, '', ('custom.plugin.setting', 0, 'x')) == (NONE, None)
            custom = wait_until(lambda: described_broker(wire, '', ['custom.plugin.setting']),
                                'the custom config described')
            assert alter_broker(wire, '', ('custom.plugin.setting', 1, None)) == (NONE, None)
        assert described(admin, topic)['retention.ms'] == ('604800000', DEFAULT)  # validate_only changed nothing
        assert refusals == [
            (INVALID_REQUEST, 'Cannot update these configs dynamically: [num.partitions]'),
            (INVALID_REQUEST, 'Cannot update these configs dynamically: [num.partitions]'),
            (INVALID_REQUEST, 'Unexpected broker id, expected 0, but received 7'),
            (INVALID_REQUEST, 'Node id must be an integer, but it is: x'),
            (INVALID_REQUEST, 'Invalid value lots for configuration message.max.bytes: Not a number of type INT'),
            (INVALID_REQUEST, 'Invalid value -1 for configuration message.max.bytes: Value must be at least 0'),
            (INVALID_CONFIG, 'Config value append is not allowed for config key: message.max.bytes'),
            (INVALID_REQUEST, 'Invalid value shred for configuration log.cleanup.policy: String must be one of: '
                              'compact, delete'),
            (INVALID_REQUEST, 'Invalid value maybe for configuration unclean.leader.election.enable: Expected value '
                              'to be either true or false'),
        ]
        assert custom == [('custom.plugin.setting', None, 3)]  # DYNAMIC_DEFAULT_BROKER_CONFIG
    finally:
        with WireClient((host, int(port))) as wire:
            assert alter_broker(wire, '', ('message.max.bytes', 1, None), ('custom.plugin.setting', 1, None)) == (
                NONE, None)
        stock.delete_topics([topic])
        stock.close()
