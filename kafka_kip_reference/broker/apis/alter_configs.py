"""AlterConfigs (legacy: a resource's dynamic configs replaced whole) and IncrementalAlterConfigs (SET, DELETE,
APPEND, SUBTRACT per key), for topics and brokers, with Kafka 4's checks, errors and messages.

Topic configs take effect at once (``max.message.bytes``, ``min.insync.replicas``, ``cleanup.policy``'s key
requirement, the timestamp rules, ``segment.*`` at the next append); ``retention.*`` and ``cleanup.policy`` at the
next retention check (:mod:`kafka_kip_reference.broker.retention`). Broker resources take Kafka's dynamic broker configs, for the cluster-wide default (``''``) or
the broker answering (its id): a broker's own take effect on that broker only, as on Kafka (the topic defaults
it applies as leader, its connection limits, what it describes). ``validate_only`` checks everything and changes nothing.
"""
from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.apis.configs import BROKER_RESOURCE, TOPIC_RESOURCE
from kafka_kip_reference.broker.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigType,
    validate_topic_configs,
)
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.model import ClusterError
from kafka_kip_reference.broker.registry import handles


class OpType(enum.IntEnum):
    """Kafka's ``AlterConfigOp.OpType``."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


#: One key's change: ``(name, operation, value)``; the legacy API SETs every key it names and DELETEs the rest.
Change = tuple[str, OpType, str | None]


@handles(ApiKey.AlterConfigs, 0, 2)
async def handle_alter_configs(request: Any, ctx: RequestContext) -> Any:
    def changes(resource: Any, current: dict[str, str]) -> list[Change]:
        named = {c.name for c in resource.configs}
        return ([(c.name, OpType.SET, c.value) for c in resource.configs]
                + [(name, OpType.DELETE, None) for name in current if name not in named])
    return _alter(request, ctx, RESPONSES[ApiKey.AlterConfigs], changes, legacy=True)


@handles(ApiKey.IncrementalAlterConfigs, 0, 1)
async def handle_incremental_alter_configs(request: Any, ctx: RequestContext) -> Any:
    def changes(resource: Any, current: dict[str, str]) -> list[Change]:
        unknown = [c.config_operation for c in resource.configs if c.config_operation not in OpType._value2member_map_]
        if unknown:
            raise ClusterError(constants.INVALID_REQUEST, f'Unknown operations type {unknown[0]}')
        return [(c.name, OpType(c.config_operation), c.value) for c in resource.configs]
    return _alter(request, ctx, RESPONSES[ApiKey.IncrementalAlterConfigs], changes, legacy=False)


def _alter(request: Any, ctx: RequestContext, response_class: Any,
           changes: Callable[[Any, dict[str, str]], list[Change]], legacy: bool) -> Any:
    result_class = response_class.AlterConfigsResourceResponse
    repeated = Counter((r.resource_type, r.resource_name) for r in request.resources)
    results = []
    for resource in request.resources:
        error, message = constants.NONE, None
        try:
            if repeated[resource.resource_type, resource.resource_name] > 1:
                raise ClusterError(constants.INVALID_REQUEST, 'Each resource must appear at most once.')
            _check_keys(resource, legacy)
            if resource.resource_type == TOPIC_RESOURCE:
                _alter_topic(ctx, resource, changes, request.validate_only)
            elif resource.resource_type == BROKER_RESOURCE:
                _alter_broker(ctx, resource, changes, request.validate_only)
            else:
                raise ClusterError(constants.INVALID_REQUEST,
                                   f'Unknown resource type {resource.resource_type}')
        except ClusterError as exc:
            error, message = exc.error_code, str(exc)
        results.append(result_class(error_code=error, error_message=message, resource_type=resource.resource_type,
                                    resource_name=resource.resource_name))
    return response_class(version=ctx.api_version, throttle_time_ms=0, responses=results)


def _check_keys(resource: Any, legacy: bool) -> None:
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise ClusterError(constants.INVALID_REQUEST, 'Error due to duplicate config keys')
    nulls = [c.name for c in resource.configs
             if c.value is None and (legacy or c.config_operation != OpType.DELETE)]
    if nulls:
        raise ClusterError(constants.INVALID_REQUEST, f'Null value not supported for : {", ".join(nulls)}')


def _apply(current: dict[str, str], changes: list[Change], is_list: Callable[[str], bool],
           default: Callable[[str], str | None], not_a_list: Callable[[str, OpType], str]) -> dict[str, str]:
    """``current`` with ``changes`` applied as Kafka's controller applies them (APPEND/SUBTRACT on LIST keys only,
    starting from the default when the key has no value)."""
    result = dict(current)
    for name, operation, value in changes:
        if operation is OpType.SET:
            result[name] = value
        elif operation is OpType.DELETE:
            result.pop(name, None)
        else:
            if not is_list(name):
                raise ClusterError(constants.INVALID_CONFIG, not_a_list(name, operation))
            base = result.get(name, default(name))
            parts = [part for part in (base or '').split(',') if part]
            for item in value.split(','):
                if operation is OpType.APPEND and item not in parts:
                    parts.append(item)
                elif operation is OpType.SUBTRACT and item in parts:
                    parts.remove(item)
            result[name] = ','.join(parts)
    return result


def _alter_topic(ctx: RequestContext, resource: Any, changes: Callable[[Any, dict[str, str]], list[Change]],
                 validate_only: bool) -> None:
    state = ctx.cluster
    topic = state.topics.get(resource.resource_name)
    current = dict(topic.configs) if topic else {}
    wanted = _apply(current, changes(resource, current),
                    is_list=lambda name: name in TOPIC_CONFIGS and TOPIC_CONFIGS[name].type is ConfigType.LIST,
                    default=lambda name: state.config.for_broker(ctx.broker_id).topic_default(name)[0]
                    if name in TOPIC_CONFIGS else None,
                    not_a_list=lambda name, op: f"Can't {op.name} to key {name} because its type is not LIST.")
    wanted = validate_topic_configs(wanted, lambda message: ClusterError(constants.INVALID_CONFIG, message))
    if topic is None:
        raise ClusterError(constants.UNKNOWN_TOPIC_OR_PARTITION, f'unknown topic {resource.resource_name!r}')
    if not validate_only and wanted != current:
        topic.configs.clear()
        topic.configs.update(wanted)
        state.record_change(f'topic {topic.name} configs: {wanted}')


def _alter_broker(ctx: RequestContext, resource: Any, changes: Callable[[Any, dict[str, str]], list[Change]],
                  validate_only: bool) -> None:
    state = ctx.cluster
    broker_id = _broker_id(resource.resource_name, ctx.broker_id)
    config = state.config
    current = config.dynamic(broker_id)
    requested = changes(resource, current)
    # a name Kafka does not know is stored as given (Kafka keeps such custom configs for plugins)
    wanted = _apply(current, requested,
                    is_list=lambda name: name in BROKER_CONFIGS and BROKER_CONFIGS[name].type is ConfigType.LIST,
                    default=lambda name: BROKER_CONFIGS[name].default if name in BROKER_CONFIGS else None,
                    not_a_list=lambda name, op: f'Config value {op.name.lower()} is not allowed for config key: '
                                                f'{name}')
    static = sorted(name for name in wanted if name in BROKER_CONFIGS and not BROKER_CONFIGS[name].dynamic)
    if static:  # Kafka answers INVALID_REQUEST for what fails its dynamic broker config checks (KAFKA-13609)
        raise ClusterError(constants.INVALID_REQUEST,
                           f'Cannot update these configs dynamically: [{", ".join(static)}]')
    try:
        normalized = {name: BROKER_CONFIGS[name].normalize(value) if name in BROKER_CONFIGS else value
                      for name, value in wanted.items()}
    except ValueError as exc:
        raise ClusterError(constants.INVALID_REQUEST, str(exc)) from None
    if not validate_only:
        config.set_dynamic(broker_id, normalized)  # the topics' shared defaults follow
        state.record_change(f'broker {"default" if broker_id is None else broker_id} dynamic configs: {normalized}')


def _broker_id(name: str, answering: int) -> int | None:
    """None for the cluster-wide default (``''``), else the answering broker's id (Kafka's checks)."""
    if name == '':
        return None
    try:
        broker_id = int(name)
    except ValueError:
        raise ClusterError(constants.INVALID_REQUEST,
                           f'Node id must be an integer, but it is: {name}') from None
    if broker_id != answering:
        raise ClusterError(constants.INVALID_REQUEST,
                           f'Unexpected broker id, expected {answering}, but received {name}')
    return broker_id
