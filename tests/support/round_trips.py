"""Produce a record and consume it back with an unmodified client: the check a security test ends with."""
from __future__ import annotations

from types import ModuleType
from typing import Any

from kafka import TopicPartition


def python_round_trip(client_module: ModuleType, bootstrap_servers: str, topic: str, value: bytes,
                      **security: Any) -> int:
    """``value`` produced to partition 0 of ``topic`` and read back with ``client_module``'s (kafka-python's or
    kafka_kip's) producer and consumer configured with ``security``; returns its offset."""
    producer = client_module.KafkaProducer(bootstrap_servers=bootstrap_servers, acks='all', **security)
    offset = producer.send(topic, value=value, partition=0).get(timeout=15).offset
    producer.close()
    tp = TopicPartition(topic, 0)
    consumer = client_module.KafkaConsumer(bootstrap_servers=bootstrap_servers, consumer_timeout_ms=15_000,
                                           **security)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    assert next(iter(consumer)).value == value
    consumer.close()
    return offset


def confluent_round_trip(confluent_kafka: ModuleType, config: dict[str, Any], topic: str, value: bytes,
                         group: str) -> int:
    """The same with confluent-kafka (librdkafka) configured with ``config``."""
    producer = confluent_kafka.Producer(config)
    delivered = []
    producer.produce(topic, value=value, partition=0,
                     on_delivery=lambda error, message: delivered.append((error, message.offset())))
    assert producer.flush(15) == 0
    [(error, offset)] = delivered
    assert error is None
    consumer = confluent_kafka.Consumer({**config, 'group.id': group, 'enable.auto.commit': False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, offset)])
    message = consumer.poll(15)
    consumer.close()
    assert (message.error(), message.offset(), message.value()) == (None, offset, value)
    return offset
