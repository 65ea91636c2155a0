"""One request on a fresh connection, no client state machine: readiness probes and minimal reproductions.

Used to wait for brokers (:func:`wait_until_ready`, :func:`metadata_brokers`) and by wire-level tests that
must see exactly what a broker answers to one request.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from kafka_kip.protocol.retry import RetryPolicy
from kafka_kip.protocol.wire import WireClient

_CLIENT_ID = 'kafka-kip-probe'
_POLL_INTERVAL = 0.05


def send_raw(address: str, payload: bytes, timeout: float = 5.0) -> bytes:
    """Send one framed request ``payload`` (header + body) to ``host:port``; return the response frame.

    The returned bytes start with the response header. Raises ``ConnectionError`` when the broker
    closes the connection instead of answering.
    """
    with WireClient(address, client_id=_CLIENT_ID, timeout=timeout) as wire:
        wire.send_frame(payload)
        return wire.read_frame()


def encode_request(request: Any, correlation_id: int = 1) -> bytes:
    """Header + body bytes of a kafka-python request object (unframed)."""
    request.with_header(correlation_id=correlation_id, client_id=_CLIENT_ID)
    return bytes(request.encode(header=True))


def kafka_request(address: str, request: Any, response_class: Any, timeout: float = 5.0) -> Any:
    """Send a kafka-python request object on a fresh connection and decode the answer as ``response_class``."""
    with WireClient(address, client_id=_CLIENT_ID, timeout=timeout) as wire:
        return wire.request(request, response_class=response_class)


def probe_api_versions(address: str, version: int = 3,
                       timeout: float = 5.0) -> tuple[dict[int, tuple[int, int]], frozenset[str]]:
    """ApiVersions at ``version``: ``({api_key: (min, max)}, supported feature names)``."""
    fields = {'client_software_name': _CLIENT_ID, 'client_software_version': '1'} if version >= 3 else {}
    response = kafka_request(address, ApiVersionsRequest(version=version, **fields), ApiVersionsResponse,
                             timeout=timeout)
    if response.error_code:
        raise ConnectionError(f'ApiVersions v{version} at {address} failed with error {response.error_code}')
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    features = frozenset(f.name for f in (getattr(response, 'supported_features', None) or ()))
    return ranges, features


def wait_until_ready(address: str, timeout: float, version: int = 3, alive: Callable[[], bool] = lambda: True
                     ) -> tuple[dict[int, tuple[int, int]], frozenset[str]]:
    """Retry :func:`probe_api_versions` until it answers.

    Raises ``TimeoutError`` after ``timeout`` seconds, ``ConnectionError`` as soon as ``alive()`` is false.
    """
    attempts = RetryPolicy(timeout_s=timeout, backoff_s=_POLL_INTERVAL, max_backoff_s=_POLL_INTERVAL, jitter=0.0,
                           also_retry=(OSError,)).begin(f'{address} answering ApiVersions')
    while True:
        try:
            return probe_api_versions(address, version=version, timeout=1.0)
        except OSError as exc:
            if not alive():
                raise ConnectionError(f'{address} went away before answering ApiVersions') from exc
            if not attempts.may_retry(exc):
                raise TimeoutError(f'{address} did not answer ApiVersions within {timeout:.0f}s') from exc
            attempts.wait()


def metadata_brokers(address: str, timeout: float = 5.0) -> tuple[str | None, dict[int, str]]:
    """``(cluster id, {node_id: 'host:port'})`` of the brokers that ``address``'s Metadata (v2) lists."""
    response = kafka_request(address, MetadataRequest(version=2, topics=[]), MetadataResponse, timeout=timeout)
    return response.cluster_id, {b.node_id: f'{b.host}:{b.port}' for b in response.brokers}
