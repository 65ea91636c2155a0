"""Wire-level conformance: raw requests, each test the minimal reproduction of what it checks.

These use kafka-python's request classes on plain sockets, no client state machine, so a failure points
at the broker's encoding or handling of one request.
"""
from __future__ import annotations

import struct
from typing import Any

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, FindCoordinatorResponse

from integration.targets import BrokerTarget
from kafka_kip.protocol.constants import COORDINATOR_NOT_AVAILABLE, MEMBER_ID_REQUIRED, UNSUPPORTED_VERSION
from kafka_kip_reference.external.probe import encode_request, kafka_request, send_raw
from kafka_kip_reference.fixtures.conditions import wait_until

API_VERSIONS_KEY = ApiKey.ApiVersions
JOIN_GROUP, HEARTBEAT = ApiKey.JoinGroup, ApiKey.Heartbeat
LEAVE_GROUP, SYNC_GROUP = ApiKey.LeaveGroup, ApiKey.SyncGroup


@pytest.mark.known_bug('tansu', 'tansu', 'answers an unknown ApiVersions version with error 0 in the v4 layout')
@pytest.mark.known_bug('librdkafka-mock', 'librdkafka-mock', 'answers UNSUPPORTED_VERSION with a flexible-style body '
                        '(a 1-byte array count), which no client can decode as the v0 layout Kafka requires; '
                        "this is why kafka-python's default negotiation (ApiVersions v4 first) cannot "
                        'bootstrap')
def test_api_versions_unsupported_version_is_answered_in_v0_layout(target: BrokerTarget) -> None:
    """ApiVersions at an unknown version is answered UNSUPPORTED_VERSION in the v0 layout (KIP-511)."""
    # Kafka's rule (KIP-511): a broker answers an ApiVersions version it does not know with
    # UNSUPPORTED_VERSION in the v0 layout, listing its own ApiVersions range, so clients can retry.
    payload = bytearray(encode_request(ApiVersionsRequest(version=3, client_software_name='conformance',
                                                          client_software_version='1')))
    struct.pack_into('>h', payload, 2, 127)  # request_api_version in the request header
    frame = send_raw(target.bootstrap_servers.split(',')[0], bytes(payload))
    correlation_id, error_code, count = struct.unpack_from('>ihi', frame)
    assert (correlation_id, error_code) == (1, UNSUPPORTED_VERSION)
    assert len(frame) in (10 + 6 * count, 14 + 6 * count)  # v0 body, optionally followed by throttle_time_ms
    keys = {key: (low, high) for key, low, high in (struct.unpack_from('>hhh', frame, 10 + 6 * i)
                                                    for i in range(count))}
    assert keys[API_VERSIONS_KEY] == target.api_versions[API_VERSIONS_KEY]


def _coordinator(bootstrap: str, group: str) -> str:
    request = FindCoordinatorRequest(version=1, key=group, key_type=0)

    def found() -> Any:
        response = kafka_request(bootstrap.split(',')[0], request, FindCoordinatorResponse)
        # Apache Kafka answers COORDINATOR_NOT_AVAILABLE (retriable) until its offsets topic exists
        return response if response.error_code != COORDINATOR_NOT_AVAILABLE else None

    response = wait_until(found, f'a coordinator for {group}')
    assert response.error_code == 0
    return f'{response.host}:{response.port}'


