"""kafka_kip._patch: kafka-python is left as it is for code that does not use kafka_kip's clients.

The state compared is everything kafka_kip ever changed or could change: the header classes kafka-python's
messages use, its response class registry, its error code table, and the methods kafka_kip overrides.
"""
from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from typing import Any

import kafka
import kafka.consumer.fetcher
import kafka.net.connection
import kafka.net.manager
import kafka.net.transport
import kafka.protocol.parser
import pytest
from kafka.net.compat import KafkaNetClient
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

import kafka_kip
from kafka_kip._patch import (
    admin_acl_results,
    connection_features,
    connection_parser,
    consumer_init,
    fetch_version,
    manager_connection,
    manager_init,
    manager_transport,
    parser_frame,
    parser_response_class,
    producer_init,
    request_header,
    response_header,
    response_registry,
)
from kafka_kip._patch.rebind import KafkaPythonChanged, rebound, require_behaviour
from kafka_kip.metadata import KipNetClient
from kafka_kip.protocol import messages
from kafka_kip.protocol.connection import KipConnection, KipProtocol
from kafka_kip.protocol.transport import KipTCPTransport
from tests.support.consuming import read_to_end


def kafka_python_state() -> dict[str, Any]:
    """What of kafka-python a process sees; the source of this function also runs in fresh subprocesses."""
    import sys

    import kafka.cluster
    import kafka.consumer.fetcher
    import kafka.consumer.group
    import kafka.coordinator.consumer
    import kafka.errors
    import kafka.net.connection
    import kafka.net.manager
    import kafka.producer.future
    import kafka.producer.kafka
    import kafka.producer.record_accumulator
    import kafka.producer.sender
    import kafka.protocol.parser
    import kafka.record.default_records
    from kafka.protocol import api_header, api_message

    def where(obj: Any) -> str:
        rebound = getattr(obj, '__globals__', None) not in (None, vars(sys.modules[obj.__module__]))
        return f"{obj.__module__}.{obj.__qualname__}{' (rebound)' if rebound else ''}"

    classes = (kafka.net.connection.KafkaConnection, kafka.net.manager.KafkaConnectionManager,
               kafka.protocol.parser.KafkaProtocol, kafka.consumer.group.KafkaConsumer,
               kafka.producer.kafka.KafkaProducer, kafka.cluster.ClusterMetadata, kafka.consumer.fetcher.Fetcher,
               kafka.coordinator.consumer.ConsumerCoordinator, kafka.producer.sender.Sender,
               kafka.producer.record_accumulator.RecordAccumulator, kafka.producer.future.FutureRecordMetadata,
               kafka.record.default_records.DefaultRecordBatch)
    return {
        'headers': [where(api_message.RequestHeader), where(api_message.ResponseHeader)],
        'response_classes': {str(key): where(entry[None])
                             for key, entry in api_header.ResponseClassRegistry._response_class_registry.items()},
        'error_codes': {str(code): where(cls) for code, cls in kafka.errors.kafka_errors.items()},
        'for_code': where(kafka.errors.for_code),
        'methods': {f'{cls.__name__}.{name}': where(value) for cls in classes
                    for name, value in vars(cls).items() if inspect.isfunction(value)},
        'kafka_kip_imported': 'kafka_kip' in sys.modules,
    }


STATE_SOURCE = 'import inspect\nfrom typing import Any\n' + textwrap.dedent(inspect.getsource(kafka_python_state))


def _fresh_state() -> dict[str, Any]:
    """kafka_python_state() of a process that imports kafka and nothing of kafka_kip."""
    script = STATE_SOURCE + '\nimport json\nprint(json.dumps(kafka_python_state()))\n'
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.fixture(scope='module')
def fresh_state() -> dict[str, Any]:
    state = _fresh_state()
    assert state['kafka_kip_imported'] is False
    assert state['headers'] == ['kafka.protocol.api_header.RequestHeader',
                                'kafka.protocol.api_header.ResponseHeader']
    assert state['response_classes']['1'] == 'kafka.protocol.consumer.fetch.FetchResponse'
    assert state['error_codes']['104'] == 'kafka.errors.InconsistentClusterIdError'
    assert state['methods']['KafkaConnection._send_request'] == 'kafka.net.connection.KafkaConnection._send_request'
    return state


