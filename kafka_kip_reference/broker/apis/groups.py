"""The group APIs: thin adapters from the wire to :class:`kafka_kip_reference.broker.groups.GroupCoordinator`.

Each handler turns a request of any version into the coordinator's terms and its answer into the response
of that version; the group state machine, the commit checks and the coordinator placement live there.
"""
from __future__ import annotations

from typing import Any

from kafka.admin import ResourceType
from kafka.errors import (
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    InvalidRequestError,
    UnstableOffsetCommitError,
)
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.features import KIP_232, KIP_253
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.acl import all_operations
from kafka_kip_reference.broker.apis.expansion import exchange_positions
from kafka_kip_reference.broker.committed_offsets import CommittedOffset
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.groups import GroupState, JoinParams, OffsetCommit
from kafka_kip_reference.broker.internal_topics import (
    CONSUMER_OFFSETS,
    TRANSACTION_STATE,
    ensure_internal_topic,
)
from kafka_kip_reference.broker.registry import handles

#: Kafka's CoordinatorType key types of FindCoordinator.
GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1
#: DescribeGroups authorized operations of a group without an authorizer: all of Kafka 4.4's for groups.
GROUP_AUTHORIZED_OPERATIONS = all_operations(ResourceType.GROUP)
#: Listeners are bound to 127.0.0.1; Kafka reports the client host in InetAddress form.
CLIENT_HOST = '/127.0.0.1'
_NO_NODE = (-1, '', -1)


# -- FindCoordinator ----------------------------------------------------------------------------------


@handles(ApiKey.FindCoordinator, 0, 6)
async def handle_find_coordinator(request: Any, ctx: RequestContext) -> Any:
    """FindCoordinator v0-v3 (one key) and v4+ (batched keys)."""
    response_class = RESPONSES[ApiKey.FindCoordinator]
    version = ctx.api_version
    key_type = request.key_type if version >= 1 else GROUP_KEY_TYPE
    if version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, node = _coordinator(ctx, key, key_type)
            coordinators.append(response_class.Coordinator(key=key, node_id=node[0], host=node[1], port=node[2],
                                                            error_code=error, error_message=message))
        return response_class(version=version, throttle_time_ms=0, coordinators=coordinators)
    error, message, node = _coordinator(ctx, request.key, key_type)
    return response_class(version=version, throttle_time_ms=0, error_code=error, error_message=message,
                          node_id=node[0], host=node[1], port=node[2])


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None, tuple[int, str, int]]:
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        return InvalidRequestError.errno, f'Unsupported coordinator key type {key_type}.', _NO_NODE
    broker_id = ctx.cluster.coordinator_for(key)
    if broker_id < 0:
        return CoordinatorNotAvailableError.errno, 'No broker is running.', _NO_NODE
    if ensure_internal_topic(ctx.cluster, CONSUMER_OFFSETS if key_type == GROUP_KEY_TYPE else TRANSACTION_STATE):
        return CoordinatorNotAvailableError.errno, 'The coordinator is not available.', _NO_NODE
    address = ctx.cluster.broker(broker_id)
    return constants.NONE, None, (broker_id, address.host, address.port)


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ---------------------------------------------------


@handles(ApiKey.JoinGroup, 0, 9)
async def handle_join_group(request: Any, ctx: RequestContext) -> Any:
    """JoinGroup; parks until the join phase of the rebalance completes."""
    version = ctx.api_version
    params = JoinParams(
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=ctx.client_id or '',
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=version >= 4)
    result = await ctx.groups.join(request.group_id, params, ctx.broker_id)
    response_class = RESPONSES[ApiKey.JoinGroup]
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ''  # not nullable before v7
    return response_class(
        version=version, throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader_id,
        skip_assignment=result.skip_assignment, member_id=result.member_id,
        members=[response_class.JoinGroupResponseMember(member_id=member_id, group_instance_id=instance,
                                                        metadata=metadata)
                 for member_id, instance, metadata in result.members])


