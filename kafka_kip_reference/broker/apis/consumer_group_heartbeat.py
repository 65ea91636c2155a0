"""KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): adapters from the wire to
:class:`kafka_kip_reference.broker.consumer_group_coordinator.ConsumerGroupCoordinator` (the state machine is
:mod:`kafka_kip_reference.broker.consumer_groups`)."""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.features import KIP_253
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.apis.expansion import exchange_positions
from kafka_kip_reference.broker.apis.groups import CLIENT_HOST, GROUP_AUTHORIZED_OPERATIONS
from kafka_kip_reference.broker.consumer_groups import (
    Assignment,
    ConsumerGroup,
    ConsumerGroupError,
    HeartbeatRequest,
    assignment_from_wire,
)
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.registry import handles

#: ConsumerGroupDescribe v1 MemberType of a member using the classic protocol and of one using the consumer protocol.
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1
_UNAUTHORIZED_OPERATIONS = -2147483648  # the spec's default: operations not asked for


def heartbeat_request(request: Any, api_version: int, client_id: str | None) -> HeartbeatRequest:
    """A wire ConsumerGroupHeartbeatRequest of ``api_version`` in the coordinator's terms."""
    names = request.subscribed_topic_names
    return HeartbeatRequest(
        member_id=request.member_id, member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=tuple(names) if names is not None else None,
        subscribed_topic_regex=request.subscribed_topic_regex if api_version >= 1 else None,
        server_assignor=request.server_assignor, owned=assignment_from_wire(request.topic_partitions),
        client_id=client_id or '', client_host=CLIENT_HOST)


@handles(ApiKey.ConsumerGroupHeartbeat, 0, 1)
async def handle_consumer_group_heartbeat(request: Any, ctx: RequestContext) -> Any:
    """ConsumerGroupHeartbeat v0-1 (v1: SubscribedTopicRegex; the member generates its id); with ``kip.253``
    the position exchange of classic groups' Heartbeat v4 rides as its tagged fields (docs/PROTOCOL.md)."""
    response_class = RESPONSES[ApiKey.ConsumerGroupHeartbeat]
    heartbeat = heartbeat_request(request, ctx.api_version, ctx.client_id)
    try:
        result = ctx.groups.consumer.heartbeat(request.group_id, heartbeat, ctx.broker_id,
                                               member_id_required=ctx.api_version >= 1)
    except ConsumerGroupError as exc:
        return response_class(version=ctx.api_version, throttle_time_ms=0, error_code=exc.errno,
                              error_message=exc.message, member_id=None, member_epoch=-1, heartbeat_interval_ms=0)
    assignment = None
    if result.assignment is not None:
        assignment_class = response_class.Assignment
        topic_class = assignment_class.TopicPartitions
        assignment = assignment_class(topic_partitions=[
            topic_class(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(result.assignment.items(), key=lambda item: str(item[0]))])
    response = response_class(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                              error_message=None,
                              member_id=result.member_id, member_epoch=result.member_epoch,
                              heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)
    if result.member_epoch >= 0 and ctx.cluster.honours(KIP_253):  # a member that stays: KIP-253's exchange
        exchange_positions(request, response, ctx, result.member_id)
    return response


@handles(ApiKey.ConsumerGroupDescribe, 0, 1)
async def handle_consumer_group_describe(request: Any, ctx: RequestContext) -> Any:
    """ConsumerGroupDescribe v0-1 (v1: each member's type)."""
    response_class = RESPONSES[ApiKey.ConsumerGroupDescribe]
    group_class = response_class.DescribedGroup
    operations = GROUP_AUTHORIZED_OPERATIONS if request.include_authorized_operations else _UNAUTHORIZED_OPERATIONS
    described = []
    for group_id in request.group_ids:
        error, message, group = ctx.groups.consumer.describe(group_id, ctx.broker_id)
        if group is None:
            described.append(group_class(error_code=error, error_message=message, group_id=group_id, group_state='',
                                         group_epoch=-1, assignment_epoch=-1, assignor_name='', members=[],
                                         authorized_operations=operations))
            continue
        described.append(group_class(
            error_code=constants.NONE, error_message=None, group_id=group_id, group_state=group.state.value,
            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch, assignor_name=group.assignor_name,
            members=[_member(group_class.Member, group, m) for m in group.members.values()],
            authorized_operations=operations))
    return response_class(version=ctx.api_version, throttle_time_ms=0, groups=described)


def _member(member_class: Any, group: ConsumerGroup, member: Any) -> Any:
    return member_class(
        member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
        member_epoch=member.member_epoch, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        assignment=_assignment(member_class.Assignment, group, member.assigned),
        target_assignment=_assignment(member_class.Assignment, group, group.target.get(member.member_id, {})),
        member_type=CLASSIC_MEMBER_TYPE if member.classic is not None else CONSUMER_MEMBER_TYPE)


def _assignment(assignment_class: Any, group: ConsumerGroup, assignment: Assignment) -> Any:
    topic_class = assignment_class.TopicPartitions
    return assignment_class(topic_partitions=[
        topic_class(topic_id=topic_id, topic_name=name, partitions=partitions)
        for topic_id, name, partitions in group.describe_assignment(assignment)])