def test_a_pytest_session_that_only_imports_kafka_sees_kafka_python_unchanged(tmp_path, fresh_state):
    # a project that opted in to the reference cluster's pytest plugin still tests stock kafka-python
    (tmp_path / 'test_stock_only.py').write_text(STATE_SOURCE + textwrap.dedent('''
        import json

        import kafka


        def test_record_state(pytestconfig):
            assert pytestconfig.pluginmanager.has_plugin('kafka_kip_reference.fixtures.pytest_plugin')
            with open('state.json', 'w') as out:
                json.dump(kafka_python_state(), out)
    '''))
    run = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
                          '-p', 'kafka_kip_reference.fixtures.pytest_plugin', 'test_stock_only.py'],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    session_state = json.loads((tmp_path / 'state.json').read_text())
    assert session_state == fresh_state


def test_using_kafka_kip_clients_leaves_kafka_python_unchanged(reference_cluster, fresh_state):
    reference_cluster.create_topic('t', partitions=1, replication_factor=3)
    servers = reference_cluster.bootstrap_servers
    producer = kafka_kip.KafkaProducer(bootstrap_servers=servers)
    producer.send(kafka_kip.ProducerRecordWithOffset('t', 0, value=b'v', offset=5)).get(timeout=30)
    consumer = kafka_kip.KafkaConsumer('t', bootstrap_servers=servers, auto_offset_reset='earliest',
                                       group_id='g')
    assert [(r.offset, r.value) for r in read_to_end(consumer, [kafka_kip.TopicPartition('t', 0)])] == [(5, b'v')]
    consumer.commit()
    for client in (producer, consumer):
        client.close()
    assert kafka_python_state() == dict(fresh_state, kafka_kip_imported=True)


def _metadata_response(client: Any, node_id: int) -> Any:
    request = MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    return client.send_and_receive(node_id, request, timeout_ms=10000)


def test_only_kafka_kip_connections_decode_with_the_patched_classes(reference_cluster):
    reference_cluster.create_topic('t', partitions=1, replication_factor=3)
    ours = KipNetClient(bootstrap_servers=reference_cluster.bootstrap_servers)
    stock = KafkaNetClient(bootstrap_servers=reference_cluster.bootstrap_servers)
    try:
        for client in (ours, stock):
            client._manager.bootstrap(timeout_ms=10000)
            assert client.await_ready(0, timeout_ms=10000)
        ours_response, stock_response = _metadata_response(ours, 0), _metadata_response(stock, 0)
        assert type(ours._manager._conns[0]) is KipConnection
        assert type(ours._manager._conns[0].parser) is KipProtocol
        assert type(stock._manager._conns[0]) is kafka.net.connection.KafkaConnection
        assert type(stock._manager._conns[0].parser) is kafka.protocol.parser.KafkaProtocol
        assert type(ours._manager._conns[0].transport) is KipTCPTransport
        assert type(stock._manager._conns[0].transport) is kafka.net.transport.KafkaTCPTransport
        assert type(ours_response) is messages.MetadataResponse
        assert type(stock_response) is kafka.protocol.metadata.MetadataResponse
        assert ours_response.topics[0].partitions[0].partition_epoch == 1
        assert not hasattr(stock_response.topics[0].partitions[0], 'partition_epoch')
        # the stock connection records no features; kafka_kip's records the ones the reference broker advertises
        assert getattr(stock._manager._conns[0], 'supported_features', None) is None
        assert ours._manager._conns[0].supported_features == {'kip.232': (1, 1), 'kip.253': (1, 1), 'kip.391': (1, 1),
                                                              'kip.1243': (1, 1), 'group.version': (0, 1),
                                                              'transaction.version': (0, 2)}
    finally:
        ours.close()
        stock.close()


def _without_names(*_args: Any, **_kwargs: Any) -> None:
    """Looks nothing up: what a kafka-python method would look like after a rewrite that drops a hook."""