def group_handshake(bootstrap: str, group: str, versions: dict[int, int]) -> tuple[int, int, bytes, int, int]:
    """One member joins ``group``, syncs as leader, heartbeats and leaves, at ``versions`` per API key.

    Returns ``(join error, sync error, assignment, heartbeat error, leave error)``.
    """
    address = _coordinator(bootstrap, group)
    protocols = [JoinGroupRequest.JoinGroupRequestProtocol(name='range', metadata=b'subscription')]

    def join(member_id: str) -> Any:
        return kafka_request(address, JoinGroupRequest(
            version=versions[JOIN_GROUP], group_id=group, session_timeout_ms=3000, rebalance_timeout_ms=3000,
            member_id=member_id, group_instance_id=None, protocol_type='consumer', reason=None,
            protocols=protocols), JoinGroupResponse, timeout=10.0)

    joined = join('')
    if joined.error_code == MEMBER_ID_REQUIRED:  # KIP-394: join again with the id the broker handed out
        joined = join(joined.member_id)
    member, generation = joined.member_id, joined.generation_id
    synced = kafka_request(address, SyncGroupRequest(
        version=versions[SYNC_GROUP], group_id=group, generation_id=generation, member_id=member,
        group_instance_id=None, protocol_type='consumer', protocol_name='range',
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b'assigned')]),
        SyncGroupResponse)
    beat = kafka_request(address, HeartbeatRequest(
        version=versions[HEARTBEAT], group_id=group, generation_id=generation, member_id=member,
        group_instance_id=None), HeartbeatResponse)
    left = kafka_request(address, LeaveGroupRequest(
        version=versions[LEAVE_GROUP], group_id=group, member_id=member,
        members=[LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None, reason=None)]),
        LeaveGroupResponse)
    return joined.error_code, synced.error_code, synced.assignment, beat.error_code, left.error_code


_GROUP_REQUESTS = {JOIN_GROUP: JoinGroupRequest, SYNC_GROUP: SyncGroupRequest, HEARTBEAT: HeartbeatRequest,
                   LEAVE_GROUP: LeaveGroupRequest}


@pytest.mark.requires('groups')
def test_group_handshake_at_newest_advertised_versions(target: BrokerTarget, topic: str) -> None:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup at the newest versions both sides know succeed."""
    versions = {key: min(target.api_versions[key][1], cls.max_version)
                for key, cls in _GROUP_REQUESTS.items()}
    assert group_handshake(target.bootstrap_servers, f'{topic}-g', versions) == (0, 0, b'assigned', 0, 0)


_MOCK_WORKING_GROUP_VERSIONS = {JOIN_GROUP: 5, SYNC_GROUP: 3, HEARTBEAT: 3, LEAVE_GROUP: 2}


def _mock_bug(reason: str, raises: type[Exception]) -> pytest.MarkDecorator:
    return pytest.mark.known_bug('librdkafka-mock', 'librdkafka-mock', reason, raises=raises)


@pytest.mark.parametrize('api_key, version', [
    pytest.param(JOIN_GROUP, 6, marks=_mock_bug('JoinGroup v6 (first flexible version) is mis-parsed; '
                                                'the mock closes the connection without answering',
                                                ConnectionError)),
    pytest.param(SYNC_GROUP, 4, marks=_mock_bug('SyncGroup v4 is read past its end (PROTOUFLOW) and the '
                                                'connection is closed', ConnectionError)),
    pytest.param(LEAVE_GROUP, 3, marks=_mock_bug('LeaveGroup v3 is answered without the members array',
                                                 struct.error)),
    pytest.param(LEAVE_GROUP, 4, marks=_mock_bug('LeaveGroup v4 is answered in a layout that does not decode',
                                                 IndexError)),
    pytest.param(HEARTBEAT, 4),  # the flexible Heartbeat works: capping it is not needed
], ids=['JoinGroup-v6', 'SyncGroup-v4', 'LeaveGroup-v3', 'LeaveGroup-v4', 'Heartbeat-v4'])
@pytest.mark.target_only('librdkafka-mock')
def test_librdkafka_mock_flexible_group_versions(api_key: int, version: int) -> None:
    """The group handshake with one API at its first flexible version, on an uncapped mock cluster."""
    # An uncapped mock cluster: LibrdkafkaMockTarget caps exactly these APIs because of this test.
    from integration.librdkafka_mock import MockCluster

    try:
        mock = MockCluster(brokers=1)
    except (FileNotFoundError, OSError) as exc:
        pytest.skip(f'librdkafka mock cluster unavailable: {exc}')
    with mock:
        mock.set_initial_rebalance_delay(0)
        versions = {**_MOCK_WORKING_GROUP_VERSIONS, api_key: version}
        assert group_handshake(mock.bootstrap_servers, 'g', versions) == (0, 0, b'assigned', 0, 0)
