"""Handlers of the non-group APIs of the reference cluster (see :mod:`kafka_kip.testing.context`)."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kafka_kip.testing.apis.admin import handle_create_partitions, handle_create_topics, handle_delete_topics
from kafka_kip.testing.apis.fetch import handle_fetch
from kafka_kip.testing.apis.metadata import (
    handle_api_versions,
    handle_describe_cluster,
    handle_describe_configs,
    handle_metadata,
)
from kafka_kip.testing.apis.offsets import (
    handle_delete_records,
    handle_list_offsets,
    handle_offset_for_leader_epoch,
)
from kafka_kip.testing.apis.produce import handle_init_producer_id, handle_produce

Handler = Callable[[Any, Any], Awaitable[Any]]

#: api_key -> handler. SASL (17, 36) is handled by the broker's connection layer; group APIs by
#: ``ClusterState.groups``.
HANDLERS: dict[int, Handler] = {
    0: handle_produce,
    1: handle_fetch,
    2: handle_list_offsets,
    3: handle_metadata,
    18: handle_api_versions,
    19: handle_create_topics,
    20: handle_delete_topics,
    21: handle_delete_records,
    22: handle_init_producer_id,
    23: handle_offset_for_leader_epoch,
    32: handle_describe_configs,
    37: handle_create_partitions,
    60: handle_describe_cluster,
}

__all__ = ['HANDLERS', 'Handler']
