"""Connection counts as Kafka's ConnectionQuotas bound them: ``max.connections.per.ip`` (and its overrides) closes
a connection over the limit at accept while other addresses are served, on the reference cluster and Apache Kafka
4.4 alike; ``max.connections`` holds new connections unanswered until another closes. Clients come from several
loopback addresses (127.0.0.2, 127.0.0.3, ...)."""
from __future__ import annotations

import select
import socket
import struct

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.constants import NONE
from kafka_kip.protocol.messages import REQUESTS
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient
from tests.support.broker_operations import bootstrap_fixture  # noqa: F401  (the fixture)

_API_VERSIONS_V0 = struct.pack('>ihhih', 10, 18, 0, 7, -1)  # size, api key, version, correlation id, null client id


def connect(bootstrap: str | ReferenceCluster, source: str) -> socket.socket:
    """A connection from ``source`` to the (first) broker."""
    if isinstance(bootstrap, ReferenceCluster):
        bootstrap = bootstrap.bootstrap_servers
    host, port = bootstrap.split(',')[0].rsplit(':', 1)
    return socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))


def served(sock: socket.socket) -> bool:
    """True if ``sock`` gets an answer to ApiVersions, False if the broker closed it."""
    try:
        sock.sendall(_API_VERSIONS_V0)
        head = sock.recv(8)
    except (BrokenPipeError, ConnectionResetError):
        return False
    if not head:
        return False
    size, correlation_id = struct.unpack('>ii', head)
    remaining = size - 4
    while remaining:
        remaining -= len(sock.recv(remaining))
    return correlation_id == 7


def test_max_connections_per_ip_closes_new_connections_at_accept_while_others_are_served(bootstrap):
    cluster = bootstrap  # max.connections.per.ip.overrides: 127.0.0.2:2,127.0.0.3:0,127.0.0.4:3
    first, second = connect(cluster, '127.0.0.2'), connect(cluster, '127.0.0.2')
    assert (served(first), served(second)) == (True, True)
    with connect(cluster, '127.0.0.2') as third:  # the kernel completes the handshake; the broker closes it
        assert served(third) is False
    with connect(cluster, '127.0.0.3') as refused:  # an override of 0 refuses every connection
        assert served(refused) is False
    others = [connect(cluster, '127.0.0.4') for _ in range(3)]
    assert [served(sock) for sock in others] == [True, True, True]
    with connect(cluster, '127.0.0.1') as unlimited:  # the default, 2147483647
        assert served(unlimited) is True
    assert served(first) is True  # the connections under the limit are still served
    first.close()  # a slot frees once the broker has seen the close
    wait_until(lambda: served(connect(cluster, '127.0.0.2')), 'a new connection from 127.0.0.2 served')
    for sock in (second, *others):
        sock.close()


def test_max_connections_per_ip_changes_at_runtime(reference_cluster_factory):
    cluster = reference_cluster_factory(1, broker_config={'max.connections.per.ip': 5})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        first = connect(cluster, '127.0.0.2')
        assert served(first) is True
        resource = ConfigResource(ConfigResourceType.BROKER, '0', configs={'max.connections.per.ip': '1'})
        assert admin.alter_configs([resource], incremental=True) == {'broker': {'0': 'OK'}}
        with connect(cluster, '127.0.0.2') as second:
            assert served(second) is False
        resource.configs = {'max.connections.per.ip.overrides': '127.0.0.2:2'}
        assert admin.alter_configs([resource], incremental=True) == {'broker': {'0': 'OK'}}
        with connect(cluster, '127.0.0.2') as second:
            assert served(second) is True
        first.close()
    finally:
        admin.close()


def set_max_connections(cluster: ReferenceCluster, count: int) -> int:
    """IncrementalAlterConfigs of the cluster-wide ``max.connections`` on a connection closed after it: its error."""
    request_class = REQUESTS[ApiKey.IncrementalAlterConfigs]
    resource = request_class.AlterConfigsResource
    with WireClient(cluster.brokers()[0]) as wire:
        answer = wire.request(request_class(version=1, validate_only=False, resources=[resource(
            resource_type=4, resource_name='', configs=[resource.AlterableConfig(
                name='max.connections', config_operation=0, value=str(count))])]))
    return answer.responses[0].error_code


def test_max_connections_holds_new_connections_until_one_closes(reference_cluster_factory):
    cluster = reference_cluster_factory(1)
    assert set_max_connections(cluster, 2) == NONE  # dynamic, as on Kafka
    wait_until(lambda: not cluster._brokers[0]._connections, 'the broker saw the close of the config connection')
    first, second = connect(cluster, '127.0.0.2'), connect(cluster, '127.0.0.3')
    assert (served(first), served(second)) == (True, True)
    with connect(cluster, '127.0.0.4') as waiting:
        waiting.sendall(_API_VERSIONS_V0)  # accepted by the kernel, not by the broker
        assert served(second) is True  # the broker answered a later request of an open connection...
        assert select.select([waiting], [], [], 0)[0] == []  # ...and not the waiting one's
        first.close()
        head = waiting.recv(8)  # served once the slot frees
        assert struct.unpack('>ii', head)[1] == 7
    second.close()


@pytest.mark.parametrize(('config', 'message'), [
    ({'max.connections.per.ip': 0}, 'max.connections.per.ip can be set to zero only if '
                                    'max.connections.per.ip.overrides property is set.'),
    ({'max.connections.per.ip.overrides': '127.0.0.2=3'},
     "Invalid value 127.0.0.2=3 for configuration max.connections.per.ip.overrides: '127.0.0.2=3' is not host:count"),
])
def test_bad_connection_limits_are_refused(config, message):
    with pytest.raises(ValueError) as raised:
        ReferenceCluster(1, broker_config=config)
    assert str(raised.value).startswith(message)
