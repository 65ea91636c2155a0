"""The reference brokers' API handlers, one registry entry per API key (see :mod:`kafka_kip_reference.broker.registry`).

Importing this package imports every handler module, so ``HANDLERS`` is complete: the versions each API is
handled at are declared beside its handler.
"""
from __future__ import annotations

from kafka_kip_reference.broker.apis import (  # noqa: F401  (each module registers its handlers)
    acls,
    alter_configs,
    api_versions,
    client_quotas,
    configs,
    consumer_group_heartbeat,
    describe_producers,
    expansion,
    fetch,
    groups,
    log_offsets,
    metadata,
    offset_delete,
    produce,
    quorum,
    replicas,
    sasl,
    scram_credentials,
    topics,
    transaction_introspection,
    transactions,
)
from kafka_kip_reference.broker.registry import HANDLERS

__all__ = ['HANDLERS']
