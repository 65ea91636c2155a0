"""Topics: which source topics to mirror, and target topics shaped like them.

A missing target topic is created with the source's partition count, the source's replication factor
(capped at the target's broker count) and the source's topic-level configs, except those MirrorMaker 2
does not copy either (its DefaultConfigPropertyFilter: replication throttles, timestamp type and
difference, unclean election, min ISR). A target topic with fewer partitions than its source is grown.
"""
from __future__ import annotations

import re
from typing import NamedTuple

import kafka_kip.errors as Errors
from kafka_kip.mirror.client import ClusterClient, topic_id_text
from kafka_kip.protocol.messages import REQUESTS

_Metadata = REQUESTS[3]
_CreateTopics = REQUESTS[19]
_DescribeConfigs = REQUESTS[32]
_CreatePartitions = REQUESTS[37]
_TOPIC_RESOURCE = 2
_DYNAMIC_TOPIC_CONFIG = 1

#: Topic configs never copied to the target (MirrorMaker 2's defaults).
EXCLUDED_CONFIGS = frozenset({
    'follower.replication.throttled.replicas', 'leader.replication.throttled.replicas',
    'message.timestamp.difference.max.ms', 'message.timestamp.type', 'unclean.leader.election.enable',
    'min.insync.replicas',
})


#: Topics of the mirror itself (its offset map): never mirrored.
MIRROR_TOPIC_PREFIX = 'kafka-kip-mirror.'


class TopicInfo(NamedTuple):
    """The shape of a topic: partition count and replication factor; its id where the broker gives one."""

    partitions: int
    replication_factor: int
    topic_id: str | None = None


def describe_topics(client: ClusterClient, names: list[str] | None = None, *,
                    include_mirror_topics: bool = False) -> dict[str, TopicInfo]:
    """Existing non-internal topics (all of them when ``names`` is None) with their shapes.

    The mirror's own topics (:data:`MIRROR_TOPIC_PREFIX`) are left out unless ``include_mirror_topics``.
    """
    topics = None if names is None else [_Metadata.MetadataRequestTopic(name=name) for name in names]
    response = client.request(_Metadata(topics=topics, allow_auto_topic_creation=False,
                                        include_cluster_authorized_operations=False,
                                        include_topic_authorized_operations=False, min_version=1, max_version=12))
    found = {}
    for topic in response.topics:
        if (topic.error_code or topic.is_internal or topic.name.startswith('__')
                or (topic.name.startswith(MIRROR_TOPIC_PREFIX) and not include_mirror_topics)):
            continue
        replicas = max((len(p.replica_nodes) for p in topic.partitions), default=1)
        found[topic.name] = TopicInfo(len(topic.partitions), replicas, topic_id_text(getattr(topic, 'topic_id', None)))
    return found


def matching_topics(client: ClusterClient, pattern: str) -> dict[str, TopicInfo]:
    """Source topics whose whole name matches ``pattern`` (a Python regex)."""
    regex = re.compile(pattern)
    return {name: info for name, info in describe_topics(client).items() if regex.fullmatch(name)}


def copied_configs(client: ClusterClient, topic: str) -> dict[str, str]:
    """The topic-level configs of ``topic`` set on the topic itself, minus :data:`EXCLUDED_CONFIGS`."""
    request = _DescribeConfigs(resources=[_DescribeConfigs.DescribeConfigsResource(
        resource_type=_TOPIC_RESOURCE, resource_name=topic, configuration_keys=None)],
        include_synonyms=False, include_documentation=False, min_version=1, max_version=4)
    result = client.request(request).results[0]
    if result.error_code:
        raise Errors.for_code(result.error_code)(f'describing the configs of {topic!r} failed: {result.error_message}')
    return {c.name: c.value for c in result.configs
            if c.config_source == _DYNAMIC_TOPIC_CONFIG and c.name not in EXCLUDED_CONFIGS and c.value is not None}


def create_topic(target: ClusterClient, name: str, shape: TopicInfo, configs: dict[str, str]) -> int:
    """Create ``name`` on the target (an existing topic is left as it is); returns its replication factor.

    The replication factor is the shape's, capped at the target's broker count.
    """
    replication = min(shape.replication_factor, max(1, len(target.cluster.brokers())))
    topic = _CreateTopics.CreatableTopic(
        name=name, num_partitions=shape.partitions, replication_factor=replication, assignments=[],
        configs=[_CreateTopics.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
    response = target.request(_CreateTopics(topics=[topic], timeout_ms=30000, validate_only=False,
                                            min_version=2, max_version=7), _controller(target))
    error = response.topics[0].error_code
    if error and error != Errors.TopicAlreadyExistsError.errno:
        raise Errors.for_code(error)(f'creating target topic {name!r} failed: {response.topics[0].error_message}')
    return replication


def ensure_topic(target: ClusterClient, name: str, shape: TopicInfo, configs: dict[str, str],
                 existing: dict[str, TopicInfo]) -> str | None:
    """Create ``name`` on the target or grow it to ``shape.partitions``; returns what was done, or None."""
    current = existing.get(name)
    if current is None:
        replication = create_topic(target, name, shape, configs)
        return f'created {name} ({shape.partitions} partitions, replication factor {replication})'
    if current.partitions < shape.partitions:
        request = _CreatePartitions(topics=[_CreatePartitions.CreatePartitionsTopic(
            name=name, count=shape.partitions, assignments=None)], timeout_ms=30000, validate_only=False,
            min_version=0, max_version=3)
        result = target.request(request, _controller(target)).results[0]
        if result.error_code:
            raise Errors.for_code(result.error_code)(f'growing target topic {name!r} failed: {result.error_message}')
        return f'grew {name} from {current.partitions} to {shape.partitions} partitions'
    return None


def _controller(client: ClusterClient) -> int | None:
    controller = client.cluster.controller
    return controller.node_id if controller is not None else None
