"""ApiVersions and UpdateFeatures: the versions, extension features and Kafka features this cluster's brokers
advertise, and the finalized levels of Kafka's features (:mod:`kafka_kip_reference.broker.kafka_features`)."""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.features import supported_features_for_broker
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.advertised import api_version_entries
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.kafka_features import (
    GROUP_VERSION,
    TRANSACTION_VERSION,
    FeatureUpdate,
    UpgradeType,
)
from kafka_kip_reference.broker.registry import handles

ApiVersionsResponse = RESPONSES[ApiKey.ApiVersions]
UpdateFeaturesResponse = RESPONSES[ApiKey.UpdateFeatures]


def offered_kafka_features(ctx: RequestContext) -> list[str]:
    """Kafka's features this cluster offers: ``group.version`` only while it serves ConsumerGroupHeartbeat."""
    return [name for name in (GROUP_VERSION, TRANSACTION_VERSION)
            if name != GROUP_VERSION or ApiKey.ConsumerGroupHeartbeat in ctx.cluster.api_versions]


@handles(ApiKey.ApiVersions, 0, 5)  # v3+ SupportedFeatures; v5 ClusterId / NodeId (KIP-1242)
async def handle_api_versions(request: Any, ctx: RequestContext) -> Any:
    """A version the broker does not know is answered by the broker itself (v0 layout, UNSUPPORTED_VERSION).

    v5: a client naming the cluster and node it means to reach gets REBOOTSTRAP_REQUIRED from any other; naming
    only one of the two is INVALID_REQUEST (Kafka's ``ApiVersionsRequest.isValid``).
    """
    version = ctx.api_version
    state = ctx.cluster
    if version >= 5 and (request.cluster_id is None) != (request.node_id == -1):
        return ApiVersionsResponse(version=version, error_code=constants.INVALID_REQUEST, api_keys=[],
                                   throttle_time_ms=0)
    if version >= 5 and request.cluster_id is not None and (request.cluster_id, request.node_id) != (
            state.cluster_id, ctx.broker_id):
        return ApiVersionsResponse(version=version, error_code=constants.REBOOTSTRAP_REQUIRED, api_keys=[],
                                   throttle_time_ms=0)
    response = ApiVersionsResponse(version=version, error_code=constants.NONE,
                                   api_keys=api_version_entries(state.api_versions), throttle_time_ms=0)
    if version >= 3:
        offered = offered_kafka_features(ctx)
        features = state.kafka_features
        response.supported_features = supported_features_for_broker(sorted(state.features)) + [
            ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in features.supported(offered).items()]
        response.finalized_features_epoch = features.epoch
        response.finalized_features = [
            ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in features.finalized(offered).items()]
    return response


@handles(ApiKey.UpdateFeatures, 0, 2)  # v1 validate_only and upgrade_type; v2 no per-feature results
async def handle_update_features(request: Any, ctx: RequestContext) -> Any:
    """Kafka 4's controller: the updates apply all or none; the first refusal is the top-level error, and only a
    success lists every feature (v0-v1, each with the message ``'NONE'``, as Kafka 4.4 answers)."""
    version = ctx.api_version
    updates = [FeatureUpdate(u.feature, u.max_version_level, u.upgrade_type if version >= 1 else UpgradeType.UPGRADE)
               for u in request.feature_updates]
    result = ctx.cluster.kafka_features.update(updates, offered_kafka_features(ctx),
                                               validate_only=version >= 1 and request.validate_only,
                                               controller_id=ctx.cluster.controller_id)
    results = [UpdateFeaturesResponse.UpdatableFeatureResult(feature=u.name, error_code=constants.NONE,
                                                             error_message='NONE')
               for u in updates] if result.error == constants.NONE else []
    return UpdateFeaturesResponse(version=version, throttle_time_ms=0, error_code=result.error,
                                  error_message=result.message, results=results)
