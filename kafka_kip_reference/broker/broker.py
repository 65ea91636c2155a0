"""One reference broker: an asyncio listener, Kafka framing, header decoding, controls and dispatch.

Requests of a connection are answered one at a time, in order, as Kafka does (it mutes a channel
while a request is in flight). Bad input never reaches a handler: an oversize or negative frame,
an unknown API key, an unsupported version (except ApiVersions, which Kafka answers with a v0
UNSUPPORTED_VERSION response listing its versions) or an undecodable body closes the connection,
as Kafka does; so do the limits of :mod:`kafka_kip_reference.broker.connection_limits` (request size, idle time). Until a
connection has authenticated on a cluster with SASL users, only ApiVersions and the
SASL exchange get through. Requests go to the request controls (:mod:`kafka_kip_reference.broker.control`), then to
the KIP-1243 check of their header's consistency state (:mod:`kafka_kip_reference.broker.consistency_check`), then to
their handler in the registry (:mod:`kafka_kip_reference.broker.registry`), through the authorization policy of their API
when the cluster has an authorizer (:mod:`kafka_kip_reference.broker.authorization`). An exception inside a handler is a broker
bug: it is recorded in ``ClusterState.internal_errors`` and the connection is closed.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
from collections import Counter
from dataclasses import dataclass, field

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.features import KIP_1243
from kafka_kip.protocol.headers import (
    MalformedHeader,
    consistency_state_tags,
    flexible_response_header,
    read_header_tags,
)
from kafka_kip.protocol.messages import REQUESTS, RESPONSES
from kafka_kip_reference.broker.advertised import api_version_entries
from kafka_kip_reference.broker.apis import HANDLERS
from kafka_kip_reference.broker.apis.sasl import respond_raw_token
from kafka_kip_reference.broker.authorization import authorize_and_handle
from kafka_kip_reference.broker.connection_limits import (
    ConnectionLimits,
    close_idle_connections,
    max_connections_from,
)
from kafka_kip_reference.broker.consistency_check import check as check_consistency
from kafka_kip_reference.broker.context import CloseConnection, RequestContext, Session
from kafka_kip_reference.broker.control import ControlledRequest, Controls
from kafka_kip_reference.broker.groups import GroupCoordinator
from kafka_kip_reference.broker.model import BrokerAddress
from kafka_kip_reference.broker.state import ClusterState
from kafka_kip_reference.broker.transactions import TransactionCoordinator

log = logging.getLogger(__name__)

_HEADER = struct.Struct('>hhih')  # api_key, api_version, correlation_id, client_id length
_SIZE = struct.Struct('>i')
_FRAME_AND_CORRELATION = struct.Struct('>ii')
_JOIN_LIMIT = 64 * 1024  # bodies larger than this are written separately instead of copied into a frame

API_VERSIONS_KEY = ApiKey.ApiVersions
#: What a connection may send before it has authenticated on a listener that requires SASL.
_SASL_EXCHANGE = frozenset({ApiKey.ApiVersions, ApiKey.SaslHandshake, ApiKey.SaslAuthenticate})


class _Close(Exception):
    """Close the connection without answering (Kafka's answer to a malformed request)."""


@dataclass
class _Connection:
    sock: socket.socket
    last_active: float
    """Loop time of the last request read or response written (connections.max.idle.ms)."""
    writer: asyncio.StreamWriter | None = None
    session: Session = field(default_factory=Session)
    busy: bool = False
    """A request is being answered."""

    def close(self) -> None:
        if self.writer is not None:
            self.writer.transport.abort()
        else:
            self.sock.close()


# (attribute, nullable, is_array, plan of the struct members or ()) per untagged field that may decode
# as None: arrays, structs, strings and bytes (a None uuid is the zero uuid, not a null)
_NULLABLE_TYPES = ('string', 'bytes', 'records')
_Plan = tuple[tuple[str, bool, bool, tuple], ...]
_plans: dict[tuple[type, int], _Plan] = {}


def _required_plan(request_class: type, version: int) -> _Plan:
    key = (request_class, version)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _struct_plan(request_class._struct, version)
    return plan


def _struct_plan(struct, version: int) -> _Plan:
    plan = []
    for member in struct.fields.values():
        if not member.for_version_q(version) or member.tagged_field_q(version):
            continue
        if not (member.is_array() or member.is_struct() or member.type_str in _NULLABLE_TYPES):
            continue
        if member.is_struct_array():
            members = _struct_plan(member.array_of, version)
        elif member.is_struct():
            members = _struct_plan(member, version)
        else:
            members = ()
        plan.append((member.name, member.nullable_for_version_q(version), member.is_array(), members))
    return tuple(plan)


def _check_required(plan: _Plan, obj: object) -> None:
    """Kafka rejects a null in a non-nullable field while parsing; kafka-python's decoder does not."""
    for name, nullable, is_array, members in plan:
        value = getattr(obj, name)
        if value is None:
            if not nullable:
                raise _Close(f'null value in non-nullable field {name}')
        elif members:
            for item in (value if is_array else (value,)):
                _check_required(members, item)


class Broker:
    """A broker's listener; its state lives in the shared :class:`ClusterState` and :class:`GroupCoordinator`.

    The broker accepts connections itself (a reader callback on the listening socket) rather than
    through ``asyncio.start_server`` or ``sock_accept``: with those, on Python 3.11, a connection
    accepted just before the broker stops is leaked half-open, and a stopped broker must drop every
    connection.
    """

    def __init__(self, state: ClusterState, groups: GroupCoordinator, transactions: TransactionCoordinator,
                 controls: Controls, node_id: int, host: str, port: int = 0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.state = state
        self.ssl_context = ssl_context
        self.groups = groups
        self.transactions = transactions
        self.controls = controls
        self.node_id = node_id
        self.host = host
        self.port = port
        self._listener: socket.socket | None = None
        self._connections: dict[asyncio.Task, _Connection] = {}
        self._per_address: Counter[str] = Counter()
        self._accepting = False
        """The listener is watched for new connections (not while ``max.connections`` are open)."""
        self._limits = ConnectionLimits.from_config(state.config)
        self._idle_sweeper: asyncio.Task | None = None

    @property
    def requires_sasl(self) -> bool:
        return bool(self.state.users)

    async def start(self) -> None:
        """Listen (on the port of the previous start, if any) and rejoin the cluster."""
        if self._listener is not None:
            return
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self.port))
            listener.listen(128)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self.port = listener.getsockname()[1]
        loop = asyncio.get_running_loop()
        self._watch_listener(True)
        self._idle_sweeper = loop.create_task(close_idle_connections(self._connections.values, self._limits.idle_s))
        self.state.addresses[self.node_id] = BrokerAddress(self.node_id, self.host, self.port)
        self.state.broker_started(self.node_id)

    async def stop(self) -> None:
        """Leave the cluster (leadership moves first), then close the listener and every connection."""
        if self._listener is None:
            return
        self.state.broker_stopped(self.node_id)
        self._watch_listener(False)
        self._listener.close()
        self._listener = None
        self._idle_sweeper.cancel()
        for task, conn in list(self._connections.items()):
            conn.close()  # the task may be cancelled before it ever runs
            task.cancel()
        await asyncio.gather(self._idle_sweeper, *self._connections, return_exceptions=True)

    def _watch_listener(self, accepting: bool) -> None:
        if accepting != self._accepting:
            loop = asyncio.get_running_loop()
            if accepting:
                loop.add_reader(self._listener.fileno(), self._accept)
            else:
                loop.remove_reader(self._listener.fileno())
            self._accepting = accepting

    def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        config = self.state.config.for_broker(self.node_id)  # its own dynamic configs too
        while True:
            if len(self._connections) >= config.int('max.connections'):
                self._watch_listener(False)  # until a connection closes: new ones wait in the backlog
                return
            try:
                sock, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                log.exception('reference broker %d: accept failed', self.node_id)
                return
            address = peer[0]
            if self._per_address[address] >= max_connections_from(config, address):
                sock.close()  # Kafka's TooManyConnectionsException: closed unanswered
                continue
            sock.setblocking(False)
            conn = _Connection(sock, loop.time())
            conn.session.host = address
            task = loop.create_task(self._serve(conn))
            self._connections[task] = conn
            self._per_address[address] += 1
            task.add_done_callback(self._closed)

    def _closed(self, task: asyncio.Task) -> None:
        address = self._connections.pop(task).session.host
        self._per_address[address] -= 1
        if not self._per_address[address]:
            del self._per_address[address]
        if self._listener is not None and not self._accepting:
            self._watch_listener(True)
            self._accept()

    async def _serve(self, conn: _Connection) -> None:
        try:
            reader, writer = await self._open_streams(conn.sock)
        except (ssl.SSLError, OSError):  # a failed TLS handshake, a connection reset before it completed
            conn.sock.close()
            return
        except BaseException:
            conn.sock.close()
            raise
        conn.writer = writer
        loop = asyncio.get_running_loop()
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                if size < _HEADER.size or size > self._max_request_bytes(conn):
                    break
                data = await reader.readexactly(size)
                conn.busy = True
                if conn.session.raw_sasl_token_next:  # after SaslHandshake v0: a bare SASL token, not a request
                    answer = respond_raw_token(data, conn.session)
                    if answer is None:
                        await asyncio.sleep(self._limits.failed_authentication_delay_s)
                        break
                    writer.write(_SIZE.pack(len(answer)) + answer)
                    await writer.drain()
                else:
                    frame = await self._answer(conn, data)
                    if frame:
                        for part in frame:
                            writer.write(part)
                        await writer.drain()
                    if conn.session.close_after_response:
                        break
                    if conn.session.throttle_ms:  # a quota was broken: read nothing more until the throttle ends
                        await asyncio.sleep(conn.session.throttle_ms / 1000)
                        conn.session.throttle_ms = 0
                conn.busy = False
                conn.last_active = loop.time()
        except (_Close, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.transport.abort()

    def _max_request_bytes(self, conn: _Connection) -> int:
        """The largest request ``conn`` may send now: before SASL authentication, ``sasl.server.max.receive.size``."""
        if self.requires_sasl and not conn.session.authenticated:
            return self._limits.max_unauthenticated_request_bytes
        return self._limits.max_request_bytes

    async def _open_streams(self, sock: socket.socket) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The connection's streams; on a TLS listener once the handshake is done (within the idle time)."""
        if self.ssl_context is None:
            return await asyncio.open_connection(sock=sock)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        idle = self._limits.idle_s
        transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock=sock, ssl=self.ssl_context,
                                                          ssl_handshake_timeout=idle if idle > 0 else None)
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)

    async def _answer(self, conn: _Connection, data: bytes) -> tuple[bytes, ...] | None:
        api_key, api_version, correlation_id, client_id_len = _HEADER.unpack_from(data, 0)
        pos = _HEADER.size
        client_id = None
        if client_id_len >= 0:
            client_id = data[pos:pos + client_id_len].decode('utf-8', 'replace')
            pos += client_id_len
        request_class = REQUESTS.get(api_key)
        versions = self.state.api_versions.get(api_key)
        if request_class is None or versions is None:
            raise _Close(f'unknown api key {api_key}')
        if not versions[0] <= api_version <= versions[1] or not HANDLERS[api_key].handles(api_version):
            if api_key == API_VERSIONS_KEY:
                return self._unsupported_api_versions(correlation_id)
            raise _Close(f'unsupported version {api_version} of api {api_key}')
        flexible = request_class.flexible_version_q(api_version)
        consistency = None
        if flexible:
            try:
                consistency, pos = read_header_tags(data, pos)
            except MalformedHeader as exc:
                raise _Close(str(exc)) from exc
            if not self.state.honours(KIP_1243):
                consistency = None  # a stock broker skips the tag
        try:
            request = request_class.decode(memoryview(data)[pos:], version=api_version)
        except Exception as exc:
            raise _Close(f'undecodable request: {exc}') from exc
        _check_required(_required_plan(request_class, api_version), request)
        response = None
        if self.controls:
            response = await self._control(ControlledRequest(self.node_id, api_key, api_version, correlation_id,
                                                             client_id, request, consistency))
        if response is None:
            if self.requires_sasl and not conn.session.authenticated and api_key not in _SASL_EXCHANGE:
                raise _Close(f'api {api_key} before SASL authentication')
            if consistency is not None:
                response = await check_consistency(self.state, self.node_id, api_key, api_version, request,
                                                   consistency)
        if response is None:
            response = await self._dispatch(conn, api_key, api_version, correlation_id, client_id, request,
                                            len(data))
        if response is None:
            return None
        try:
            body = response.encode(version=api_version)
        except Exception as exc:
            self.state.internal_errors.append(exc)
            log.exception('reference broker %d: cannot encode %s', self.node_id, type(response).__name__)
            raise _Close('encode failure') from exc
        # a flexible response header carries its tags: the image offset read now, after the response was built
        # (KIP-1243), or none.
        tags = b''
        if flexible_response_header(api_key, flexible):
            tags = (consistency_state_tags(self.state.cluster_id, self.state.view(self.node_id).offset)
                    if self.state.honours(KIP_1243) else b'\0')
        head = _FRAME_AND_CORRELATION.pack(len(body) + 4 + len(tags), correlation_id) + tags
        if len(body) > _JOIN_LIMIT:
            return head, body
        return (head + body,)

    async def _dispatch(self, conn: _Connection, api_key: int, api_version: int, correlation_id: int,
                        client_id: str | None, request: object, request_bytes: int) -> object:
        ctx = RequestContext(self.node_id, api_key, api_version, correlation_id, client_id, conn.session,
                             self.state, self.groups, self.transactions, request_bytes)
        try:
            return await authorize_and_handle(HANDLERS[api_key].handle, request, ctx)
        except asyncio.CancelledError:
            raise
        except CloseConnection as exc:
            raise _Close(str(exc)) from exc
        except Exception as exc:
            self.state.internal_errors.append(exc)
            log.exception('reference broker %d: handler of api %d v%d failed', self.node_id, api_key,
                          api_version)
            raise _Close('handler failure') from exc

    async def _control(self, request: ControlledRequest) -> object:
        """The response a control answers with, or None to handle the request; _Close for a dropped one."""
        try:
            outcome = await self.controls.apply(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug of the test's control function: fail the test, close the connection
            self.state.internal_errors.append(exc)
            log.exception('reference broker %d: control of api %d failed', self.node_id, request.api_key)
            raise _Close('control failure') from exc
        if outcome.drop:
            raise _Close('dropped by a control')
        return outcome.response

    def _unsupported_api_versions(self, correlation_id: int) -> tuple[bytes, ...]:
        response = RESPONSES[API_VERSIONS_KEY](version=0, error_code=constants.UNSUPPORTED_VERSION,
                                               api_keys=api_version_entries(self.state.api_versions))
        body = response.encode(version=0)
        return (_FRAME_AND_CORRELATION.pack(len(body) + 4, correlation_id) + body,)
