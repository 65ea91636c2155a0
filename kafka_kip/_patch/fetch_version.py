"""Fetch requests kafka_kip addresses by topic id (KIP-516) may go out as FetchRequest v13.

kafka-python's ``Fetcher._create_fetch_requests`` builds every FetchRequest with ``max_version=12``, the last
version that names topics, and offers no way to ask for more. A request whose topics kafka_kip has given
topic ids (:mod:`kafka_kip.consumer.fetch_topic_ids`) gets a higher cap with the function built here; the
connection then negotiates with the broker's ApiVersions as for any request. Scoped: only the requests of
:class:`kafka_kip.consumer.fetcher.Fetcher` are touched, kafka-python's own fetcher builds them as before.

The tripwire checks that kafka-python still caps fetches at 12 (if it speaks v13 itself, this override must
be revisited rather than stack on top of it), that a request keeps its cap in ``_max_version`` where version
negotiation reads it, and that its fetcher still reads the topic names of a response (which kafka_kip fills
in for a v13 response, which carries ids only).
"""
from __future__ import annotations

from collections.abc import Callable

import kafka.consumer.fetcher as _stock
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.consumer import FetchRequest

from kafka_kip._patch.rebind import KAFKA_PYTHON_VERSION, KafkaPythonChanged, require_names

#: kafka-python's cap, which the tripwire expects to find.
STOCK_MAX_VERSION = 12

RaiseCap = Callable[[FetchRequest, int], None]


def _raise_cap(request: FetchRequest, max_version: int) -> None:
    request._max_version = max_version


def _negotiated(request: FetchRequest, broker_max: int) -> int:
    versions = BrokerVersionData(api_versions={FetchRequest.API_KEY: (4, broker_max)})
    return versions.api_version(request)


def _check() -> None:
    create = _stock.Fetcher._create_fetch_requests
    require_names(create, {'FetchRequest', 'to_send', 'to_forget', '_session_handlers'},
                  'to build FetchRequests from the fetch session')
    require_names(_stock.Fetcher._handle_fetch_response, {'topic', 'responses'},
                  'to read the topic names of a FetchResponse')
    if STOCK_MAX_VERSION not in create.__code__.co_consts:
        raise KafkaPythonChanged(
            f'kafka-python {KAFKA_PYTHON_VERSION}: Fetcher._create_fetch_requests no longer caps FetchRequest at '
            f'v{STOCK_MAX_VERSION}; kafka_kip addresses fetches by topic id itself and must be adapted')
    request = FetchRequest(max_wait_ms=0, min_bytes=1, topics=[], max_version=STOCK_MAX_VERSION)
    before = _negotiated(request, 17)
    _raise_cap(request, 13)
    after = _negotiated(request, 17)
    if (before, after) != (STOCK_MAX_VERSION, 13):
        raise KafkaPythonChanged(
            f'kafka-python {KAFKA_PYTHON_VERSION}: a FetchRequest no longer keeps its version cap in _max_version '
            f'(negotiated v{before}, then v{after} against a broker offering v17); kafka_kip must be adapted')


def install() -> RaiseCap:
    """``raise_cap(request, max_version)``: let ``request`` (built by kafka-python's fetcher) negotiate up to
    ``max_version``. Raises KafkaPythonChanged if kafka-python no longer works the way this relies on."""
    _check()
    return _raise_cap


__all__ = ['STOCK_MAX_VERSION', 'RaiseCap', 'install']
