"""DescribeClientQuotas and AlterClientQuotas over the cluster's :class:`~kafka_kip_reference.broker.client_quotas.ClientQuotas`,
with Kafka 4.4's filters, checks and errors (enforcement: :mod:`kafka_kip_reference.broker.quota_throttling`)."""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.client_quotas import Alteration
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.model import ClusterError
from kafka_kip_reference.broker.registry import handles

DescribeClientQuotasResponse = RESPONSES[ApiKey.DescribeClientQuotas]
_Described = DescribeClientQuotasResponse.EntryData
AlterClientQuotasResponse = RESPONSES[ApiKey.AlterClientQuotas]
_Altered = AlterClientQuotasResponse.EntryData


@handles(ApiKey.DescribeClientQuotas, 0, 1)
async def handle_describe_client_quotas(request: Any, ctx: RequestContext) -> Any:
    try:
        found = ctx.cluster.client_quotas.describe(
            [(c.entity_type, c.match_type, c.match) for c in request.components], request.strict)
    except ClusterError as exc:
        return DescribeClientQuotasResponse(version=ctx.api_version, throttle_time_ms=0, error_code=exc.error_code,
                                            error_message=str(exc), entries=None)
    return DescribeClientQuotasResponse(version=ctx.api_version, throttle_time_ms=0,
                                        error_code=constants.NONE, error_message=None, entries=[
        _Described(entity=[_Described.EntityData(entity_type=t, entity_name=name) for t, name in entity],
                   values=[_Described.ValueData(key=key, value=value) for key, value in values.items()])
        for entity, values in found])


@handles(ApiKey.AlterClientQuotas, 0, 1)
async def handle_alter_client_quotas(request: Any, ctx: RequestContext) -> Any:
    results = ctx.cluster.client_quotas.alter(
        [Alteration({e.entity_type: e.entity_name for e in entry.entity},
                    [(op.key, None if op.remove else op.value) for op in entry.ops]) for entry in request.entries],
        request.validate_only)
    if not request.validate_only and any(error == constants.NONE for _, error, _ in results):
        ctx.cluster.record_change('client quotas altered')
    return AlterClientQuotasResponse(version=ctx.api_version, throttle_time_ms=0, entries=[
        _Altered(error_code=error, error_message=message,
                 entity=[_Altered.EntityData(entity_type=t, entity_name=name) for t, name in entity.items()])
        for entity, error, message in results])
