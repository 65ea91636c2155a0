"""Feature negotiation: what kafka_kip's clients believe each broker supports.

Every extension is negotiated per broker from ApiVersions ``SupportedFeatures``: the clients send an extension
field (KIP-232 partition epochs, KIP-253 partition counts, KIP-391 offsets, KIP-1243 consistency state) only to
a broker that advertised its feature. A stock broker advertises none of them, so nothing is sent and no
guarantee is claimed there; the extensions degrade to stock behaviour.
"""
from __future__ import annotations

from typing import Any

import kafka_kip as kafka
from integration.support import CONSUMER_CONFIG, TP, consume
from integration.targets import BrokerTarget
from kafka_kip.protocol.features import ALL_FEATURES, FEATURE_VERSION, broker_features


def test_clients_record_exactly_the_advertised_features(target: BrokerTarget, topic: str, clients: Any) -> None:
    """After a produce and a fetch, producer and consumer hold for the partition leader exactly the kip.*
    features the target advertises (none on a stock broker, whatever features of its own it lists), each at
    version 1."""
    target.create_topic(topic)
    tp = TP(topic, 0)
    producer = clients(kafka.KafkaProducer)
    assert producer.send(topic, value=b'v', partition=0).get(timeout=10).offset == 0
    consumer = clients(kafka.KafkaConsumer, **CONSUMER_CONFIG)
    consumer.assign([tp])
    assert [r.value for r in consume(consumer, 1)] == [b'v']

    advertised = {f: (FEATURE_VERSION, FEATURE_VERSION) for f in ALL_FEATURES if f in target.capabilities}
    leader = target.describe_partition(tp).leader_id

    def extensions(client: Any) -> dict[str, tuple[int, int]]:
        # Apache Kafka also lists its own features (metadata.version, group.version, ...): not extensions.
        return {k: v for k, v in (broker_features(client, leader) or {}).items() if k in ALL_FEATURES}

    assert {'producer': extensions(producer), 'consumer': extensions(consumer)} == \
        {'producer': advertised, 'consumer': advertised}
