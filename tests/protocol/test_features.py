"""Feature negotiation: SupportedFeatures parsing, the per-connection registry, and the helper for brokers."""
from __future__ import annotations

import io
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kafka.net.compat import KafkaNetClient
from kafka.protocol.api_key import ApiKey
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from kafka_kip.metadata import KipNetClient
from kafka_kip.protocol import messages
from kafka_kip.protocol.features import (
    ALL_FEATURES,
    KIP_232,
    KIP_253,
    KIP_391,
    KIP_1243,
    broker_features,
    feature_supported,
    parse_supported_features,
    supported_features_for_broker,
    supports,
)

ALL_AT_1 = {'kip.232': (1, 1), 'kip.253': (1, 1), 'kip.391': (1, 1), 'kip.1243': (1, 1)}


def api_versions_response(version: int, supported_features: list | None = None, error_code: int = 0,
                          api_keys: dict[int, tuple[int, int]] | None = None) -> ApiVersionsResponse:
    key = ApiVersionsResponse.ApiVersion
    keys = api_keys if api_keys is not None else BROKER_API_VERSIONS[(3, 9)]
    extra = {} if supported_features is None else {'supported_features': supported_features}
    return ApiVersionsResponse(
        version=version, error_code=error_code, throttle_time_ms=0,
        api_keys=[key(api_key=k, min_version=low, max_version=high) for k, (low, high) in keys.items()],
        **extra)


@pytest.mark.parametrize('version', [3, 4])
def test_features_parse_from_an_encoded_api_versions_response(version):
    advertised = supported_features_for_broker() + [
        ApiVersionsResponse.SupportedFeatureKey(name='metadata.version', min_version=1, max_version=21)]
    encoded = bytes(api_versions_response(version, advertised).encode())
    decoded = ApiVersionsResponse.decode(encoded, version=version)
    assert parse_supported_features(decoded) == {**ALL_AT_1, 'metadata.version': (1, 21)}


@pytest.mark.parametrize('version', [0, 1, 2])
def test_features_are_absent_before_v3(version):
    # the field does not exist before v3: the same response object encodes without it
    encoded = bytes(api_versions_response(version, supported_features_for_broker()).encode())
    decoded = ApiVersionsResponse.decode(encoded, version=version)
    assert parse_supported_features(decoded) == {}


def test_features_absent_when_a_v3_broker_advertises_none():
    decoded = ApiVersionsResponse.decode(bytes(api_versions_response(3).encode()), version=3)
    assert parse_supported_features(decoded) == {}


def test_supported_features_for_broker_wire_bytes():
    encoded = bytes(api_versions_response(3, supported_features_for_broker([KIP_391]), api_keys={}).encode())
    # error 0, no api keys, throttle 0, one tag: tag 0, size 14, [ {'kip.391', 1, 1, no tags} ]
    assert encoded == (b'\x00\x00' b'\x01' b'\x00\x00\x00\x00'
                       b'\x01' b'\x00' b'\x0e' b'\x02' b'\x08kip.391' b'\x00\x01' b'\x00\x01' b'\x00')


def test_feature_supported_checks_the_version_range():
    assert feature_supported({KIP_391: (1, 1)}, KIP_391)
    assert feature_supported({KIP_391: (1, 3)}, KIP_391, version=2)
    assert not feature_supported({KIP_391: (2, 3)}, KIP_391)
    assert not feature_supported({KIP_232: (1, 1)}, KIP_391)
    assert not feature_supported({}, KIP_391)
    assert not feature_supported(None, KIP_391)


