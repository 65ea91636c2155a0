"""The extended consumer (drop-in for :mod:`kafka.consumer`)."""
from kafka_kip.consumer.group import KafkaConsumer

__all__ = ['KafkaConsumer']
