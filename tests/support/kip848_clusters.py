"""Shared by the KIP-848 client tests on real sockets."""
from __future__ import annotations

#: KIP-848 members learn of partitions released by others at their next heartbeat (Kafka's default is 5000 ms): the
#: reference cluster as the Apache Kafka test clusters are configured (kafka_kip_reference.external.apache_kafka), 500 ms.
FAST_CONSUMER_GROUP_HEARTBEATS = {'group.consumer.heartbeat.interval.ms': 500}
