"""Client metadata: the KIP-232 freshness rules, KIP-1243's consistency context, store and session, the cluster
cache applying them, and its installation.

``KafkaConsumer(..., kafka_client=KipNetClient)`` (likewise the producer and admin client) gives the client
a :class:`KipClusterMetadata`, which refuses metadata older than what it already holds.
"""
from kafka_kip.metadata.client import KipConnectionManager, KipNetClient
from kafka_kip.metadata.cluster import Interest, KipClusterMetadata
from kafka_kip.metadata.consistency import ConsistencyContext
from kafka_kip.metadata.consistency_session import ConsistencySession
from kafka_kip.metadata.freshness import (
    UNKNOWN_EPOCH,
    Epochs,
    MetadataEpochs,
    Outdated,
    TopicEpochs,
    find_outdated,
    is_at_least,
    is_new_incarnation,
    is_older,
)
from kafka_kip.metadata.store import ConsistencyContextStore

__all__ = [
    'KipNetClient', 'KipConnectionManager', 'KipClusterMetadata', 'Interest', 'ConsistencyContext',
    'ConsistencyContextStore', 'ConsistencySession', 'UNKNOWN_EPOCH', 'Epochs', 'MetadataEpochs',
    'Outdated', 'TopicEpochs', 'find_outdated', 'is_at_least', 'is_new_incarnation', 'is_older',
]
