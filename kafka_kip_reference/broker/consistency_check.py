"""KIP-1243 on the reference brokers: the ConsistencyState of request and response headers, and its check.

A request header v2 may carry tag 0, ``ConsistencyState(ClusterId, ConsistencyToken)``. A broker that honours
``kip.1243`` checks it before the request's handler runs (:func:`check`; ApiVersions excepted):

- another cluster id: the whole request is answered with INCONSISTENT_CLUSTER_ID (Apache Kafka's 104);
- an API that reads the metadata cache (the proposal's list,
  :data:`~kafka_kip.protocol.headers.METADATA_CACHE_APIS`) with a token newer
  than the broker's image: the broker waits up to ``metadata.consistency.wait.max.ms`` for its image to catch
  up (it does when its delayed metadata is released), then answers from it, else with STALE_METADATA.

Every flexible response header then carries the broker's cluster id and its image's offset, read when the
response has been built (:func:`response_header_tags`). A broker that does not honour ``kip.1243`` ignores the
tag and sends empty response tags, as Apache Kafka does. The header's tags are read and written by
:func:`~kafka_kip.protocol.headers.read_header_tags` and :func:`~kafka_kip.protocol.headers.consistency_state_tags`.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.headers import METADATA_CACHE_APIS, ConsistencyState
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.error_responses import error_response
from kafka_kip_reference.broker.model import MetadataImage
from kafka_kip_reference.broker.state import ClusterState


async def check(cluster: ClusterState, broker_id: int, api_key: int, api_version: int, request: Any,
                consistency: ConsistencyState) -> Any:
    """The response refusing ``request`` for its consistency state, or None to let its handler answer.

    ApiVersions is always answered: a client must learn the versions, and its response header cannot carry state.
    """
    if api_key == ApiKey.ApiVersions:
        return None
    if consistency.cluster_id is not None and consistency.cluster_id != cluster.cluster_id:
        message = (f'the request is for cluster {consistency.cluster_id!r}; broker {broker_id} belongs to '
                   f'cluster {cluster.cluster_id!r}')
        return _refusal(cluster, broker_id, api_key, api_version, request, constants.INCONSISTENT_CLUSTER_ID,
                        message)
    if api_key not in METADATA_CACHE_APIS or consistency.consistency_token <= cluster.view(broker_id).offset:
        return None
    wait_ms = cluster.config.int('metadata.consistency.wait.max.ms')
    if await cluster.wait_for_metadata(broker_id, consistency.consistency_token, wait_ms / 1000):
        return None
    message = (f'broker {broker_id} has metadata up to offset {cluster.view(broker_id).offset}, older than the '
               f'request\'s consistency token {consistency.consistency_token}')
    return _refusal(cluster, broker_id, api_key, api_version, request, constants.STALE_METADATA, message)


def _refusal(cluster: ClusterState, broker_id: int, api_key: int, api_version: int, request: Any, error_code: int,
             message: str) -> Any:
    if api_key != ApiKey.Metadata:
        return error_response(api_key, api_version, request, error_code, message)
    # A stale broker still names the brokers it knows, so a client bootstrapped on it can go elsewhere; a
    # broker of another cluster names none, but says which cluster it is.
    view = cluster.view(broker_id)
    brokers = _brokers(view) if error_code == constants.STALE_METADATA else []
    topics = None if request.topics is not None else _all_topics(view, api_version, error_code)
    extra = {} if topics is None else {'topics': topics}
    return error_response(api_key, api_version, request, error_code, message, brokers=brokers,
                          cluster_id=cluster.cluster_id, controller_id=view.controller_id, **extra)


def _brokers(view: MetadataImage) -> list:
    broker = RESPONSES[ApiKey.Metadata].MetadataResponseBroker
    return [broker(node_id=a.node_id, host=a.host, port=a.port, rack=a.rack) for a in view.brokers]


def _all_topics(view: MetadataImage, api_version: int, error_code: int) -> list | None:
    """Before v13 a Metadata response has no top-level error: a request for every topic gets the error on
    every topic the broker knows."""
    if RESPONSES[ApiKey.Metadata]._struct.fields['error_code'].for_version_q(api_version):
        return None
    topic = RESPONSES[ApiKey.Metadata].MetadataResponseTopic
    return [topic(error_code=error_code, name=name, topic_id=view.topics[name].topic_id, partitions=[])
            for name in sorted(view.topics)]


__all__ = ['check']
