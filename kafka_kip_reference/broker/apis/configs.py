"""DescribeConfigs and ListConfigResources: topic and broker configs with Kafka's sources, types and synonyms."""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.apis.replicas import log_dir
from kafka_kip_reference.broker.config import ConfigEntry, ConfigSource, ConfigType
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.model import ClusterError
from kafka_kip_reference.broker.registry import handles

DescribeConfigsResponse = RESPONSES[ApiKey.DescribeConfigs]
_ConfigResult = DescribeConfigsResponse.DescribeConfigsResult
_Config = _ConfigResult.DescribeConfigsResourceResult

TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 2, 4, 8, 16, 32
LIST_CONFIG_RESOURCE_TYPES = (TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, CLIENT_METRICS_RESOURCE,
                              GROUP_RESOURCE)


@handles(ApiKey.DescribeConfigs, 1, 4)
async def handle_describe_configs(request: Any, ctx: RequestContext) -> Any:
    """A topic's configs, or this broker's ('' names the cluster-wide dynamic defaults)."""
    results = []
    for resource in request.resources:
        result = _ConfigResult(error_code=constants.NONE, error_message=None,
                               resource_type=resource.resource_type,
                               resource_name=resource.resource_name, configs=[])
        results.append(result)
        try:
            entries = _config_entries(ctx, resource.resource_type, resource.resource_name)
        except ClusterError as exc:
            result.error_code, result.error_message = exc.error_code, str(exc)
            continue
        keys = resource.configuration_keys
        result.configs = [_config(entry, request.include_synonyms) for entry in entries
                          if keys is None or entry.name in keys]
    return DescribeConfigsResponse(version=ctx.api_version, throttle_time_ms=0, results=results)


def _config(entry: ConfigEntry, include_synonyms: bool) -> Any:
    synonym_class = _Config.DescribeConfigsSynonym
    return _Config(name=entry.name, value=entry.value, read_only=entry.read_only, config_source=entry.source,
                   is_default=entry.source == ConfigSource.DEFAULT_CONFIG, is_sensitive=False,
                   synonyms=[synonym_class(name=name, value=value, source=source)
                             for name, value, source in entry.synonyms] if include_synonyms else [],
                   config_type=entry.type, documentation=None)


def _config_entries(ctx: RequestContext, resource_type: int, name: str) -> list[ConfigEntry]:
    config = ctx.cluster.config
    if resource_type == TOPIC_RESOURCE:
        topic = ctx.cluster.view(ctx.broker_id).topics.get(name)
        if topic is None:
            raise ClusterError(constants.UNKNOWN_TOPIC_OR_PARTITION, f'unknown topic {name!r}')
        return config.for_broker(ctx.broker_id).topic_entries(topic.topic.configs)
    if resource_type == BROKER_RESOURCE:
        if name == '':  # the cluster-wide dynamic defaults
            return [entry for entry in config.broker_entries() if entry.name in config.dynamic(None)]
        if name != str(ctx.broker_id):
            raise ClusterError(constants.INVALID_REQUEST,
                               f'Unexpected broker id, expected {ctx.broker_id} or empty string, '
                               f'but received {name}')
        return sorted(config.broker_entries(ctx.broker_id) + _node_entries(ctx))
    raise ClusterError(constants.INVALID_REQUEST, f'unsupported config resource type {resource_type}')


def _node_entries(ctx: RequestContext) -> list[ConfigEntry]:
    """What this broker's server.properties names about the node itself (all static)."""
    address = ctx.cluster.broker(ctx.broker_id)
    listener = f'{"SASL_PLAINTEXT" if ctx.cluster.users else "PLAINTEXT"}://{address.host}:{address.port}'
    node = {'broker.id': (str(ctx.broker_id), ConfigType.INT, True),
            'node.id': (str(ctx.broker_id), ConfigType.INT, True),
            'listeners': (listener, ConfigType.LIST, False),
            'advertised.listeners': (listener, ConfigType.LIST, True),
            'log.dirs': (log_dir(ctx.broker_id), ConfigType.LIST, True),
            'process.roles': ('broker,controller', ConfigType.LIST, True)}
    static = ConfigSource.STATIC_BROKER_CONFIG
    return [ConfigEntry(name, value, static, config_type, read_only, [(name, value, static)])
            for name, (value, config_type, read_only) in node.items()]


@handles(ApiKey.ListConfigResources, 0, 1)
async def handle_list_config_resources(request: Any, ctx: RequestContext) -> Any:
    """v0 lists client-metrics resources (there are none); v1 the resources of the types asked for (all if
    none): every broker's logger and configs, every topic; groups and client metrics have no configs here."""
    response_class = RESPONSES[ApiKey.ListConfigResources]
    types = (list(request.resource_types) or list(LIST_CONFIG_RESOURCE_TYPES)) if ctx.api_version >= 1 \
        else [CLIENT_METRICS_RESOURCE]
    if any(t not in LIST_CONFIG_RESOURCE_TYPES for t in types):
        return response_class(version=ctx.api_version, throttle_time_ms=0,
                              error_code=constants.UNSUPPORTED_VERSION, config_resources=[])
    brokers = [str(b) for b in ctx.cluster.live_broker_ids()]
    names = {BROKER_LOGGER_RESOURCE: brokers, BROKER_RESOURCE: brokers,
             TOPIC_RESOURCE: sorted(ctx.cluster.view(ctx.broker_id).topics)}
    resource_class = response_class.ConfigResource
    return response_class(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                          config_resources=[
        resource_class(resource_name=name, resource_type=kind)
        for kind in (BROKER_LOGGER_RESOURCE, BROKER_RESOURCE, TOPIC_RESOURCE) if kind in types
        for name in names[kind]])
