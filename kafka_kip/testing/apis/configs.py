"""DescribeConfigs: a topic's configs and this broker's, with Kafka's sources and types."""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.messages import RESPONSES
from kafka_kip.testing.codes import INVALID_REQUEST, NONE, UNKNOWN_TOPIC_OR_PARTITION
from kafka_kip.testing.config import BROKER_CONFIGS, ConfigSource, ConfigType
from kafka_kip.testing.context import RequestContext
from kafka_kip.testing.model import ClusterError, MetadataImage
from kafka_kip.testing.registry import handles

DescribeConfigsResponse = RESPONSES[ApiKey.DescribeConfigs]
_ConfigResult = DescribeConfigsResponse.DescribeConfigsResult
_Config = _ConfigResult.DescribeConfigsResourceResult

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@handles(ApiKey.DescribeConfigs, 1, 4)
async def handle_describe_configs(request, ctx: RequestContext):
    view = ctx.cluster.view(ctx.broker_id)
    results = []
    for resource in request.resources:
        result = _ConfigResult(error_code=NONE, error_message=None, resource_type=resource.resource_type,
                               resource_name=resource.resource_name, configs=[])
        results.append(result)
        try:
            entries = _config_entries(ctx, view, resource.resource_type, resource.resource_name)
        except ClusterError as exc:
            result.error_code, result.error_message = exc.error_code, str(exc)
            continue
        keys = resource.configuration_keys
        result.configs = [
            _Config(name=name, value=value, read_only=read_only, config_source=source,
                    is_default=source == ConfigSource.DEFAULT_CONFIG, is_sensitive=False, synonyms=[],
                    config_type=config_type, documentation=None)
            for name, value, source, config_type, read_only in entries if keys is None or name in keys]
    return DescribeConfigsResponse(version=ctx.api_version, throttle_time_ms=0, results=results)


def _config_entries(ctx: RequestContext, view: MetadataImage, resource_type: int,
                    name: str) -> list[tuple[str, str | None, ConfigSource, ConfigType, bool]]:
    """(name, value, source, type, read only) of a topic's or this broker's configs, as Kafka describes them."""
    config = ctx.cluster.config
    if resource_type == TOPIC_RESOURCE:
        topic = view.topics.get(name)
        if topic is None:
            raise ClusterError(UNKNOWN_TOPIC_OR_PARTITION, f'unknown topic {name!r}')
        return [(key, value, source, config_type, False)
                for key, value, source, config_type in config.topic_entries(topic.topic.configs)]
    if resource_type == BROKER_RESOURCE:
        if name not in ('', str(ctx.broker_id)):
            raise ClusterError(INVALID_REQUEST, f'broker {ctx.broker_id} cannot describe broker {name!r}')
        own = [('broker.id', str(ctx.broker_id), ConfigSource.STATIC_BROKER_CONFIG, ConfigType.INT, True)]
        return sorted(own + [(key, value, source, BROKER_CONFIGS[key].type, True)
                             for key, value, source in config.entries()])
    raise ClusterError(INVALID_REQUEST, f'unsupported config resource type {resource_type}')
