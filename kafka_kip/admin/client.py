"""``KafkaAdminClient``: kafka-python's admin client with KIP-232 metadata freshness installed."""
from __future__ import annotations

import kafka

from kafka_kip.client_defaults import CLIENT_DEFAULTS
from kafka_kip.metadata.client import KipNetClient


class KafkaAdminClient(kafka.KafkaAdminClient):
    """kafka-python's ``KafkaAdminClient``; accepts every argument it accepts, unchanged.

    Its default ``kafka_client`` is :class:`~kafka_kip.metadata.client.KipNetClient`, so outdated metadata
    (KIP-232) is refused as in the consumer and producer; its defaults differ from kafka-python's only in
    :data:`~kafka_kip.client_defaults.CLIENT_DEFAULTS`.
    """

    DEFAULT_CONFIG = dict(kafka.KafkaAdminClient.DEFAULT_CONFIG, **CLIENT_DEFAULTS, kafka_client=KipNetClient)