class FakeBroker(socketserver.ThreadingTCPServer):
    """A single-node broker that answers ApiVersions and Metadata, enough for kafka-python to connect."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, api_versions_max: int, supported: list | None) -> None:
        super().__init__(('127.0.0.1', 0), _BrokerHandler)
        self.api_versions_max = api_versions_max
        self.supported = supported
        self.api_keys = {**BROKER_API_VERSIONS[(3, 9)], 18: (0, api_versions_max)}
        self.request_headers: list[Any] = []

    @property
    def port(self) -> int:
        return self.server_address[1]


class _BrokerHandler(socketserver.BaseRequestHandler):
    server: FakeBroker

    def handle(self) -> None:
        while True:
            size = self._read(4)
            if size is None:
                return
            payload = self._read(int.from_bytes(size, 'big'))
            api_key, api_version = int.from_bytes(payload[:2], 'big'), int.from_bytes(payload[2:4], 'big')
            request_cls = messages.REQUESTS[api_key]
            version = min(api_version, self.server.api_keys[api_key][1])
            header = request_cls.parse_header(io.BytesIO(payload), version=api_version)
            self.server.request_headers.append(header)
            if api_key == ApiVersionsRequest.API_KEY and api_version > self.server.api_versions_max:
                response = api_versions_response(0, error_code=35, api_keys=self.server.api_keys)
            elif api_key == ApiVersionsRequest.API_KEY:
                response = api_versions_response(version, self.server.supported,
                                                 api_keys=self.server.api_keys)
            else:
                response = self._metadata(version)
            response.with_header(correlation_id=header.correlation_id)
            self.request.sendall(response.encode(header=True, framed=True))

    def _metadata(self, version: int) -> Any:
        cls = messages.MetadataResponse
        return cls(version=version, throttle_time_ms=0, cluster_id='c', controller_id=0, topics=[],
                   brokers=[cls.MetadataResponseBroker(version=version, node_id=0, host='127.0.0.1',
                                                       port=self.server.port, rack=None)])

    def _read(self, n: int) -> bytes | None:
        data = b''
        while len(data) < n:
            chunk = self.request.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data


@contextmanager
def connected_client(api_versions_max: int, supported: list | None,
                     client_class: type[KafkaNetClient] = KipNetClient) -> Iterator[tuple[KafkaNetClient, FakeBroker]]:
    broker = FakeBroker(api_versions_max, supported)
    thread = threading.Thread(target=broker.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    client = client_class(bootstrap_servers=f'127.0.0.1:{broker.port}', request_timeout_ms=5000,
                          reconnect_backoff_ms=10)
    try:
        client._manager.bootstrap(timeout_ms=5000)
        client.await_ready(0, timeout_ms=5000)
        yield client, broker
    finally:
        client.close()
        broker.shutdown()
        broker.server_close()
        thread.join(5)


def test_registry_records_features_of_every_connected_broker_over_real_sockets():
    with connected_client(4, supported_features_for_broker()) as (client, broker):
        assert broker_features(client, 0) == ALL_AT_1
        assert broker_features(client._manager, 0) == ALL_AT_1
        assert all(supports(client, 0, name) for name in ALL_FEATURES)
        assert not supports(client, 0, KIP_391, version=2)
        assert broker_features(client, 1) is None and not supports(client, 1, KIP_391)
        assert [h.request_api_key for h in broker.request_headers].count(ApiVersionsRequest.API_KEY) == 2


def test_registry_knows_a_broker_without_features_falls_back_to_v2():
    # the broker answers the client's v4 ApiVersionsRequest with UNSUPPORTED_VERSION; kafka-python retries v2
    with connected_client(2, supported_features_for_broker()) as (client, broker):
        versions = [h.request_api_version for h in broker.request_headers if h.request_api_key == ApiKey.ApiVersions]
        assert versions[:2] == [4, 2]
        assert broker_features(client, 0) == {}
        assert not supports(client, 0, KIP_391)


def test_registry_knows_a_v3_broker_that_advertises_nothing():
    with connected_client(4, None) as (client, _broker):
        assert broker_features(client, 0) == {}
        assert not supports(client, 0, KIP_232)


def test_features_of_a_closed_connection_are_forgotten():
    with connected_client(4, supported_features_for_broker([KIP_232])) as (client, _broker):
        assert broker_features(client, 0) == {KIP_232: (1, 1)}
        client.close(0)
        assert broker_features(client, 0) is None


def test_supports_finds_the_manager_behind_producer_like_objects():
    with connected_client(4, supported_features_for_broker([KIP_1243])) as (client, _broker):
        class Sender:
            _client = client

        class Producer:
            _sender = Sender()

        assert supports(Producer(), 0, KIP_1243)
        assert not supports(Producer(), 0, KIP_253)
    with pytest.raises(TypeError, match='expected a kafka client'):
        supports(object(), 0, KIP_232)


def test_a_stock_client_records_no_features_so_nothing_counts_as_advertised():
    with connected_client(4, supported_features_for_broker(), client_class=KafkaNetClient) as (client, broker):
        assert [h.request_api_key for h in broker.request_headers].count(ApiVersionsRequest.API_KEY) == 2
        assert broker_features(client, 0) is None
        assert not any(supports(client, 0, name) for name in ALL_FEATURES)
