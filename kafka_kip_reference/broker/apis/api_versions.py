"""ApiVersions: the versions and extension features this cluster's brokers advertise."""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import NONE
from kafka_kip.protocol.features import supported_features_for_broker
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.advertised import api_version_entries
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.registry import handles

ApiVersionsResponse = RESPONSES[ApiKey.ApiVersions]


@handles(ApiKey.ApiVersions, 0, 4)  # v3+ SupportedFeatures
async def handle_api_versions(request, ctx: RequestContext):
    """A version the broker does not know is answered by the broker itself (v0 layout, UNSUPPORTED_VERSION)."""
    version = ctx.api_version
    state = ctx.cluster
    response = ApiVersionsResponse(version=version, error_code=NONE, api_keys=api_version_entries(state.api_versions),
                                   throttle_time_ms=0)
    if version >= 3:
        response.supported_features = supported_features_for_broker(sorted(state.features))
    return response
