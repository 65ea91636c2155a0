"""Which requests a principal may make, per API, as Apache Kafka's ``KafkaApis`` authorizes them.

With an authorizer (``ReferenceCluster(authorizer=True)``) every request passes through the policy of its API
(:data:`POLICIES`, one per API key) before and after its handler, so the handlers stay unaware of ACLs:

- a request refused as a whole (a group, a transactional id or the cluster the principal may not use) gets the
  API's error response (:func:`kafka_kip_reference.broker.error_responses.error_response`) and its handler does not run;
- topics (partitions, groups, resources) the principal may not use are taken out of the request, the handler
  answers the rest, and the refused ones are added to its answer with TOPIC_AUTHORIZATION_FAILED (or the
  resource's error), as Kafka merges its authorized and unauthorized results;
- answers that list what exists (Metadata of all topics, ListGroups, OffsetFetch of all topics,
  DescribeTopicPartitions) leave out what the principal may not DESCRIBE, and authorized-operations fields are
  filled from the ACLs when the client asks for them.

The operations and errors are Kafka's (KafkaApis, AuthHelper, AclApis of Apache Kafka 4); KIP-391's
``use_offset`` produce also needs REPLICATOR_WRITE on the cluster (CLUSTER_AUTHORIZATION_FAILED). An API without a
policy is served to super users only (``CloseConnection`` for others); tests/reference/test_acl_rules.py checks that every
API the brokers handle has one.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kafka.admin import ResourceType
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.acl import REPLICATOR_WRITE
from kafka_kip.protocol.acl import ACLOperation as Op
from kafka_kip.protocol.features import KIP_391
from kafka_kip.protocol.messages import LEADER_EPOCHS_FOR_PARTITION_API_KEY, RESPONSES
from kafka_kip.protocol.record_batch import TRANSACTIONAL_MASK, InvalidBatch, parse_header
from kafka_kip_reference.broker.acl import CLUSTER_NAME
from kafka_kip_reference.broker.context import CloseConnection, RequestContext
from kafka_kip_reference.broker.error_responses import error_response

Handle = Callable[[Any, RequestContext], Awaitable[Any]]
Policy = Callable[[Any, RequestContext, 'Access', Handle], Awaitable[Any]]

#: api_key -> its policy.
POLICIES: dict[int, Policy] = {}

_TOPIC, _GROUP, _CLUSTER, _TRANSACTIONAL_ID = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                               ResourceType.TRANSACTIONAL_ID)
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_GROUP = 2, 4, 8, 32  # DescribeConfigs resource types


class Access:
    """What one request's principal may do, from the cluster's authorizer."""

    def __init__(self, ctx: RequestContext) -> None:
        self._authorizer = ctx.cluster.authorizer
        self.principal = ctx.kafka_principal
        self._host = ctx.session.host

    @property
    def super_user(self) -> bool:
        return self.principal in self._authorizer.super_users

    def allowed(self, operation: int, resource_type: int, name: str) -> bool:
        return self._authorizer.authorize(self.principal, self._host, operation, resource_type, name)

    def topic(self, operation: int, name: str) -> bool:
        return self.allowed(operation, _TOPIC, name)

    def group(self, operation: int, name: str) -> bool:
        return self.allowed(operation, _GROUP, name)

    def cluster(self, operation: int) -> bool:
        return self.allowed(operation, _CLUSTER, CLUSTER_NAME)

    def transactional_id(self, operation: int, name: str) -> bool:
        return self.allowed(operation, _TRANSACTIONAL_ID, name)

    def any_topic(self, operation: int) -> bool:
        return self._authorizer.authorize_any(self.principal, self._host, operation, _TOPIC)

    def operations(self, resource_type: int, name: str) -> frozenset[int]:
        return self._authorizer.authorized_operations(self.principal, self._host, resource_type, name)


async def authorize_and_handle(handle: Handle, request: Any, ctx: RequestContext) -> Any:
    """``handle(request, ctx)`` as the API's policy lets the principal run it (directly without an authorizer)."""
    if ctx.cluster.authorizer is None:
        return await handle(request, ctx)
    access = Access(ctx)
    policy = POLICIES.get(ctx.api_key)
    if policy is None:
        if access.super_user:
            return await handle(request, ctx)
        raise CloseConnection(f'api {ctx.api_key} has no authorization policy: only super users may call it')
    return await policy(request, ctx, access, handle)


