"""``KafkaConnectionManager.__init__`` building kafka_kip's ClusterMetadata instead of kafka-python's.

The manager builds its ClusterMetadata inline and attaches it to itself. Scoped: only
:class:`kafka_kip.metadata.KipConnectionManager` runs the returned function.
"""
from __future__ import annotations

from collections.abc import Callable

import kafka.net.manager as _stock

from kafka_kip._patch.rebind import rebound


def install(*, cluster_metadata: type) -> Callable[..., None]:
    """kafka-python's ``KafkaConnectionManager.__init__`` building ``cluster_metadata``; raises
    KafkaPythonChanged if it no longer builds ``ClusterMetadata`` by that name."""
    return rebound(_stock.KafkaConnectionManager.__init__, ClusterMetadata=cluster_metadata)
