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
from kafka_kip.protocol import requests

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
    response = client.request(requests.metadata(names))
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
    found = copied_configs_of(client, [topic])[topic]
    if isinstance(found, Errors.KafkaError):
        raise found
    return found


def copied_configs_of(client: ClusterClient, topics: list[str]) -> dict[str, dict[str, str] | Errors.KafkaError]:
    """:func:`copied_configs` of several topics in one request; a topic that cannot be described maps to
    its error."""
    if not topics:
        return {}
    out: dict[str, dict[str, str] | Errors.KafkaError] = {}
    for result in client.request(requests.describe_topic_configs(topics)).results:
        if result.error_code:
            out[result.resource_name] = Errors.for_code(result.error_code)(
                f'describing the configs of {result.resource_name!r} failed: {result.error_message}')
        else:
            out[result.resource_name] = {
                c.name: c.value for c in result.configs
                if c.config_source == requests.DYNAMIC_TOPIC_CONFIG and c.name not in EXCLUDED_CONFIGS and c.value is not None}
    return out


def create_topic(target: ClusterClient, name: str, shape: TopicInfo, configs: dict[str, str]) -> int:
    """Create ``name`` on the target (an existing topic is left as it is); returns its replication factor.

    The replication factor is the shape's, capped at the target's broker count.
    """
    replication, = _create_topics(target, {name: (shape, configs)}).values()
    if isinstance(replication, Errors.KafkaError):
        raise replication
    return replication


def _create_topics(target: ClusterClient, wanted: dict[str, tuple[TopicInfo, dict[str, str]]]
                   ) -> dict[str, int | Errors.KafkaError]:
    """Create the ``wanted`` topics (name -> shape, configs) in one request: their replication factors or errors."""
    brokers = max(1, len(target.cluster.brokers()))
    replication = {name: min(shape.replication_factor, brokers) for name, (shape, _) in wanted.items()}
    request = requests.create_topics({name: (shape.partitions, replication[name], configs)
                                      for name, (shape, configs) in wanted.items()})
    try:
        response = target.request(request, _controller(target))
    except Errors.KafkaError as exc:
        return {name: exc for name in wanted}
    out: dict[str, int | Errors.KafkaError] = {}
    for topic in response.topics:
        error = topic.error_code
        out[topic.name] = replication[topic.name] if not error or error == Errors.TopicAlreadyExistsError.errno else \
            Errors.for_code(error)(f'creating target topic {topic.name!r} failed: {topic.error_message}')
    return out


def ensure_topic(target: ClusterClient, name: str, shape: TopicInfo, configs: dict[str, str],
                 existing: dict[str, TopicInfo]) -> str | None:
    """Create ``name`` on the target or grow it to ``shape.partitions``; returns what was done, or None."""
    done = ensure_topics(target, {name: (shape, configs)}, existing)[name]
    if isinstance(done, Errors.KafkaError):
        raise done
    return done


def ensure_topics(target: ClusterClient, wanted: dict[str, tuple[TopicInfo, dict[str, str]]],
                  existing: dict[str, TopicInfo]) -> dict[str, str | None | Errors.KafkaError]:
    """:func:`ensure_topic` for several topics (name -> shape, configs): one CreateTopics request for those
    missing, one CreatePartitions for those too small; each topic maps to what was done, None, or its error."""
    out: dict[str, str | None | Errors.KafkaError] = {}
    missing = {name: shaped for name, shaped in wanted.items() if name not in existing}
    if missing:
        for name, replication in _create_topics(target, missing).items():
            out[name] = replication if isinstance(replication, Errors.KafkaError) else \
                f'created {name} ({missing[name][0].partitions} partitions, replication factor {replication})'
    grow = {name: shape.partitions for name, (shape, _) in wanted.items()
            if name in existing and existing[name].partitions < shape.partitions}
    if grow:
        try:
            results = target.request(requests.create_partitions(grow), _controller(target)).results
        except Errors.KafkaError as exc:
            results = []
            out.update((name, exc) for name in grow)
        for result in results:
            name = result.name
            out[name] = Errors.for_code(result.error_code)(
                f'growing target topic {name!r} failed: {result.error_message}') if result.error_code else \
                f'grew {name} from {existing[name].partitions} to {grow[name]} partitions'
    return {name: out.get(name) for name in wanted}


def _controller(client: ClusterClient) -> int | None:
    controller = client.cluster.controller
    return controller.node_id if controller is not None else None