@handles(ApiKey.SyncGroup, 0, 5)
async def handle_sync_group(request: Any, ctx: RequestContext) -> Any:
    """SyncGroup; a follower parks until the leader's assignment arrives."""
    version = ctx.api_version
    v5 = version >= 5
    result = await ctx.groups.sync(
        request.group_id, request.member_id, request.group_instance_id if version >= 3 else None,
        request.generation_id, request.protocol_type if v5 else None, request.protocol_name if v5 else None,
        {a.member_id: bytes(a.assignment) for a in request.assignments}, ctx.broker_id)
    return RESPONSES[ApiKey.SyncGroup](version=version, throttle_time_ms=0, error_code=result.error,
                                       protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                                       assignment=result.assignment)


@handles(ApiKey.Heartbeat, 0, 4)
async def handle_heartbeat(request: Any, ctx: RequestContext) -> Any:
    """Heartbeat; v4 carries KIP-253's position exchange (:mod:`kafka_kip_reference.broker.apis.expansion`)."""
    error = ctx.groups.heartbeat(request.group_id, request.member_id,
                                 request.group_instance_id if ctx.api_version >= 3 else None,
                                 request.generation_id, ctx.broker_id)
    response = RESPONSES[ApiKey.Heartbeat](version=ctx.api_version, throttle_time_ms=0, error_code=error)
    if error == constants.NONE and ctx.api_version >= 4 and ctx.cluster.honours(KIP_253):
        exchange_positions(request, response, ctx, request.member_id)
    return response


@handles(ApiKey.LeaveGroup, 0, 5)
async def handle_leave_group(request: Any, ctx: RequestContext) -> Any:
    """LeaveGroup v0-v2 (one member id) and v3+ (batched members, static ones by instance id)."""
    version = ctx.api_version
    response_class = RESPONSES[ApiKey.LeaveGroup]
    if version >= 3:
        identities = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        identities = [(request.member_id, None)]
    group_error, errors = ctx.groups.leave(request.group_id, identities, ctx.broker_id)
    if group_error:
        return response_class(version=version, throttle_time_ms=0, error_code=group_error, members=[])
    if version < 3:
        return response_class(version=version, throttle_time_ms=0, error_code=errors[0])
    return response_class(
        version=version, throttle_time_ms=0, error_code=constants.NONE,
        members=[response_class.MemberResponse(member_id=member_id, group_instance_id=instance, error_code=error)
                 for (member_id, instance), error in zip(identities, errors, strict=True)])


# -- OffsetCommit / OffsetFetch -----------------------------------------------------------------------


@handles(ApiKey.OffsetCommit, 2, 10)
async def handle_offset_commit(request: Any, ctx: RequestContext) -> Any:
    """OffsetCommit; v8+ carries the KIP-232 partition_epoch / commit_timestamp tags; v10 names topics by id
    (UNKNOWN_TOPIC_ID for an id no topic has)."""
    names = [topic_name(ctx, topic) for topic in request.topics]
    commits = [OffsetCommit(name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                            p.committed_metadata, p.partition_epoch, p.commit_timestamp)
               for topic, name in zip(request.topics, names, strict=True) if name is not None
               for p in topic.partitions]
    errors = iter(ctx.groups.commit_offsets(
        request.group_id, request.member_id, request.group_instance_id if ctx.api_version >= 7 else None,
        request.generation_id_or_member_epoch, commits, ctx.broker_id,
        unknown_group_not_found=ctx.api_version >= 9, kip_232=ctx.cluster.honours(KIP_232)))
    topic_class = RESPONSES[ApiKey.OffsetCommit].OffsetCommitResponseTopic
    partition_class = topic_class.OffsetCommitResponsePartition
    topics = [topic_class(name=name, topic_id=topic.topic_id, partitions=[
        partition_class(partition_index=p.partition_index,
                        error_code=next(errors) if name is not None else constants.UNKNOWN_TOPIC_ID) for p in topic.partitions])
        for topic, name in zip(request.topics, names, strict=True)]
    return RESPONSES[ApiKey.OffsetCommit](version=ctx.api_version, throttle_time_ms=0, topics=topics)


