"""CreateTopics, DeleteTopics and CreatePartitions (any broker answers, as KRaft brokers forward)."""
from __future__ import annotations

import asyncio
from collections import Counter

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.config import validate_topic_configs
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.model import ClusterError
from kafka_kip_reference.broker.registry import handles

CreateTopicsResponse = RESPONSES[ApiKey.CreateTopics]
_Created = CreateTopicsResponse.CreatableTopicResult
_CreatedConfig = _Created.CreatableTopicConfigs
DeleteTopicsResponse = RESPONSES[ApiKey.DeleteTopics]
_Deleted = DeleteTopicsResponse.DeletableTopicResult
CreatePartitionsResponse = RESPONSES[ApiKey.CreatePartitions]
_Expanded = CreatePartitionsResponse.CreatePartitionsTopicResult

#: Kafka's ``QuorumController.MAX_RECORDS_PER_USER_OP``: the most metadata records one request may write (a topic
#: record, one per partition and one per config override); over it the whole request is refused.
MAX_RECORDS_PER_USER_OP = 10_000
#: Kafka's ``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH``: the most partitions one CreateTopics may name
#: (every topic counted, existing or not); checked before the record count.
MAX_PARTITIONS_PER_BATCH = 10_000
#: Topics created between two yields to the loop, so that other clients are served during a large request.
TOPICS_PER_TURN = 100


@handles(ApiKey.CreateTopics, 2, 7)
async def handle_create_topics(request, ctx: RequestContext):
    state = ctx.cluster
    occurrences = Counter(t.name for t in request.topics)
    too_large = None
    if _requested_partitions(state, request.topics) > MAX_PARTITIONS_PER_BATCH:
        too_large = 'Excessively large number of partitions per request.'
    elif _metadata_records(state, request.topics) > MAX_RECORDS_PER_USER_OP:
        too_large = 'Unable to perform excessively large batch operation.'
    if too_large:
        return CreateTopicsResponse(version=ctx.api_version, throttle_time_ms=0, topics=[
            _Created(name=t.name, error_code=constants.POLICY_VIOLATION, num_partitions=-1,
                     replication_factor=-1, configs=[], error_message=too_large) for t in request.topics])
    results = []
    without_overrides = None  # the configs of a topic without overrides: one list per request, not per topic
    for count, wanted in enumerate(request.topics, 1):
        if count % TOPICS_PER_TURN == 0:
            await asyncio.sleep(0)
            without_overrides = None  # broker configs may have changed meanwhile
        result = _Created(name=wanted.name, error_code=constants.NONE, error_message=None, num_partitions=-1,
                          replication_factor=-1, configs=[])
        results.append(result)
        assignments = [a.broker_ids for a in sorted(wanted.assignments, key=lambda a: a.partition_index)]
        if occurrences[wanted.name] > 1:
            result.error_code, result.error_message = constants.INVALID_REQUEST, 'duplicate topic name in the request'
            continue
        if assignments and (wanted.num_partitions != -1 or wanted.replication_factor != -1):
            result.error_code = constants.INVALID_REQUEST
            result.error_message = 'both num_partitions/replication_factor and assignments were set'
            continue
        partitions = state.config.int('num.partitions') if wanted.num_partitions == -1 else wanted.num_partitions
        factor = (state.config.int('default.replication.factor') if wanted.replication_factor == -1
                  else wanted.replication_factor)
        configs = {c.name: c.value for c in wanted.configs if c.name is not None and c.value is not None}
        try:
            configs = validate_topic_configs(configs,
                                             lambda message: ClusterError(constants.INVALID_CONFIG, message))
            topic = state.create_topic(wanted.name, partitions, factor, configs, assignments or None,
                                       validate_only=request.validate_only)
        except ClusterError as exc:
            result.error_code, result.error_message = exc.error_code, str(exc)
            continue
        result.num_partitions = len(assignments) if assignments else partitions
        result.replication_factor = len(assignments[0]) if assignments else factor
        if configs or without_overrides is None:
            entries = [
                _CreatedConfig(name=name, value=value, read_only=False, is_sensitive=False, config_source=source)
                for name, value, source, *_ in state.config.topic_entries(configs)]
            if not configs:
                without_overrides = entries
        result.configs = entries if configs else without_overrides
        if topic is not None:
            result.topic_id = topic.topic_id
    return CreateTopicsResponse(version=ctx.api_version, throttle_time_ms=0, topics=results)


def _requested_partitions(state, topics) -> int:
    """The partitions ``topics`` name, as Kafka's controller counts them: assignments, else the count (-1: the
    default), existing topics too."""
    default = state.config.int('num.partitions')
    return sum(len(t.assignments) or (default if t.num_partitions == -1 else max(t.num_partitions, 0))
               for t in topics)


def _metadata_records(state, topics) -> int:
    """The metadata records Kafka's controller would write for ``topics`` (those not existing already)."""
    default = state.config.int('num.partitions')
    return sum(1 + (len(t.assignments) or (default if t.num_partitions == -1 else max(t.num_partitions, 0)))
               + len(t.configs) for t in topics if state.partitions(t.name) is None)


@handles(ApiKey.DeleteTopics, 1, 6)
async def handle_delete_topics(request, ctx: RequestContext):
    state = ctx.cluster
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        if name is None:
            name = state.topic_name(topic_id)
            if name is None:
                results.append(_Deleted(name=None, topic_id=topic_id, error_code=constants.UNKNOWN_TOPIC_ID,
                                        error_message=f'unknown topic id {topic_id}'))
                continue
        try:
            topic = state.delete_topic(name)
        except ClusterError as exc:
            results.append(_Deleted(name=name, topic_id=topic_id, error_code=exc.error_code,
                                    error_message=str(exc)))
            continue
        results.append(_Deleted(name=name, topic_id=topic.topic_id, error_code=constants.NONE,
                                error_message=None))
    return DeleteTopicsResponse(version=ctx.api_version, throttle_time_ms=0, responses=results)


@handles(ApiKey.CreatePartitions, 0, 3)
async def handle_create_partitions(request, ctx: RequestContext):
    state = ctx.cluster
    results = []
    for wanted in request.topics:
        assignments = [a.broker_ids for a in wanted.assignments] if wanted.assignments else None
        try:
            state.create_partitions(wanted.name, wanted.count, assignments, validate_only=request.validate_only)
        except ClusterError as exc:
            results.append(_Expanded(name=wanted.name, error_code=exc.error_code, error_message=str(exc)))
            continue
        results.append(_Expanded(name=wanted.name, error_code=constants.NONE, error_message=None))
    return CreatePartitionsResponse(version=ctx.api_version, throttle_time_ms=0, results=results)
