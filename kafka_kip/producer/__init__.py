"""The extended producer (drop-in for :mod:`kafka.producer`)."""
from kafka_kip.producer.producer import KafkaProducer

__all__ = ['KafkaProducer']
