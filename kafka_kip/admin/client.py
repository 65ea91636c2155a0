"""``KafkaAdminClient``: kafka-python's admin client with KIP-232 metadata freshness and KIP-1243 installed."""
from __future__ import annotations

from typing import Any

import kafka
from kafka.protocol.api_key import ApiKey

from kafka_kip.admin.acl import AclResultsMixin
from kafka_kip.client_defaults import CLIENT_DEFAULTS
from kafka_kip.metadata.client import KipNetClient
from kafka_kip.metadata.store import require_store
from kafka_kip.metadata.written_topics import WrittenTopics, writes_of_response


class KafkaAdminClient(AclResultsMixin, kafka.KafkaAdminClient):
    """kafka-python's ``KafkaAdminClient``; accepts every argument it accepts, unchanged.

    ACLs it reads back carry :class:`kafka_kip.admin.ACLOperation` operations, which include KIP-391's
    REPLICATOR_WRITE (:mod:`kafka_kip.admin.acl`).

    Its default ``kafka_client`` is :class:`~kafka_kip.metadata.client.KipNetClient`, so outdated metadata
    (KIP-232) is refused as in the consumer and producer; its defaults differ from kafka-python's only in
    :data:`~kafka_kip.client_defaults.CLIENT_DEFAULTS`. ``consistency_context_store`` (KIP-1243): the
    :class:`kafka_kip.ConsistencyContextStore` it shares with other clients (default: one of its own); its calls
    raise ``InconsistentClusterIdError`` once a broker turned out to belong to another cluster than the store's
    context.

    ``written_topics`` (set by a :class:`kafka_kip.ClientFactory`): where the topics this client creates, grows
    or deletes are recorded, so that the factory's producers and consumers wait for metadata that reflects them.
    """

    written_topics: WrittenTopics | None = None

    DEFAULT_CONFIG = dict(kafka.KafkaAdminClient.DEFAULT_CONFIG, **CLIENT_DEFAULTS, kafka_client=KipNetClient,
                          consistency_context_store=None)

    def __init__(self, **configs: Any) -> None:
        require_store(configs.get('consistency_context_store'))
        super().__init__(**configs)

    async def _send_request_to_controller(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        # every topic write (CreateTopics, CreatePartitions, DeleteTopics) goes through here
        response = await super()._send_request_to_controller(request, *args, **kwargs)
        written = self.written_topics
        if written is not None:
            for write in writes_of_response(request, response, self._manager.cluster.topic_id):
                written.record(write)
        return response

    def api_versions(self) -> dict[Any, tuple[int, int]]:
        """``{api_key: (min_version, max_version)}`` the cluster's brokers support, as kafka-python's.

        Keys kafka-python knows are its ``ApiKey`` members; a key it does not know (the extensions' own APIs,
        such as LeaderEpochsForPartition's 10000 from a broker advertising ``kip.253``) stays a plain int,
        where kafka-python's ``api_versions()`` raises ValueError.
        """
        return {_api_key(key): versions for key, versions in self._manager.broker_version_data.api_versions.items()}


def _api_key(key: int) -> ApiKey | int:
    try:
        return ApiKey(key)
    except ValueError:
        return key
