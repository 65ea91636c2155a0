"""``KafkaConsumer.__init__`` building kafka_kip's collaborators instead of kafka-python's.

kafka-python's consumer builds its SubscriptionState, Fetcher and ConsumerCoordinator inline, and they
register metrics, listeners and threads while being built, so they cannot be swapped afterwards.
Scoped: only :class:`kafka_kip.KafkaConsumer` runs the returned function.
"""
from __future__ import annotations

from collections.abc import Callable

import kafka.consumer.group as _stock

from kafka_kip._patch.rebind import rebound


def install(*, subscription_state: type, fetcher: type, coordinator: type) -> Callable[..., None]:
    """kafka-python's ``KafkaConsumer.__init__`` building the given classes; raises KafkaPythonChanged if
    it no longer builds them by those names."""
    return rebound(_stock.KafkaConsumer.__init__, SubscriptionState=subscription_state, Fetcher=fetcher,
                   ConsumerCoordinator=coordinator)
