"""CreateAcls, DescribeAcls and DeleteAcls over the cluster's authorizer (:mod:`kafka_kip_reference.broker.acl`), as Kafka's
``AclApis``: SECURITY_DISABLED without an authorizer; creating and deleting need ALTER on the cluster, describing
needs DESCRIBE (CLUSTER_AUTHORIZATION_FAILED otherwise); an ACL Kafka would not store is refused with
INVALID_REQUEST and its reason."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.acl import ACLOperation
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.acl import CLUSTER_NAME, AclBinding, AclFilter, InvalidAcl
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.registry import handles

CreateAclsResponse = RESPONSES[ApiKey.CreateAcls]
DescribeAclsResponse = RESPONSES[ApiKey.DescribeAcls]
DeleteAclsResponse = RESPONSES[ApiKey.DeleteAcls]
_CLUSTER = 4


def _refusal(ctx: RequestContext, operation: int) -> tuple[int, str | None]:
    """``(error, message)`` refusing an ACL request: no authorizer, or ``operation`` not allowed on the cluster."""
    authorizer = ctx.cluster.authorizer
    if authorizer is None:
        return constants.SECURITY_DISABLED, 'No Authorizer is configured on the broker'
    if not authorizer.authorize(ctx.kafka_principal, ctx.session.host, operation, _CLUSTER, CLUSTER_NAME):
        return constants.CLUSTER_AUTHORIZATION_FAILED, None
    return constants.NONE, None


@handles(ApiKey.CreateAcls, 1, 3)  # Kafka 4 dropped v0
async def handle_create_acls(request: Any, ctx: RequestContext) -> Any:
    error, message = _refusal(ctx, ACLOperation.ALTER)
    result_class = CreateAclsResponse.AclCreationResult
    results = []
    for creation in request.creations:
        if not error:
            acl = AclBinding(creation.resource_type, creation.resource_name, creation.resource_pattern_type,
                             creation.principal, creation.host, creation.operation, creation.permission_type)
            try:
                ctx.cluster.authorizer.create(acl)
            except InvalidAcl as exc:
                results.append(result_class(error_code=constants.INVALID_REQUEST, error_message=str(exc)))
                continue
        results.append(result_class(error_code=error, error_message=message))
    return CreateAclsResponse(version=ctx.api_version, throttle_time_ms=0, results=results)


def _filter(request: Any) -> AclFilter:
    """The ACL filter of a DescribeAcls request or a DeleteAcls filter entry."""
    return AclFilter(request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
                     request.principal_filter, request.host_filter, request.operation, request.permission_type)


@handles(ApiKey.DescribeAcls, 1, 3)
async def handle_describe_acls(request: Any, ctx: RequestContext) -> Any:
    error, message = _refusal(ctx, ACLOperation.DESCRIBE)
    acl_filter = _filter(request)
    if not error and acl_filter.invalid():
        error, message = constants.INVALID_REQUEST, acl_filter.invalid()
    if error:
        return DescribeAclsResponse(version=ctx.api_version, throttle_time_ms=0, error_code=error,
                                    error_message=message, resources=[])
    return DescribeAclsResponse(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                                error_message=None,
                                resources=_by_resource(ctx.cluster.authorizer.acls(acl_filter)))


def _by_resource(acls: Iterable[AclBinding]) -> list:
    """DescribeAcls' resources: the ACLs grouped by resource pattern, in the order the patterns first appear."""
    resource_class = DescribeAclsResponse.DescribeAclsResource
    grouped: dict[tuple[int, str, int], list] = {}
    for acl in acls:
        grouped.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            resource_class.AclDescription(principal=acl.principal, host=acl.host, operation=acl.operation,
                                          permission_type=acl.permission))
    return [resource_class(resource_type=kind, resource_name=name, pattern_type=pattern, acls=entries)
            for (kind, name, pattern), entries in grouped.items()]


@handles(ApiKey.DeleteAcls, 1, 3)
async def handle_delete_acls(request: Any, ctx: RequestContext) -> Any:
    error, message = _refusal(ctx, ACLOperation.ALTER)
    result_class = DeleteAclsResponse.DeleteAclsFilterResult
    matching_class = result_class.DeleteAclsMatchingAcl
    results = []
    for entry in request.filters:
        acl_filter = _filter(entry)
        if not error and acl_filter.invalid():
            results.append(result_class(error_code=constants.INVALID_REQUEST,
                                        error_message=acl_filter.invalid(), matching_acls=[]))
            continue
        removed = [] if error else ctx.cluster.authorizer.delete(acl_filter)
        results.append(result_class(error_code=error, error_message=message, matching_acls=[
            matching_class(error_code=constants.NONE, error_message=None, resource_type=acl.resource_type,
                           resource_name=acl.resource_name, pattern_type=acl.pattern_type, principal=acl.principal,
                           host=acl.host, operation=acl.operation, permission_type=acl.permission)
            for acl in removed]))
    return DeleteAclsResponse(version=ctx.api_version, throttle_time_ms=0, filter_results=results)
