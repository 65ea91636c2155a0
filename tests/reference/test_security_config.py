"""Security set by ``server.properties`` keys, equivalent to the constructor flags: ``authorizer.class.name``,
``allow.everyone.if.no.acl.found``, ``super.users`` and ``sasl.enabled.mechanisms``."""
from __future__ import annotations

import pytest
from kafka.admin import ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourceType
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import NONE, TOPIC_AUTHORIZATION_FAILED, UNSUPPORTED_SASL_MECHANISM
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip.protocol.requests import produce_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.acl import AclBinding
from kafka_kip_reference.broker.batches import build_batch
from kafka_kip_reference.broker.config import STANDARD_AUTHORIZER
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.reference.broker_process import BrokerProcess

#: What kafka-python's own integration fixture puts in its broker's server.properties (besides listeners and dirs).
KAFKA_PYTHON_FIXTURE = {'group.min.session.timeout.ms': '1000', 'group.initial.rebalance.delay.ms': '0',
                        'authorizer.class.name': STANDARD_AUTHORIZER, 'allow.everyone.if.no.acl.found': 'true'}


def produced(wire: WireClient, topic: str) -> int:
    return wire.request(produce_request(topic, 0, build_batch([(None, b'v')]))).responses[0] \
        .partition_responses[0].error_code


def login(wire: WireClient, user: str, password: str) -> None:
    assert wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='PLAIN')).error_code == NONE
    assert wire.request(REQUESTS[ApiKey.SaslAuthenticate](
        version=2, auth_bytes=f'\0{user}\0{password}'.encode())).error_code == NONE


def test_kafka_pythons_fixture_config_starts_an_authorizer_that_allows_what_no_acl_names(reference_cluster_factory):
    cluster = reference_cluster_factory(1, broker_config=KAFKA_PYTHON_FIXTURE)
    cluster.create_topic('open', 1, 1)
    cluster.create_topic('guarded', 1, 1)
    cluster.add_acls(AclBinding(ResourceType.TOPIC, 'guarded', ACLResourcePatternType.LITERAL, 'User:alice', '*',
                                ACLOperation.WRITE, ACLPermissionType.ALLOW))
    with WireClient(cluster.brokers()[0]) as anonymous:
        assert (produced(anonymous, 'open'), produced(anonymous, 'guarded')) == (NONE, TOPIC_AUTHORIZATION_FAILED)
    assert cluster.state.config.int('group.min.session.timeout.ms') == 1000


def test_super_users_and_enabled_mechanisms_from_server_properties(reference_cluster_factory):
    cluster = reference_cluster_factory(1, users={'admin': 'a', 'ops': 'o', 'eve': 'e'}, broker_config={
        'authorizer.class.name': STANDARD_AUTHORIZER, 'super.users': 'User:admin;User:ops',
        'sasl.enabled.mechanisms': 'PLAIN,SCRAM-SHA-512'})
    cluster.create_topic('t', 1, 1)
    results = {}
    for user, password in (('admin', 'a'), ('ops', 'o'), ('eve', 'e')):
        with WireClient(cluster.brokers()[0]) as wire:
            login(wire, user, password)
            results[user] = produced(wire, 't')
    assert results == {'admin': NONE, 'ops': NONE, 'eve': TOPIC_AUTHORIZATION_FAILED}
    with WireClient(cluster.brokers()[0]) as wire:
        answer = wire.request(REQUESTS[ApiKey.SaslHandshake](version=1, mechanism='SCRAM-SHA-256'))
    assert (answer.error_code, answer.mechanisms) == (UNSUPPORTED_SASL_MECHANISM, ['PLAIN', 'SCRAM-SHA-512'])


def test_the_flags_and_the_keys_are_one_setting():
    with pytest.raises(ValueError, match='authorizer.class.name is given both in broker_config and as a constructor'):
        ReferenceCluster(1, authorizer=True, broker_config={'authorizer.class.name': STANDARD_AUTHORIZER})
    with pytest.raises(ValueError, match='super users need an authorizer'):
        ReferenceCluster(1, broker_config={'super.users': 'User:admin'})
    with pytest.raises(ValueError, match='Invalid value kafka.security.authorizer.AclAuthorizer for configuration '
                                         'authorizer.class.name: String must be one of: , '
                                         'org.apache.kafka.metadata.authorizer.StandardAuthorizer'):
        ReferenceCluster(1, broker_config={'authorizer.class.name': 'kafka.security.authorizer.AclAuthorizer'})
    flagged = ReferenceCluster(1, authorizer=True, super_users={'admin'})
    assert (flagged.state.config['authorizer.class.name'], flagged.state.config['super.users']) == (
        STANDARD_AUTHORIZER, 'User:admin')


def test_kafka_kip_broker_takes_the_security_keys_from_config():
    with BrokerProcess(authorizer_class_name=STANDARD_AUTHORIZER, allow_everyone_if_no_acl_found='true') as broker:
        with WireClient(broker.address) as wire:
            created = wire.request(REQUESTS[ApiKey.CreateTopics](version=7, timeout_ms=5000, validate_only=False,
                                                                 topics=[REQUESTS[ApiKey.CreateTopics].CreatableTopic(
                                                                     name='t', num_partitions=1, replication_factor=1,
                                                                     assignments=[], configs=[])]))
            describe = REQUESTS[ApiKey.DescribeAcls]
            acls = wire.request(describe(version=3, resource_type_filter=ResourceType.ANY, resource_name_filter=None,
                                         pattern_type_filter=ACLResourcePatternType.ANY, principal_filter=None,
                                         host_filter=None, operation=ACLOperation.ANY,
                                         permission_type=ACLPermissionType.ANY))
    assert (created.topics[0].error_code, acls.error_code, acls.resources) == (NONE, NONE, [])