def topic_name(ctx: RequestContext, topic: Any, ids_from: int = 10) -> str | None:
    """The topic a group request's topic entry names: by ``topic_id`` from version ``ids_from`` on (OffsetCommit and
    OffsetFetch v10, TxnOffsetCommit v6), None when no topic has it."""
    if ctx.api_version >= ids_from:
        return ctx.cluster.topic_name(topic.topic_id)
    return topic.name


@handles(ApiKey.OffsetFetch, 1, 10)
async def handle_offset_fetch(request: Any, ctx: RequestContext) -> Any:
    """OffsetFetch v1-v7 (one group) and v8+ (batched groups); KIP-232 fields on v6+; v10 topics by id."""
    version = ctx.api_version
    response_class = RESPONSES[ApiKey.OffsetFetch]
    if version >= 8:
        group_class = response_class.OffsetFetchResponseGroup
        topic_class = group_class.OffsetFetchResponseTopics
        groups = []
        for wanted in request.groups:
            member = (wanted.member_id, wanted.member_epoch) if version >= 9 else (None, -1)
            error, topics = _fetch_offsets(ctx, wanted.group_id, wanted.topics, topic_class,
                                           topic_class.OffsetFetchResponsePartitions, request.require_stable, member)
            groups.append(group_class(group_id=wanted.group_id, topics=topics, error_code=error))
        return response_class(version=version, throttle_time_ms=0, groups=groups)
    topic_class = response_class.OffsetFetchResponseTopic
    partition_class = topic_class.OffsetFetchResponsePartition
    error, topics = _fetch_offsets(ctx, request.group_id, request.topics, topic_class, partition_class,
                                   version >= 7 and request.require_stable)
    if error and version < 2:
        # No top-level error code before v2: every partition carries it.
        topics = [topic_class(name=t.name, partitions=[
            partition_class(partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata='',
                            error_code=error) for p in t.partition_indexes]) for t in request.topics]
    return response_class(version=version, throttle_time_ms=0, topics=topics, error_code=error)


def _fetch_offsets(ctx: RequestContext, group_id: str, wanted: list[Any] | None, topic_class: type,
                   partition_class: type, require_stable: bool,
                   member: tuple[str | None, int] = (None, -1)) -> tuple[int, list[Any]]:
    """(group error, topics) for one group; ``wanted`` None means every committed offset.

    With ``require_stable`` (v7+) a partition whose offset an open transaction holds is UNSTABLE_OFFSET_COMMIT;
    ``member`` (v9+: member id, member epoch) is checked by a KIP-848 group (STALE_MEMBER_EPOCH).
    """
    error, offsets = ctx.groups.committed(group_id, ctx.broker_id, *member)
    if error:
        return error, []
    committed = offsets.all() if offsets is not None else {}
    by_id = ctx.api_version >= 10
    if wanted is None:
        wanted_partitions = [(topic, ctx.cluster.topic_id(topic) if by_id else None, list(by_partition))
                             for topic, by_partition in committed.items()]
        if by_id:  # a topic no longer there has no id to name it by
            wanted_partitions = [entry for entry in wanted_partitions if entry[1] is not None]
    else:
        wanted_partitions = [(topic_name(ctx, t), getattr(t, 'topic_id', None), list(t.partition_indexes))
                             for t in wanted]
    topics = []
    for topic, topic_id, partitions in wanted_partitions:
        rows = []
        for partition in partitions:
            if topic is None:
                rows.append(_committed_row(partition_class, partition, None, constants.UNKNOWN_TOPIC_ID))
            elif require_stable and offsets is not None and offsets.is_pending(topic, partition):
                rows.append(_committed_row(partition_class, partition, None, UnstableOffsetCommitError.errno))
            else:
                rows.append(_committed_row(partition_class, partition, committed.get(topic, {}).get(partition)))
        ids = {'topic_id': topic_id} if by_id else {}
        topics.append(topic_class(name=topic, partitions=rows, **ids))
    return constants.NONE, topics


