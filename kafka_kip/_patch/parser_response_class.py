"""Which class decodes a response on a kafka_kip connection.

kafka-python's ``KafkaProtocol`` queues the header of every request it sends in ``in_flight_requests`` and
decodes the response with ``header.get_response_class()``, which looks the API key up in kafka-python's
process-wide ``ResponseClassRegistry``. The ``send_request`` built here replaces the queued header of a
request whose API has a kafka_kip response class with an :class:`InFlightRequest` naming that class, so
kafka_kip's connections decode with the patched classes while kafka-python's registry stays as it was.
Cost: one dict lookup per request, one small object per request of a patched API. Scoped: only
:class:`kafka_kip.protocol.connection.KipProtocol` has it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.parser import KafkaProtocol

from kafka_kip._patch.rebind import require_names


class InFlightRequest:
    """The queued header of a request whose response kafka_kip decodes with ``response_class``.

    Answers what kafka-python's parser asks a request header: ``correlation_id``, ``get_response_class()``,
    and anything else from the header itself.
    """

    __slots__ = ('header', 'response_class', 'correlation_id')

    def __init__(self, header: Any, response_class: type[ApiMessage]) -> None:
        self.header = header
        self.response_class = response_class
        self.correlation_id = header.correlation_id

    def get_response_class(self) -> type[ApiMessage]:
        return self.response_class[self.header.request_api_version]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.header, name)

    def __repr__(self) -> str:
        return f'{self.header!r} (answered by {self.response_class.__module__}.{self.response_class.__name__})'


def install(response_classes: Mapping[int, type[ApiMessage]]) -> Callable[..., int]:
    """A ``send_request`` for a KafkaProtocol subclass whose responses of the APIs in ``response_classes``
    (api key -> class) decode with those classes.

    Raises KafkaPythonChanged if the parser no longer queues request headers in ``in_flight_requests``
    or no longer asks them for the response class.
    """
    require_names(KafkaProtocol.send_request, {'in_flight_requests', 'header'}, 'to queue request headers')
    require_names(KafkaProtocol._process_response, {'in_flight_requests', 'get_response_class'},
                  'to ask the queued header for the response class')
    stock_send_request = KafkaProtocol.send_request

    def send_request(self: KafkaProtocol, request: Any, correlation_id: int | None = None) -> int:
        correlation_id = stock_send_request(self, request, correlation_id)
        response_class = response_classes.get(request.API_KEY)
        if response_class is not None and request.expect_response():
            self.in_flight_requests[-1] = InFlightRequest(self.in_flight_requests[-1], response_class)
        return correlation_id

    return send_request
