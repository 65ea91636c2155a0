"""Kafka's internal topics: ``__consumer_offsets`` and ``__transaction_state``, created on first use.

As on Kafka, FindCoordinator for a group creates ``__consumer_offsets`` (``offsets.topic.num.partitions``, 50)
and FindCoordinator for a transactional id creates ``__transaction_state``
(``transaction.state.log.num.partitions``, 50), both compacted, with Kafka's topic configs (the transaction log
uncompressed, its ``min.insync.replicas`` ``transaction.state.log.min.isr``); Metadata lists them with ``is_internal=true``,
ordinary produce and DeleteRecords are refused with INVALID_TOPIC_EXCEPTION. The coordinators keep their state
in memory (:mod:`kafka_kip_reference.broker.groups`, :mod:`kafka_kip_reference.broker.transactions`): the topics are there for
what clients see of them, they hold no records.

The replication factor is ``offsets.topic.replication.factor`` / ``transaction.state.log.replication.factor``
(Kafka's default 3). Where it is left at its default the reference cluster uses at most the live brokers, so that
one- and two-broker clusters work without a config (Kafka's own single-broker ``server.properties`` sets 1); a
factor set above the live brokers makes FindCoordinator answer COORDINATOR_NOT_AVAILABLE, as on Kafka.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_kip.protocol import constants
from kafka_kip_reference.broker.model import ClusterError

if TYPE_CHECKING:
    from kafka_kip_reference.broker.state import ClusterState

CONSUMER_OFFSETS = '__consumer_offsets'
TRANSACTION_STATE = '__transaction_state'
#: Kafka's ``offsets.topic.segment.bytes`` / ``transaction.state.log.segment.bytes`` default.
_SEGMENT_BYTES = '104857600'


@dataclass(frozen=True)
class InternalTopic:
    """An internal topic: the broker configs of its partition count and replication factor, its topic configs."""

    name: str
    partitions_config: str
    replication_config: str
    configs: tuple[tuple[str, str], ...]
    #: topic configs set from broker configs: ``(topic config, broker config)``
    from_broker: tuple[tuple[str, str], ...] = ()


INTERNAL_TOPICS: dict[str, InternalTopic] = {t.name: t for t in (
    InternalTopic(CONSUMER_OFFSETS, 'offsets.topic.num.partitions', 'offsets.topic.replication.factor',
                  (('cleanup.policy', 'compact'), ('compression.type', 'producer'), ('segment.bytes', _SEGMENT_BYTES))),
    InternalTopic(TRANSACTION_STATE, 'transaction.state.log.num.partitions', 'transaction.state.log.replication.factor',
                  (('cleanup.policy', 'compact'), ('compression.type', 'uncompressed'), ('segment.bytes', _SEGMENT_BYTES),
                   ('unclean.leader.election.enable', 'false')),
                  (('min.insync.replicas', 'transaction.state.log.min.isr'),)),
)}


def is_internal(name: str | None) -> bool:
    """True for Kafka's internal topics (Kafka's ``Topic.isInternal``)."""
    return name in INTERNAL_TOPICS


def ensure_internal_topic(state: ClusterState, name: str) -> int:
    """Create internal topic ``name`` if it does not exist yet; NONE, or COORDINATOR_NOT_AVAILABLE when it cannot
    be created (too few live brokers for its replication factor)."""
    if state.partitions(name) is not None:
        return constants.NONE
    topic = INTERNAL_TOPICS[name]
    config = state.config
    factor = config.int(topic.replication_config)
    if not config.is_set(topic.replication_config):
        factor = min(factor, len(state.live_broker_ids()))
    try:
        state.create_topic(name, config.int(topic.partitions_config), factor,
                           {**dict(topic.configs), **{key: config[broker] for key, broker in topic.from_broker}})
    except ClusterError:
        return constants.COORDINATOR_NOT_AVAILABLE
    return constants.NONE