def policy(*api_keys: int) -> Callable[[Policy], Policy]:
    def register(fn: Policy) -> Policy:
        for key in api_keys:
            if key in POLICIES:
                raise RuntimeError(f'two authorization policies for api {key}')
            POLICIES[int(key)] = fn
        return fn
    return register


def _refused(ctx: RequestContext, request: Any, error_code: int, message: str | None = None) -> Any:
    return error_response(ctx.api_key, ctx.api_version, request, error_code, message)


def _split(request: Any, field: str, keep: Callable[[Any], bool]) -> list:
    """Take the entries of ``request.<field>`` that ``keep`` refuses out of the request; return them."""
    entries = getattr(request, field) or []
    setattr(request, field, [entry for entry in entries if keep(entry)])
    return [entry for entry in entries if not keep(entry)]


def _entries_refusing(ctx: RequestContext, request: Any, field: str, refused: list, error_code: int,
                      response_field: str) -> list:
    """The answer's ``response_field`` entries refusing ``refused`` (entries of ``request.<field>``)."""
    kept = getattr(request, field)
    setattr(request, field, refused)
    try:
        return list(getattr(_refused(ctx, request, error_code), response_field))
    finally:
        setattr(request, field, kept)


async def _handled_without(ctx: RequestContext, request: Any, handle: Handle, field: str, refused: list,
                           error_code: int, response_field: str) -> Any:
    """The handler's answer to what is left of the request, plus the ``refused`` entries refused with
    ``error_code``; with nothing left the handler does not run."""
    if not refused:
        return await handle(request, ctx)
    errors = _entries_refusing(ctx, request, field, refused, error_code, response_field)
    if not getattr(request, field):
        setattr(request, field, refused)
        return _refused(ctx, request, error_code)
    response = await handle(request, ctx)
    if response is not None:
        setattr(response, response_field, list(getattr(response, response_field)) + errors)
    return response


def _topic_name(ctx: RequestContext, topic: Any, name_field: str = 'name') -> str | None:
    """The name of a request's topic entry (by topic id from the versions that send ids)."""
    name = getattr(topic, name_field, None)
    topic_id = getattr(topic, 'topic_id', None)
    if not name and topic_id is not None:
        return ctx.cluster.view(ctx.broker_id).topic_names.get(topic_id)
    return name


def _topic_allowed(ctx: RequestContext, access: Access, operation: int,
                   name_field: str = 'name') -> Callable[[Any], bool]:
    """Whether the principal may ``operation`` a request's topic entry (an unknown topic id: the handler answers)."""
    def allowed(topic: Any) -> bool:
        name = _topic_name(ctx, topic, name_field)
        return name is None or access.topic(operation, name)
    return allowed


