"""One reference broker: an asyncio listener, Kafka framing, header decoding, SASL and dispatch.

Requests of a connection are answered one at a time, in order, as Kafka does (it mutes a channel
while a request is in flight). Bad input never reaches a handler: an oversize or negative frame,
an unknown API key, an unsupported version (except ApiVersions, which Kafka answers with a v0
UNSUPPORTED_VERSION response listing its versions) or an undecodable body closes the connection,
as Kafka does. An exception inside a handler is a broker bug: it is recorded in
``ClusterState.internal_errors`` and the connection is closed.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import struct
from dataclasses import dataclass

from kafka_kip.protocol.messages import REQUESTS, RESPONSES
from kafka_kip.testing import apis
from kafka_kip.testing.apis.versions import api_version_entries
from kafka_kip.testing.cluster import BrokerAddress, ClusterState
from kafka_kip.testing.codes import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    UNSUPPORTED_VERSION,
)
from kafka_kip.testing.context import GROUP_API_KEYS, RequestContext
from kafka_kip.testing.control import ControlledRequest

log = logging.getLogger(__name__)

#: Kafka's socket.request.max.bytes default.
MAX_REQUEST_BYTES = 100 * 1024 * 1024
_HEADER = struct.Struct('>hhih')  # api_key, api_version, correlation_id, client_id length
_SIZE = struct.Struct('>i')
_FRAME_AND_CORRELATION = struct.Struct('>ii')
_JOIN_LIMIT = 64 * 1024  # bodies larger than this are written separately instead of copied into a frame

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36


class _Close(Exception):
    """Close the connection without answering (Kafka's answer to a malformed request)."""


@dataclass
class _Connection:
    sock: socket.socket
    writer: asyncio.StreamWriter | None = None
    handshake_done: bool = False
    authenticated: bool = False
    principal: str | None = None
    close_after_response: bool = False


def _skip_tagged_fields(data: bytes, pos: int) -> int:
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        _, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        pos += size
    if pos > len(data):
        raise _Close('truncated tagged fields')
    return pos


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise _Close('bad varint')
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


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
    for field in struct.fields.values():
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue
        if not (field.is_array() or field.is_struct() or field.type_str in _NULLABLE_TYPES):
            continue
        if field.is_struct_array():
            members = _struct_plan(field.array_of, version)
        elif field.is_struct():
            members = _struct_plan(field, version)
        else:
            members = ()
        plan.append((field.name, field.nullable_for_version_q(version), field.is_array(), members))
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
    """A broker's listener; its state lives in the shared :class:`ClusterState`.

    The broker accepts connections itself (a reader callback on the listening socket) rather than
    through ``asyncio.start_server`` or ``sock_accept``: with those, on Python 3.11, a connection
    accepted just before the broker stops is leaked half-open, and a stopped broker must drop every
    connection.
    """

    def __init__(self, state: ClusterState, node_id: int, host: str, port: int = 0) -> None:
        self.state = state
        self.node_id = node_id
        self.host = host
        self.port = port
        self._listener: socket.socket | None = None
        self._connections: dict[asyncio.Task, _Connection] = {}

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
        asyncio.get_running_loop().add_reader(listener.fileno(), self._accept)
        self.state.addresses[self.node_id] = BrokerAddress(self.node_id, self.host, self.port)
        self.state.broker_started(self.node_id)

    async def stop(self) -> None:
        """Leave the cluster (leadership moves first), then close the listener and every connection."""
        if self._listener is None:
            return
        self.state.broker_stopped(self.node_id)
        asyncio.get_running_loop().remove_reader(self._listener.fileno())
        self._listener.close()
        self._listener = None
        for task, conn in list(self._connections.items()):
            if conn.writer is not None:
                conn.writer.transport.abort()
            else:
                conn.sock.close()  # the task may be cancelled before it ever runs
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                log.exception('reference broker %d: accept failed', self.node_id)
                return
            sock.setblocking(False)
            conn = _Connection(sock)
            task = loop.create_task(self._serve(conn))
            self._connections[task] = conn
            task.add_done_callback(self._connections.pop)

    async def _serve(self, conn: _Connection) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=conn.sock)
        except BaseException:
            conn.sock.close()
            raise
        conn.writer = writer
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                if size < _HEADER.size or size > MAX_REQUEST_BYTES:
                    break
                frame = await self._answer(conn, await reader.readexactly(size))
                if frame:
                    for part in frame:
                        writer.write(part)
                    await writer.drain()
                if conn.close_after_response:
                    break
        except (_Close, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.transport.abort()

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
        if not versions[0] <= api_version <= versions[1]:
            if api_key == API_VERSIONS_KEY:
                return self._unsupported_api_versions(correlation_id)
            raise _Close(f'unsupported version {api_version} of api {api_key}')
        flexible = request_class.flexible_version_q(api_version)
        if flexible:
            pos = _skip_tagged_fields(data, pos)
        try:
            request = request_class.decode(memoryview(data)[pos:], version=api_version)
        except Exception as exc:
            raise _Close(f'undecodable request: {exc}') from exc
        _check_required(_required_plan(request_class, api_version), request)
        response = None
        if self.state.controls:
            response = await self._control(ControlledRequest(self.node_id, api_key, api_version, correlation_id,
                                                             client_id, request))
        if response is None:
            if self.requires_sasl and not conn.authenticated and api_key != API_VERSIONS_KEY:
                response = self._authenticate(conn, api_key, request, api_version)
            else:
                response = await self._dispatch(conn, api_key, api_version, correlation_id, client_id, request)
        if response is None:
            return None
        try:
            body = response.encode(version=api_version)
        except Exception as exc:
            self.state.internal_errors.append(exc)
            log.exception('reference broker %d: cannot encode %s', self.node_id, type(response).__name__)
            raise _Close('encode failure') from exc
        # ApiVersionsResponse always uses response header v0 (KIP-511); flexible headers add empty tags.
        tagged = flexible and api_key != API_VERSIONS_KEY
        head = _FRAME_AND_CORRELATION.pack(len(body) + 4 + tagged, correlation_id) + (b'\0' if tagged else b'')
        if len(body) > _JOIN_LIMIT:
            return head, body
        return (head + body,)

    async def _dispatch(self, conn: _Connection, api_key: int, api_version: int, correlation_id: int,
                        client_id: str | None, request: object) -> object:
        if api_key in GROUP_API_KEYS:
            handler = self.state.groups.HANDLERS[api_key]
        elif api_key in (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY):
            return self._sasl_not_expected(api_key, api_version)
        else:
            handler = apis.HANDLERS[api_key]
        ctx = RequestContext(self.node_id, api_key, api_version, correlation_id, client_id, conn.principal,
                             self.state)
        try:
            return await handler(request, ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.state.internal_errors.append(exc)
            log.exception('reference broker %d: handler of api %d v%d failed', self.node_id, api_key,
                          api_version)
            raise _Close('handler failure') from exc

    async def _control(self, request: ControlledRequest) -> object:
        """The response a control answers with, or None to handle the request; _Close for a dropped one."""
        try:
            outcome = await self.state.controls.apply(request)
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
        response = RESPONSES[API_VERSIONS_KEY](version=0, error_code=UNSUPPORTED_VERSION,
                                               api_keys=api_version_entries(self.state.api_versions))
        body = response.encode(version=0)
        return (_FRAME_AND_CORRELATION.pack(len(body) + 4, correlation_id) + body,)

    # -- SASL PLAIN ---------------------------------------------------------------------------

    def _authenticate(self, conn: _Connection, api_key: int, request: object, version: int) -> object:
        """The SASL exchange of an unauthenticated connection on a listener that requires it."""
        if api_key == SASL_HANDSHAKE_KEY:
            mechanism = request.mechanism
            error = 0 if mechanism == 'PLAIN' else UNSUPPORTED_SASL_MECHANISM
            conn.handshake_done = error == 0
            return RESPONSES[api_key](version=version, error_code=error, mechanisms=['PLAIN'])
        if api_key != SASL_AUTHENTICATE_KEY or not conn.handshake_done:
            raise _Close(f'api {api_key} before SASL authentication')
        user = _check_plain(bytes(request.auth_bytes or b''), self.state.users)
        response_class = RESPONSES[api_key]
        if user is None:
            conn.close_after_response = True  # Kafka sends the failure, then closes the connection
            return response_class(version=version, error_code=SASL_AUTHENTICATION_FAILED,
                                  error_message='Authentication failed: Invalid username or password',
                                  auth_bytes=b'')
        conn.authenticated = True
        conn.principal = user
        return response_class(version=version, error_code=0, error_message=None, auth_bytes=b'',
                              session_lifetime_ms=0)

    def _sasl_not_expected(self, api_key: int, version: int) -> object:
        """SASL requests on a listener without SASL or after authentication: ILLEGAL_SASL_STATE."""
        if api_key == SASL_HANDSHAKE_KEY:
            return RESPONSES[api_key](version=version, error_code=ILLEGAL_SASL_STATE, mechanisms=[])
        return RESPONSES[api_key](version=version, error_code=ILLEGAL_SASL_STATE,
                                  error_message='SASL is not enabled on this listener or already done',
                                  auth_bytes=b'')


def _check_plain(token: bytes, users: dict[str, str]) -> str | None:
    """The authenticated user of a SASL PLAIN token (authzid NUL authcid NUL password), or None."""
    parts = token.split(b'\0')
    if len(parts) != 3:
        return None
    try:
        authzid, user, password = (p.decode('utf-8') for p in parts)
    except UnicodeDecodeError:
        return None
    if authzid not in ('', user) or users.get(user) != password:
        return None
    return user
