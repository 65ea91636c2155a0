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
#: Kafka's ``group.version`` feature: level 1 makes clients choose KIP-848 consumer groups (the cluster finalizes
#: it whenever it advertises ConsumerGroupHeartbeat), as Kafka 4.x does.
GROUP_VERSION, GROUP_VERSION_LEVEL = 'group.version', 1


@handles(ApiKey.ApiVersions, 0, 4)  # v3+ SupportedFeatures
async def handle_api_versions(request, ctx: RequestContext):
    """A version the broker does not know is answered by the broker itself (v0 layout, UNSUPPORTED_VERSION)."""
    version = ctx.api_version
    state = ctx.cluster
    response = ApiVersionsResponse(version=version, error_code=NONE, api_keys=api_version_entries(state.api_versions),
                                   throttle_time_ms=0)
    if version >= 3:
        response.supported_features = supported_features_for_broker(sorted(state.features))
        if ApiKey.ConsumerGroupHeartbeat in state.api_versions:
            response.supported_features.append(ApiVersionsResponse.SupportedFeatureKey(
                name=GROUP_VERSION, min_version=0, max_version=GROUP_VERSION_LEVEL))
            response.finalized_features_epoch = 0
            response.finalized_features = [ApiVersionsResponse.FinalizedFeatureKey(
                name=GROUP_VERSION, max_version_level=GROUP_VERSION_LEVEL, min_version_level=GROUP_VERSION_LEVEL)]
    return response