def _topics_policy(field: str, response_field: str, operation: int, name_field: str = 'name') -> Policy:
    """A policy refusing the topics of ``request.<field>`` the principal may not ``operation``."""
    async def run(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
        refused = _split(request, field, _topic_allowed(ctx, access, operation, name_field))
        return await _handled_without(ctx, request, handle, field, refused,
                                      constants.TOPIC_AUTHORIZATION_FAILED, response_field)
    return run


def _whole(check: Callable[[Any, Access], int], then: Policy | None = None) -> Policy:
    """A policy refusing the whole request with the error ``check`` returns (NONE: allowed, then ``then``)."""
    async def run(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
        error = check(request, access)
        if error:
            return _refused(ctx, request, error)
        if then is not None:
            return await then(request, ctx, access, handle)
        return await handle(request, ctx)
    return run


def _cluster(operation: int) -> Callable[[Any, Access], int]:
    return lambda request, access: constants.NONE if access.cluster(operation) else constants.CLUSTER_AUTHORIZATION_FAILED


def _group(operation: int, field: str = 'group_id') -> Callable[[Any, Access], int]:
    return lambda request, access: constants.NONE if access.group(operation, getattr(request, field)) \
        else constants.GROUP_AUTHORIZATION_FAILED


def _transactional(operation: int = Op.WRITE, field: str = 'transactional_id') -> Callable[[Any, Access], int]:
    return lambda request, access: constants.NONE \
        if access.transactional_id(operation, getattr(request, field)) \
        else constants.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _both(*checks: Callable[[Any, Access], int]) -> Callable[[Any, Access], int]:
    def check(request: Any, access: Access) -> int:
        for each in checks:
            error = each(request, access)
            if error:
                return error
        return constants.NONE
    return check


# -- APIs every connection may use ---------------------------------------------------------------------------


@policy(ApiKey.ApiVersions, ApiKey.SaslHandshake, ApiKey.SaslAuthenticate,
        ApiKey.CreateAcls, ApiKey.DescribeAcls, ApiKey.DeleteAcls)  # the ACL APIs check ALTER/DESCRIBE themselves
async def _unchecked(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    return await handle(request, ctx)


# -- produce and fetch ---------------------------------------------------------------------------------------

_produce_topics = _topics_policy('topic_data', 'responses', Op.WRITE)


@policy(ApiKey.Produce)
async def _produce(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    """Refusals of an acks=0 produce, which gets no answer, close the connection (after the allowed topics are
    written), as Kafka does so that the producer notices."""
    error, message = constants.NONE, None
    if _has_transactional_records(request) and (request.transactional_id is None or not access.transactional_id(
            Op.WRITE, request.transactional_id)):
        error = constants.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif getattr(request, 'use_offset', False) and ctx.cluster.honours(KIP_391) and not access.cluster(
            REPLICATOR_WRITE):
        error, message = constants.CLUSTER_AUTHORIZATION_FAILED, 'producing with offsets requires REPLICATOR_WRITE'
    if request.acks != 0:
        if error:
            return _refused(ctx, request, error, message)
        return await _produce_topics(request, ctx, access, handle)
    if not error:
        refused = _split(request, 'topic_data', _topic_allowed(ctx, access, Op.WRITE))
        if request.topic_data:
            await handle(request, ctx)
        if not refused:
            return None
        error = constants.TOPIC_AUTHORIZATION_FAILED
    raise CloseConnection(f'an acks=0 produce was refused with error {error}')


def _has_transactional_records(request: Any) -> bool:
    """Kafka's ``RequestUtils.hasTransactionalRecords``: some partition's first batch is transactional (only then
    is the transactional id checked; a batch too short for a header is left to validation)."""
    for topic in request.topic_data:
        for partition in topic.partition_data:
            try:
                if parse_header(partition.records or b'').attributes & TRANSACTIONAL_MASK:
                    return True
            except InvalidBatch:
                continue
    return False


@policy(ApiKey.Fetch)
async def _fetch(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    if request.replica_id >= 0 and not access.cluster(Op.CLUSTER_ACTION):  # a follower's fetch
        return _fetch_answer(ctx, request.topics, constants.TOPIC_AUTHORIZATION_FAILED)
    refused = _split(request, 'topics', lambda topic: (name := _topic_name(ctx, topic, 'topic')) is None
                     or access.topic(Op.READ, name))
    if not refused:
        return await handle(request, ctx)
    if not request.topics:  # nothing left to wait for: answered at once, as Kafka does
        return _fetch_answer(ctx, refused, constants.TOPIC_AUTHORIZATION_FAILED)
    response = await handle(request, ctx)
    response.responses = list(response.responses) + _fetch_answer(ctx, refused,
                                                                  constants.TOPIC_AUTHORIZATION_FAILED).responses
    return response


def _fetch_answer(ctx: RequestContext, topics: list, error_code: int) -> Any:
    response_class = RESPONSES[ApiKey.Fetch]
    topic_class = response_class.FetchableTopicResponse
    partition_class = topic_class.PartitionData
    return response_class(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                          session_id=0, responses=[
        topic_class(topic=t.topic, topic_id=t.topic_id, partitions=[
            partition_class(partition_index=p.partition, error_code=error_code, high_watermark=-1,
                            last_stable_offset=-1, log_start_offset=-1, preferred_read_replica=-1, records=b'')
            for p in t.partitions]) for t in topics])


# -- offsets and metadata of topics --------------------------------------------------------------------------

POLICIES[ApiKey.ListOffsets] = _topics_policy('topics', 'topics', Op.DESCRIBE)
POLICIES[ApiKey.DeleteRecords] = _topics_policy('topics', 'topics', Op.DELETE)
POLICIES[ApiKey.CreatePartitions] = _topics_policy('topics', 'results', Op.ALTER)
POLICIES[ApiKey.DescribeProducers] = _topics_policy('topics', 'topics', Op.READ)
_leader_epoch_topics = _topics_policy('topics', 'topics', Op.DESCRIBE, name_field='topic')


@policy(ApiKey.OffsetForLeaderEpoch)
async def _offset_for_leader_epoch(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    if access.cluster(Op.CLUSTER_ACTION):  # replicas may ask about every topic
        return await handle(request, ctx)
    return await _leader_epoch_topics(request, ctx, access, handle)


@policy(ApiKey.Metadata)
async def _metadata(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    version = ctx.api_version
    all_topics = request.topics is None or (version == 0 and not request.topics)
    refused: list = []
    if not all_topics:
        refused = _split(request, 'topics', lambda t: (name := _topic_name(ctx, t)) is None
                         or access.topic(Op.DESCRIBE, name))
        creates = (version < 4 or request.allow_auto_topic_creation) and ctx.cluster.config.bool(
            'auto.create.topics.enable')
        if creates and not access.cluster(Op.CREATE):  # creating a topic needs CREATE on it or on the cluster
            view = ctx.cluster.view(ctx.broker_id)
            refused += _split(request, 'topics', lambda t: t.name is None or t.name in view.topics
                              or access.topic(Op.CREATE, t.name))
    kept = None if all_topics else {t.name for t in request.topics}
    response = await handle(request, ctx)
    if all_topics:
        response.topics = [t for t in response.topics if access.topic(Op.DESCRIBE, t.name)]
    elif version == 0:  # v0 cannot ask for no topic: an emptied request was answered for every topic
        response.topics = [t for t in response.topics if t.name in kept]
    topic_class = RESPONSES[ApiKey.Metadata].MetadataResponseTopic
    response.topics = list(response.topics) + [  # by id: the id, no name; by name: the name, no id (Kafka)
        topic_class(error_code=constants.TOPIC_AUTHORIZATION_FAILED, name=t.name,
                    topic_id=getattr(t, 'topic_id', None) if t.name is None else None, is_internal=False,
                    partitions=[]) for t in refused]
    if version >= 8 and request.include_topic_authorized_operations:
        for topic in response.topics:
            if topic.error_code != constants.TOPIC_AUTHORIZATION_FAILED and topic.name is not None:
                topic.authorized_operations = access.operations(_TOPIC, topic.name)
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        response.authorized_operations = _cluster_operations(access)
    return response


def _cluster_operations(access: Access) -> frozenset[int]:
    """The cluster's authorized operations as Kafka reports them: none (0) without DESCRIBE on the cluster."""
    return access.operations(_CLUSTER, CLUSTER_NAME) if access.cluster(Op.DESCRIBE) else frozenset()


@policy(ApiKey.DescribeTopicPartitions)
async def _describe_topic_partitions(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    all_topics = not request.topics
    refused = [] if all_topics else _split(request, 'topics', lambda t: access.topic(Op.DESCRIBE, t.name))
    response = await _handled_without(ctx, request, handle, 'topics', refused,
                                      constants.TOPIC_AUTHORIZATION_FAILED, 'topics')
    if all_topics:
        response.topics = [t for t in response.topics if access.topic(Op.DESCRIBE, t.name)]
    for topic in response.topics:
        if topic.error_code != constants.TOPIC_AUTHORIZATION_FAILED:
            # the one authorized-operations field kafka-python leaves an int bitfield
            topic.topic_authorized_operations = sum(1 << op for op in access.operations(_TOPIC, topic.name))
    return response


@policy(ApiKey.DescribeCluster)
async def _describe_cluster(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    response = await handle(request, ctx)
    if request.include_cluster_authorized_operations:
        response.authorized_operations = _cluster_operations(access)
    return response


# -- topics and configs --------------------------------------------------------------------------------------


@policy(ApiKey.CreateTopics)
async def _create_topics(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    if not access.cluster(Op.CREATE):
        refused = _split(request, 'topics', lambda t: access.topic(Op.CREATE, t.name))
    else:
        refused = []
    response = await _handled_without(ctx, request, handle, 'topics', refused,
                                      constants.TOPIC_AUTHORIZATION_FAILED, 'topics')
    if ctx.api_version >= 5:
        for result in response.topics:
            if result.error_code == constants.NONE and not access.topic(Op.DESCRIBE_CONFIGS, result.name):
                result.topic_config_error_code, result.configs = constants.TOPIC_AUTHORIZATION_FAILED, None
    return response


@policy(ApiKey.DeleteTopics)
async def _delete_topics(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    if ctx.api_version < 6:
        refused = _split(request, 'topic_names', lambda name: access.topic(Op.DELETE, name))
        return await _handled_without(ctx, request, handle, 'topic_names', refused,
                                      constants.TOPIC_AUTHORIZATION_FAILED, 'responses')

    def keep(topic: Any) -> bool:
        name = _topic_name(ctx, topic)
        if name is None:
            return True  # an unknown topic id: the handler answers UNKNOWN_TOPIC_ID
        if topic.name is None and not access.topic(Op.DESCRIBE, name):
            return False
        return access.topic(Op.DELETE, name)
    refused = _split(request, 'topics', keep)
    return await _handled_without(ctx, request, handle, 'topics', refused,
                                  constants.TOPIC_AUTHORIZATION_FAILED, 'responses')


def _config_resource_error(access: Access, resource: Any, operation: int) -> int:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on a config resource: on the topic, the cluster (brokers) or the group."""
    kind, name = resource.resource_type, resource.resource_name
    if kind == _CONFIG_TOPIC:
        return constants.NONE if access.topic(operation, name) else constants.TOPIC_AUTHORIZATION_FAILED
    if kind in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER):
        return constants.NONE if access.cluster(operation) else constants.CLUSTER_AUTHORIZATION_FAILED
    if kind == _CONFIG_GROUP:
        return constants.NONE if access.group(operation, name) else constants.GROUP_AUTHORIZATION_FAILED
    return constants.NONE  # the handler refuses the types it does not know


@policy(ApiKey.AlterConfigs, ApiKey.IncrementalAlterConfigs)
async def _alter_configs(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    errors = {id(resource): _config_resource_error(access, resource, Op.ALTER_CONFIGS)
              for resource in request.resources}
    refused = _split(request, 'resources', lambda resource: not errors[id(resource)])
    response = await handle(request, ctx)
    result_class = RESPONSES[ctx.api_key].AlterConfigsResourceResponse
    response.responses = list(response.responses) + [
        result_class(error_code=errors[id(r)], error_message=None, resource_type=r.resource_type,
                     resource_name=r.resource_name) for r in refused]
    return response


@policy(ApiKey.DescribeConfigs)
async def _describe_configs(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    errors = {id(resource): _config_resource_error(access, resource, Op.DESCRIBE_CONFIGS)
              for resource in request.resources}
    refused = _split(request, 'resources', lambda resource: not errors[id(resource)])
    result_class = RESPONSES[ApiKey.DescribeConfigs].DescribeConfigsResult
    refusals = [result_class(error_code=errors[id(r)], error_message=None, resource_type=r.resource_type,
                             resource_name=r.resource_name, configs=[]) for r in refused]
    response = (await handle(request, ctx)) if request.resources or not refused else RESPONSES[
        ApiKey.DescribeConfigs](version=ctx.api_version, throttle_time_ms=0, results=[])
    response.results = list(response.results) + refusals
    return response


POLICIES[ApiKey.AlterReplicaLogDirs] = _whole(_cluster(Op.ALTER))
POLICIES[ApiKey.DescribeLogDirs] = _whole(_cluster(Op.DESCRIBE))
POLICIES[ApiKey.AlterPartitionReassignments] = _whole(_cluster(Op.ALTER))
POLICIES[ApiKey.ListPartitionReassignments] = _whole(_cluster(Op.DESCRIBE))
POLICIES[ApiKey.DescribeQuorum] = _whole(_cluster(Op.DESCRIBE))
POLICIES[ApiKey.ListConfigResources] = _whole(_cluster(Op.DESCRIBE_CONFIGS))
POLICIES[ApiKey.UpdateFeatures] = _whole(_cluster(Op.ALTER))
POLICIES[ApiKey.DescribeClientQuotas] = _whole(_cluster(Op.DESCRIBE_CONFIGS))
POLICIES[ApiKey.AlterClientQuotas] = _whole(_cluster(Op.ALTER_CONFIGS))
POLICIES[ApiKey.DescribeUserScramCredentials] = _whole(_cluster(Op.DESCRIBE))
POLICIES[ApiKey.AlterUserScramCredentials] = _whole(_cluster(Op.ALTER))


@policy(ApiKey.ElectLeaders)
async def _elect_leaders(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    if access.cluster(Op.ALTER):
        return await handle(request, ctx)
    response_class = RESPONSES[ApiKey.ElectLeaders]
    result_class = response_class.ReplicaElectionResult
    return response_class(version=ctx.api_version, throttle_time_ms=0,
                          error_code=constants.CLUSTER_AUTHORIZATION_FAILED,
                          replica_election_results=[result_class(topic=t.topic, partition_result=[
                              result_class.PartitionResult(partition_id=p,
                                                           error_code=constants.CLUSTER_AUTHORIZATION_FAILED,
                                                           error_message=None) for p in t.partitions])
                              for t in request.topic_partitions or ()])


# -- groups ---------------------------------------------------------------------------------------------------

for _key in (ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.Heartbeat, ApiKey.LeaveGroup,
             ApiKey.ConsumerGroupHeartbeat):
    POLICIES[_key] = _whole(_group(Op.READ))
POLICIES[ApiKey.OffsetCommit] = _whole(_group(Op.READ), then=_topics_policy('topics', 'topics', Op.READ))
POLICIES[ApiKey.OffsetDelete] = _whole(_group(Op.DELETE), then=_topics_policy('topics', 'topics', Op.READ))
# KIP-253: a member asks its group coordinator about its topics' expansions, as it heartbeats and reads them
POLICIES[LEADER_EPOCHS_FOR_PARTITION_API_KEY] = _whole(_group(Op.READ),
                                                       then=_topics_policy('topics', 'topics', Op.DESCRIBE))


@policy(ApiKey.FindCoordinator)
async def _find_coordinator(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    key_type = request.key_type if ctx.api_version >= 1 else 0

    def error(key: str) -> int:
        if key_type == 1:
            allowed = access.transactional_id(Op.DESCRIBE, key)
            return constants.NONE if allowed else constants.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        allowed = key_type != 0 or access.group(Op.DESCRIBE, key)
        return constants.NONE if allowed else constants.GROUP_AUTHORIZATION_FAILED
    if ctx.api_version < 4:
        code = error(request.key)
        return _refused(ctx, request, code) if code else await handle(request, ctx)
    errors = {key: error(key) for key in request.coordinator_keys}
    coordinator = RESPONSES[ApiKey.FindCoordinator].Coordinator
    refusals = [coordinator(key=key, node_id=-1, host='', port=-1, error_code=code, error_message=None)
                for key, code in errors.items() if code]
    request.coordinator_keys = [key for key in request.coordinator_keys if not errors[key]]
    if not request.coordinator_keys:
        return RESPONSES[ApiKey.FindCoordinator](version=ctx.api_version, throttle_time_ms=0, coordinators=refusals)
    response = await handle(request, ctx)
    response.coordinators = list(response.coordinators) + refusals
    return response


def _described_groups(request_field: str, operations_since: int) -> Policy:
    """DescribeGroups and ConsumerGroupDescribe: DESCRIBE per group, and the authorized operations when asked for."""
    async def check(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
        refused = _split(request, request_field, lambda group: access.group(Op.DESCRIBE, group))
        response = await _handled_without(ctx, request, handle, request_field, refused,
                                          constants.GROUP_AUTHORIZATION_FAILED, 'groups')
        if ctx.api_version >= operations_since and request.include_authorized_operations:
            for group in response.groups:
                if group.error_code != constants.GROUP_AUTHORIZATION_FAILED:
                    group.authorized_operations = access.operations(_GROUP, group.group_id)
        return response
    return check


POLICIES[ApiKey.DescribeGroups] = _described_groups('groups', operations_since=3)
POLICIES[ApiKey.ConsumerGroupDescribe] = _described_groups('group_ids', operations_since=0)


@policy(ApiKey.ListGroups)
async def _list_groups(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    response = await handle(request, ctx)
    if not access.cluster(Op.DESCRIBE):
        response.groups = [g for g in response.groups if access.group(Op.DESCRIBE, g.group_id)]
    return response


@policy(ApiKey.DeleteGroups)
async def _delete_groups(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    refused = _split(request, 'groups_names', lambda group: access.group(Op.DELETE, group))
    return await _handled_without(ctx, request, handle, 'groups_names', refused,
                                  constants.GROUP_AUTHORIZATION_FAILED, 'results')



@policy(ApiKey.OffsetFetch)
async def _offset_fetch(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    response_class = RESPONSES[ApiKey.OffsetFetch]
    if ctx.api_version >= 8:
        refused_groups = {g.group_id for g in request.groups if not access.group(Op.DESCRIBE, g.group_id)}
        request.groups = [g for g in request.groups if g.group_id not in refused_groups]
        asked = {g.group_id: g.topics for g in request.groups}
        described = _topic_allowed(ctx, access, Op.DESCRIBE)  # v10 names topics by id
        for group in request.groups:
            group.topics = [t for t in group.topics or () if described(t)] if group.topics is not None else None
        response = await handle(request, ctx) if request.groups else response_class(
            version=ctx.api_version, throttle_time_ms=0, groups=[])
        group_class = response_class.OffsetFetchResponseGroup
        for group in response.groups:
            topic_class = group_class.OffsetFetchResponseTopics
            group.topics = _offset_fetch_topics(access, asked.get(group.group_id), group.topics, topic_class,
                                                topic_class.OffsetFetchResponsePartitions, described)
        response.groups = list(response.groups) + [group_class(group_id=g,
                                                               error_code=constants.GROUP_AUTHORIZATION_FAILED,
                                                               topics=[]) for g in refused_groups]
        return response
    if not access.group(Op.DESCRIBE, request.group_id):
        if ctx.api_version >= 2:
            return response_class(version=ctx.api_version, throttle_time_ms=0, topics=[],
                                  error_code=constants.GROUP_AUTHORIZATION_FAILED)
        topics, request.topics = request.topics, []
        response = response_class(version=ctx.api_version, throttle_time_ms=0, topics=[])
        return _with_refused_partitions(response, topics, constants.GROUP_AUTHORIZATION_FAILED)
    asked = request.topics
    if asked is not None:
        request.topics = [t for t in asked if access.topic(Op.DESCRIBE, t.name)]
    response = await handle(request, ctx)
    topic_class = response_class.OffsetFetchResponseTopic
    response.topics = _offset_fetch_topics(access, asked, response.topics, topic_class,
                                           topic_class.OffsetFetchResponsePartition)
    return response


def _offset_fetch_topics(access: Access, asked: list | None, answered: list, topic_class: Any,
                         partition_class: Any, described: Callable[[Any], bool] | None = None) -> list:
    """OffsetFetch's topics as Kafka answers them: all topics without the ones the principal may not DESCRIBE;
    named topics with those refused partition by partition (``described``: whether an asked entry is allowed)."""
    answered = [t for t in answered if t.name is None or access.topic(Op.DESCRIBE, t.name)]
    if asked is None:
        return answered
    described = described or (lambda t: access.topic(Op.DESCRIBE, t.name))
    return answered + [topic_class(name=t.name, **({'topic_id': t.topic_id} if hasattr(t, 'topic_id') else {}),
                                   partitions=[
        partition_class(partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata='',
                        error_code=constants.TOPIC_AUTHORIZATION_FAILED) for p in t.partition_indexes])
        for t in asked if not described(t)]


def _with_refused_partitions(response: Any, topics: list, error_code: int) -> Any:
    topic_class = RESPONSES[ApiKey.OffsetFetch].OffsetFetchResponseTopic
    partition_class = topic_class.OffsetFetchResponsePartition
    response.topics = [topic_class(name=t.name, partitions=[
        partition_class(partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata='',
                        error_code=error_code) for p in t.partition_indexes]) for t in topics or ()]
    return response


# -- producer ids and transactions ---------------------------------------------------------------------------


@policy(ApiKey.InitProducerId)
async def _init_producer_id(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    if request.transactional_id is not None:
        if not access.transactional_id(Op.WRITE, request.transactional_id):
            return _refused(ctx, request, constants.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not access.cluster(Op.IDEMPOTENT_WRITE) and not access.any_topic(Op.WRITE):
        return _refused(ctx, request, constants.CLUSTER_AUTHORIZATION_FAILED)
    return await handle(request, ctx)


POLICIES[ApiKey.EndTxn] = _whole(_transactional())


@policy(ApiKey.DescribeTransactions)
async def _describe_transactions(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    """DESCRIBE per transactional id; the answer leaves out the topics the principal may not DESCRIBE."""
    refused = _split(request, 'transactional_ids', lambda tid: access.transactional_id(Op.DESCRIBE, tid))
    response = await _handled_without(ctx, request, handle, 'transactional_ids', refused,
                                      constants.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 'transaction_states')
    for state in response.transaction_states:
        state.topics = [t for t in state.topics if access.topic(Op.DESCRIBE, t.topic)]
    return response


@policy(ApiKey.ListTransactions)
async def _list_transactions(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    response = await handle(request, ctx)
    response.transaction_states = [t for t in response.transaction_states
                                   if access.transactional_id(Op.DESCRIBE, t.transactional_id)]
    return response
POLICIES[ApiKey.AddOffsetsToTxn] = _whole(_both(_transactional(), _group(Op.READ)))
POLICIES[ApiKey.TxnOffsetCommit] = _whole(_both(_transactional(), _group(Op.READ)),
                                          then=_topics_policy('topics', 'topics', Op.READ))


@policy(ApiKey.AddPartitionsToTxn)
async def _add_partitions_to_txn(request: Any, ctx: RequestContext, access: Access, handle: Handle) -> Any:
    if ctx.api_version >= 4:  # brokers verifying transactions (KIP-890)
        return await handle(request, ctx) if access.cluster(Op.CLUSTER_ACTION) else RESPONSES[
            ApiKey.AddPartitionsToTxn](version=ctx.api_version, throttle_time_ms=0,
                                       error_code=constants.CLUSTER_AUTHORIZATION_FAILED,
                                       results_by_transaction=[])
    if not access.transactional_id(Op.WRITE, request.v3_and_below_transactional_id):
        return _refused(ctx, request, constants.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    refused = {t.name for t in request.v3_and_below_topics if not access.topic(Op.WRITE, t.name)}
    if not refused:
        return await handle(request, ctx)
    # Kafka adds none of the partitions: the others are OPERATION_NOT_ATTEMPTED
    response = _refused(ctx, request, constants.OPERATION_NOT_ATTEMPTED)
    for topic in response.results_by_topic_v3_and_below:
        if topic.name in refused:
            for partition in topic.results_by_partition:
                partition.partition_error_code = constants.TOPIC_AUTHORIZATION_FAILED
    return response