@pytest.mark.parametrize(('owner', 'name', 'install', 'kwargs'), [
    (kafka.consumer.group.KafkaConsumer, '__init__', consumer_init.install,
     {'subscription_state': object, 'fetcher': object, 'coordinator': object}),
    (kafka.producer.kafka.KafkaProducer, '__init__', producer_init.install, {'accumulator': object, 'sender': object}),
    (kafka.net.manager.KafkaConnectionManager, '__init__', manager_init.install, {'cluster_metadata': object}),
    (kafka.net.manager.KafkaConnectionManager, 'get_connection', manager_connection.install, {'connection': object}),
    (kafka.net.manager.KafkaConnectionManager, '_build_transport', manager_transport.install,
     {'tcp': object, 'ssl': object}),
    (kafka.net.transport.KafkaTCPTransport, '_read_from_sock', manager_transport.install,
     {'tcp': object, 'ssl': object}),
    (kafka.net.connection.KafkaConnection, 'connection_made', connection_parser.install, {'parser': object}),
    (kafka.net.connection.KafkaConnection, '_get_api_versions', connection_features.install,
     {'record': _without_names}),
    (kafka.protocol.parser.KafkaProtocol, '_process_response', parser_response_class.install,
     {'response_classes': {}}),
    (kafka.protocol.parser.KafkaProtocol, 'send_request', parser_response_class.install, {'response_classes': {}}),
    (kafka.protocol.parser.KafkaProtocol, 'send_request', request_header.install, {}),
    (kafka.protocol.parser.KafkaProtocol, '_process_response', response_header.install, {}),
    (kafka.protocol.parser.KafkaProtocol, 'receive_bytes', parser_frame.install, {}),
    (kafka.admin._acls.ACLAdminMixin, 'describe_acls', admin_acl_results.install, {'acl': object}),
    (kafka.admin._acls.ACLAdminMixin, 'delete_acls', admin_acl_results.install, {'acl': object}),
    (kafka.consumer.fetcher.Fetcher, '_create_fetch_requests', fetch_version.install, {}),
    (kafka.consumer.fetcher.Fetcher, '_handle_fetch_response', fetch_version.install, {}),
], ids=lambda value: getattr(value, '__module__', '').rpartition('.')[2] if callable(value) else None)
def test_each_override_trips_loudly_when_kafka_python_lost_its_hook(monkeypatch, owner, name, install, kwargs):
    monkeypatch.setattr(owner, name, _without_names)
    with pytest.raises(KafkaPythonChanged, match=r'kafka-python 3\.0\.\d+: _without_names no longer uses '
                                                 r'\[.*\], but kafka_kip relies on it'):
        install(**kwargs)


@pytest.mark.parametrize('cuts', [(), (2,), (3, 9, 10, 40)], ids=['one piece', 'size split', 'many pieces'])
def test_a_response_staged_in_a_frame_decodes_as_kafka_pythons_parser_decodes_it(cuts):
    from kafka.protocol.api_header import RequestHeader
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.metadata import ApiVersionsResponse

    key = ApiVersionsResponse.ApiVersion
    body = ApiVersionsResponse(version=3, error_code=0, throttle_time_ms=7,
                               api_keys=[key(api_key=k, min_version=0, max_version=12) for k in range(9)])
    framed = b'\x00\x00\x00\x05' + bytes(body.encode(version=3))  # correlation id 5 (a v0 header: KIP-511)
    framed = len(framed).to_bytes(4, 'big') + framed
    pieces = [framed[a:b] for a, b in zip((0, *cuts), (*cuts, len(framed)), strict=True)]
    decoded = []
    for parser in (kafka.protocol.parser.KafkaProtocol(client_id='t'), KipProtocol(client_id='t')):
        parser.in_flight_requests.append(RequestHeader(request_api_key=ApiKey.ApiVersions, request_api_version=3, correlation_id=5,
                                                       client_id='t'))
        decoded.append([response for piece in pieces for response in parser.receive_bytes(piece)])
    stock, ours = decoded
    assert [(c, r.to_dict()) for c, r in ours] == [(c, r.to_dict()) for c, r in stock] == [(5, body.to_dict())]


@pytest.mark.parametrize('cuts', [(2,), (3, 9, 10, 40)], ids=['size split', 'many pieces'])
def test_a_large_frame_joined_into_reused_storage_decodes_as_kafka_pythons_parser_decodes_it(monkeypatch, cuts):
    monkeypatch.setattr(parser_frame, 'REUSED_MIN', 16)
    test_a_response_staged_in_a_frame_decodes_as_kafka_pythons_parser_decodes_it(cuts)


def _joined(pieces: list[bytes]) -> memoryview:
    frame = parser_frame.ResponseFrame(sum(map(len, pieces)))
    for piece in pieces:
        frame.write(piece)
    frame.seek(0)
    return frame.read()


def test_large_frames_are_joined_into_one_storage_unless_a_view_of_the_last_is_alive(monkeypatch):
    monkeypatch.setattr(parser_frame, '_storage', parser_frame._JoinStorage())
    size = parser_frame.REUSED_MIN
    first = _joined([b'a' * (size - 10), b'b' * 10])
    assert bytes(first) == b'a' * (size - 10) + b'b' * 10
    storage = parser_frame._storage.buffer
    assert len(storage) == size
    kept = bytes(first)
    del first  # decoded: nothing sees the frame any more
    second = _joined([b'c' * size, b'd' * 7])
    assert parser_frame._storage.buffer is not storage  # (larger: a new storage)
    storage = parser_frame._storage.buffer
    del second
    third = _joined([b'e' * 5, b'f' * (size - 5)])
    assert parser_frame._storage.buffer is storage  # reused
    fourth = _joined([b'g' * 3, b'h' * (size - 3)])  # the third's view still alive: another storage
    assert parser_frame._storage.buffer is not storage
    assert bytes(third) == b'e' * 5 + b'f' * (size - 5)
    assert bytes(fourth) == b'g' * 3 + b'h' * (size - 3)
    assert kept == b'a' * (size - 10) + b'b' * 10


