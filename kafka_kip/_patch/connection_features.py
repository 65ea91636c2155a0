"""``KafkaConnection._send_request`` also handing each successful ApiVersionsResponse to kafka_kip.

A broker lists the extensions it implements in its ApiVersionsResponse ``supported_features``; kafka-python
keeps only the api versions of that response. The returned ``_send_request`` is kafka-python's plus one
``isinstance`` check per request. Scoped: only :class:`kafka_kip.protocol.connection.KipConnection` has it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.future import Future
from kafka.net.connection import KafkaConnection
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from kafka_kip._patch.rebind import require_names


def install(record: Callable[[KafkaConnection, ApiVersionsResponse], None]) -> Callable[..., Future]:
    """A ``_send_request`` for a KafkaConnection subclass that calls ``record(connection, response)`` for
    every ApiVersionsResponse without error the connection receives.

    Raises KafkaPythonChanged if the connection no longer sends its ApiVersionsRequest through
    ``_send_request``.
    """
    require_names(KafkaConnection._get_api_versions, {'_send_request'}, 'to send ApiVersionsRequest')
    stock_send_request = KafkaConnection._send_request

    def record_if_no_error(connection: KafkaConnection, response: ApiVersionsResponse) -> None:
        if response.error_code == 0:
            record(connection, response)

    def _send_request(self: KafkaConnection, request: Any, future: Future | None = None,
                      timeout_at: float | None = None) -> Future:
        future = stock_send_request(self, request, future=future, timeout_at=timeout_at)
        if isinstance(request, ApiVersionsRequest):
            future.add_callback(record_if_no_error, self)
        return future

    return _send_request