def _committed_row(partition_class: type, partition: int, offset: CommittedOffset | None,
                   error: int = constants.NONE) -> Any:
    if offset is None:
        return partition_class(partition_index=partition, committed_offset=-1, committed_leader_epoch=-1,
                               metadata='', error_code=error)
    # partition_epoch and commit_timestamp are -1 (not sent) unless a KIP-232 commit stored them
    return partition_class(partition_index=partition, committed_offset=offset.offset,
                           committed_leader_epoch=offset.leader_epoch, metadata=offset.metadata,
                           error_code=constants.NONE,
                           partition_epoch=offset.partition_epoch, commit_timestamp=offset.commit_timestamp)


# -- DescribeGroups / ListGroups / DeleteGroups -------------------------------------------------------


@handles(ApiKey.DescribeGroups, 0, 6)
async def handle_describe_groups(request: Any, ctx: RequestContext) -> Any:
    """DescribeGroups (v6+: GROUP_ID_NOT_FOUND for an unknown group, as Kafka 4)."""
    version = ctx.api_version
    response_class = RESPONSES[ApiKey.DescribeGroups]
    group_class = response_class.DescribedGroup
    member_class = group_class.DescribedGroupMember
    operations = GROUP_AUTHORIZED_OPERATIONS if version >= 3 and request.include_authorized_operations else None
    described = []
    for group_id in request.groups:
        error, group = ctx.groups.describe(group_id, ctx.broker_id)
        message = None
        if group is not None and group.group_type != 'classic':
            group = None  # KIP-848 groups are described by ConsumerGroupDescribe
            if version >= 6:
                error, message = GroupIdNotFoundError.errno, f'Group {group_id} is not a classic group.'
        elif not error and group is None and version >= 6:
            error, message = GroupIdNotFoundError.errno, f'Group {group_id} not found.'
        if group is None:
            described.append(group_class(
                error_code=error, error_message=message, group_id=group_id, group_state=GroupState.DEAD.value,
                protocol_type='', protocol_data='', members=[], authorized_operations=operations))
            continue
        stable = group.state is GroupState.STABLE
        members = [member_class(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=CLIENT_HOST, member_metadata=m.metadata(group.protocol_name or '') if stable else b'',
            member_assignment=m.assignment if stable else b'') for m in group.members.values()]
        described.append(group_class(
            error_code=constants.NONE, error_message=None, group_id=group_id, group_state=group.state.value,
            protocol_type=group.protocol_type or '', protocol_data=(group.protocol_name or '') if stable else '',
            members=members, authorized_operations=operations))
    return response_class(version=version, throttle_time_ms=0, groups=described)


@handles(ApiKey.ListGroups, 0, 5)
async def handle_list_groups(request: Any, ctx: RequestContext) -> Any:
    """ListGroups: the groups this broker coordinates (v4 state filter, v5 type filter)."""
    version = ctx.api_version
    response_class = RESPONSES[ApiKey.ListGroups]
    states = types = None
    if version >= 4 and request.states_filter:
        states = {state.lower() for state in request.states_filter}
    if version >= 5 and request.types_filter:
        types = {kind.lower() for kind in request.types_filter}
    listed = [response_class.ListedGroup(group_id=group.group_id, protocol_type=group.protocol_type or '',
                                         group_state=group.state.value, group_type=group.group_type)
              for group in ctx.groups.coordinated_by(ctx.broker_id)
              if (states is None or group.state.value.lower() in states)
              and (types is None or group.group_type in types)]
    return response_class(version=version, throttle_time_ms=0, error_code=constants.NONE, groups=listed)


@handles(ApiKey.DeleteGroups, 0, 3)
async def handle_delete_groups(request: Any, ctx: RequestContext) -> Any:
    """DeleteGroups: only groups without members can be deleted (with their offsets). v3's ``error_message`` is
    null, as Kafka 4.4 answers these errors."""
    response_class = RESPONSES[ApiKey.DeleteGroups]
    return response_class(version=ctx.api_version, throttle_time_ms=0, results=[
        response_class.DeletableGroupResult(group_id=group_id, error_code=ctx.groups.delete(group_id, ctx.broker_id),
                                            error_message=None)
        for group_id in request.groups_names])