def test_small_and_single_piece_frames_are_not_copied_into_the_storage(monkeypatch):
    monkeypatch.setattr(parser_frame, '_storage', parser_frame._JoinStorage())
    one_piece = b'x' * (2 * parser_frame.REUSED_MIN)
    assert bytes(_joined([one_piece])) == one_piece
    assert bytes(_joined([b'small', b' frame'])) == b'small frame'
    assert parser_frame._storage.buffer == bytearray()


def test_the_request_header_tripwire_checks_the_bytes_on_the_wire():
    def send_without_header(protocol: Any, request: Any, correlation_id: int | None = None) -> int:
        protocol.bytes_to_send.append(request.encode(framed=True))  # a rewrite that no longer encodes the header
        return 1

    with pytest.raises(KafkaPythonChanged, match=r'KafkaProtocol\.send_request no longer encodes the header '
                                                 r'request\.with_header\(\) sets'):
        request_header.install(send_without_header)


def test_the_response_header_tripwire_checks_the_decoded_response(monkeypatch):
    monkeypatch.setattr(response_header, 'keeping_header', lambda entry: entry)  # the header is dropped again
    with pytest.raises(KafkaPythonChanged, match=r'kafka-python 3\.0\.\d+: KafkaProtocol\._process_response no longer '
                                                 r'decodes responses by the class the queued entry names \(got '):
        response_header.install()


def test_a_behavioural_tripwire_fails_on_a_problem_found_or_anything_raised():
    require_behaviour(lambda: None, 'does not matter')
    with pytest.raises(KafkaPythonChanged, match=r'kafka-python 3\.0\.\d+: X no longer does Y \(other bytes\); '
                                                 'kafka_kip must be adapted'):
        require_behaviour(lambda: 'other bytes', 'X no longer does Y')
    with pytest.raises(KafkaPythonChanged, match=r'X no longer does Y \(KeyError: 7\)'):
        require_behaviour(lambda: {}[7], 'X no longer does Y')


def test_fetch_version_trips_when_kafka_python_caps_fetches_elsewhere(monkeypatch):
    def create_fetch_requests(self: Any) -> Any:  # what kafka-python's method would be if it spoke v13 itself
        session = self._session_handlers
        return FetchRequest(topics=session.to_send, forgotten_topics_data=session.to_forget, max_version=13)

    monkeypatch.setattr(kafka.consumer.fetcher.Fetcher, '_create_fetch_requests', create_fetch_requests)
    with pytest.raises(KafkaPythonChanged, match=r'kafka-python 3\.0\.\d+: Fetcher\._create_fetch_requests no longer caps '
                                                 r'FetchRequest at v12; kafka_kip addresses fetches by topic id itself'):
        fetch_version.install()


def test_fetch_version_raises_the_cap_of_one_request_only():
    raise_cap = fetch_version.install()
    ours, stock = (FetchRequest(max_wait_ms=0, min_bytes=1, topics=[], max_version=12) for _ in range(2))
    raise_cap(ours, 13)
    versions = BrokerVersionData(api_versions={1: (4, 17)})
    assert (versions.api_version(ours), versions.api_version(stock)) == (13, 12)


def test_rebound_runs_kafka_pythons_code_with_only_the_named_globals_replaced():
    def builds() -> tuple[type, type]:
        return KafkaNetClient, MetadataRequest

    rebuilt = rebound(builds, KafkaNetClient=KipNetClient)
    assert rebuilt() == (KipNetClient, MetadataRequest)
    assert builds() == (KafkaNetClient, MetadataRequest)
    assert rebuilt.__code__ is builds.__code__ and rebuilt.__qualname__ == builds.__qualname__


def test_response_registry_trips_when_a_defined_class_was_not_registered():
    before = response_registry.snapshot()
    with pytest.raises(KafkaPythonChanged, match='no longer registers FetchResponse in ResponseClassRegistry'):
        response_registry.install(before, [messages.FetchResponse])
    assert response_registry.snapshot() == before
