"""A restarted reference broker keeps what Kafka keeps across a restart: records and log start offsets, committed
offsets, transaction state (a transactional id's producer id and epoch), SCRAM users, ACLs, dynamic topic and
broker configs. The cluster's only broker stops (every partition and coordinator goes offline) and starts again
on its port (``ReferenceCluster.stop_broker`` / ``start_broker``)."""
from __future__ import annotations

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.structs import OffsetAndMetadata, TopicPartition

from kafka_kip_reference.fixtures.conditions import wait_until

SASL = {'security_protocol': 'SASL_PLAINTEXT', 'sasl_mechanism': 'SCRAM-SHA-256',
        'sasl_plain_username': 'admin', 'sasl_plain_password': 'admin-pw'}
TP = TopicPartition('kept', 0)


def transactional_producer(bootstrap: str) -> KafkaProducer:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id='tx', **SASL)
    producer.init_transactions()
    return producer


def producer_id_and_epoch(producer: KafkaProducer) -> tuple[int, int]:
    state = producer._transaction_manager.producer_id_and_epoch
    return state.producer_id, state.epoch


def test_a_restarted_broker_keeps_what_kafka_keeps(reference_cluster_factory):
    cluster = reference_cluster_factory(1, users={'admin': 'admin-pw', 'app': 'app-pw'}, authorizer=True,
                                        super_users={'admin'})
    bootstrap = cluster.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **SASL)
    admin.create_topics([NewTopic(TP.topic, 1, 1, topic_configs={'retention.ms': '86400000'})])
    acl = ACL('User:app', '*', ACLOperation.READ, ACLPermissionType.ALLOW,
              ResourcePattern(ResourceType.TOPIC, TP.topic, ACLResourcePatternType.LITERAL))
    admin.create_acls([acl])
    broker_default = ConfigResource(ConfigResourceType.BROKER, '0', configs={'message.max.bytes': '2000000'})
    assert admin.alter_configs([broker_default], incremental=True) == {'broker': {'0': 'OK'}}
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

    cluster.stop_broker(0)
    cluster.start_broker(0)

    assert cluster.bootstrap_servers == bootstrap  # the same port
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **SASL)  # SCRAM users: the login still works
    try:
        assert cluster.records(TP) == with_records
        assert (cluster.log_start_offset(TP), cluster.log_end_offset(TP)) == (0, 4)  # 3 records, a commit marker
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TP.topic)])
        assert described['topic'][TP.topic]['retention.ms']['value'] == '86400000'
        broker = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, '0')])
        assert broker['broker']['0']['message.max.bytes']['value'] == '2000000'
        acls, _ = admin.describe_acls(ACLFilter('User:app', None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                ResourcePatternFilter(ResourceType.ANY, None,
                                                                      ACLResourcePatternType.ANY)))
        assert acls == [acl]
        assert admin.list_group_offsets('g') == {'g': {TP: OffsetAndMetadata(2, 'kept?', -1)}}
        # the transactional id's state: the next producer gets the same producer id, one epoch on
        producer = wait_until(lambda: transactional_producer(bootstrap), 'a transactional producer initialized')
        assert producer_id_and_epoch(producer) == (before[0], before[1] + 1)
        producer.close()
    finally:
        admin.close()
