"""The extended producer (drop-in for :mod:`kafka.producer`): producing records at given offsets (KIP-391).

Module map: :mod:`~kafka_kip.producer.producer` (``KafkaProducer``, ``send()``), :mod:`.batch` (batches of
offset records, ``RecordMetadata``), :mod:`.accumulator` (batching and per-drain kind selection),
:mod:`.admission` (KIP-391 negotiation and checked mode), :mod:`.sender` (``use_offset`` requests, refusals).
"""
from kafka_kip.policies import PRODUCER_OFFSET_MODES as OFFSET_MODES
from kafka_kip.producer.batch import RecordMetadata
from kafka_kip.producer.producer import KafkaProducer

__all__ = ['KafkaProducer', 'OFFSET_MODES', 'RecordMetadata']
