"""The SASL mechanisms of the reference cluster's listeners: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.

PLAIN checks the passwords of ``ReferenceCluster(users={name: password})``, SCRAM the credentials of
:mod:`kafka_kip_reference.broker.scram_credentials` (those users', then what AlterUserScramCredentials sets). An
exchange is one connection's server side of a mechanism: :meth:`SaslExchange.respond` takes the client's token and returns the
server's, until :attr:`SaslExchange.principal` is set; a failed authentication raises
:class:`AuthenticationFailed` with the message Apache Kafka sends.

SCRAM (RFC 5802, RFC 7677) is Kafka's ``ScramSaslServer``: credentials are derived from the password with a
random salt and 4096 iterations (Kafka's minimum), the client's proof is checked against the stored key, the
server's signature proves the server knew the credentials. Channel binding is not supported (Kafka neither);
extensions are ignored, except ``tokenauth=true`` (delegation tokens), which fails.
"""
from __future__ import annotations

import base64
import enum
import functools
import hashlib
import hmac
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

PLAIN = 'PLAIN'
SCRAM_SHA_256 = 'SCRAM-SHA-256'
SCRAM_SHA_512 = 'SCRAM-SHA-512'
#: What SaslHandshake offers, in Kafka's order of preference.
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
SCRAM_ITERATIONS = 4096
SCRAM_HASHES = {SCRAM_SHA_256: 'sha256', SCRAM_SHA_512: 'sha512'}
_NONCE_BYTES = 24
_CLIENT_FIRST = re.compile(r'n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<name>[^,]*),r=(?P<nonce>[^,]+)'
                           r'(?P<extensions>(?:,[^,]*)*))')
_CLIENT_FINAL = re.compile(r'c=(?P<binding>[^,]*),r=(?P<nonce>[^,]*)(?:,[^,]*)*,p=(?P<proof>[^,]*)')


class AuthenticationFailed(Exception):
    """A SASL exchange failed; the message is what the client is told."""


class ExchangeState(enum.Enum):
    """Where a SCRAM exchange is."""

    CLIENT_FIRST = 'waiting for the client-first message'
    CLIENT_FINAL = 'waiting for the client-final message'
    COMPLETE = 'complete'
    FAILED = 'failed'


class SaslExchange:
    """The server side of one connection's SASL authentication."""

    mechanism: str
    principal: str | None = None
    """The authenticated user, once the exchange is complete."""

    def respond(self, token: bytes) -> bytes:
        """The server's token in answer to the client's ``token``; AuthenticationFailed when it fails."""
        raise NotImplementedError


def start_exchange(mechanism: str, users: Mapping[str, str],
                   scram_credentials: Callable[[str, str], ScramCredential | None]) -> SaslExchange:
    """A new exchange of ``mechanism`` (one of :data:`MECHANISMS`): PLAIN checks the passwords of ``users``, SCRAM
    the credential ``scram_credentials(user, mechanism)`` (None: no such user)."""
    if mechanism == PLAIN:
        return PlainExchange(users)
    return ScramExchange(mechanism, lambda user: scram_credentials(user, mechanism))


class PlainExchange(SaslExchange):
    """SASL PLAIN: one token, ``authzid NUL user NUL password``; the server answers an empty token."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users

    def respond(self, token: bytes) -> bytes:
        if self.principal is not None:
            raise AuthenticationFailed('Authentication failed: the PLAIN exchange is already complete')
        user = check_plain(token, self._users)
        if user is None:
            raise AuthenticationFailed('Authentication failed: Invalid username or password')
        self.principal = user
        return b''


def check_plain(token: bytes, users: Mapping[str, str]) -> str | None:
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


@dataclass(frozen=True)
class ScramCredential:
    """What a SCRAM server stores for a user: salt, iterations, stored key and server key."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


@functools.lru_cache(maxsize=1024)
def scram_credential(mechanism: str, user: str, password: str) -> ScramCredential:
    """The credential of ``user`` with ``password`` for ``mechanism``, with a random salt of its own (derived once
    per process): as Kafka stores one per user, two users with one password have different salts."""
    salt = os.urandom(16)
    return salted_credential(mechanism, salt, SCRAM_ITERATIONS,
                             hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism], password.encode(), salt, SCRAM_ITERATIONS))


def salted_credential(mechanism: str, salt: bytes, iterations: int, salted_password: bytes) -> ScramCredential:
    """The credential a server stores for ``salted_password`` (the password hashed with ``salt``, ``iterations``
    times): the stored key and server key, never the password."""
    name = SCRAM_HASHES[mechanism]
    client_key = hmac.new(salted_password, b'Client Key', name).digest()
    return ScramCredential(salt, iterations, hashlib.new(name, client_key).digest(),
                           hmac.new(salted_password, b'Server Key', name).digest())


class ScramExchange(SaslExchange):
    """SCRAM-SHA-256 / SCRAM-SHA-512: client-first, server-first, client-final, server-final."""

    def __init__(self, mechanism: str, credentials: Callable[[str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self._hash = SCRAM_HASHES[mechanism]
        self._credentials = credentials
        self.state = ExchangeState.CLIENT_FIRST
        self._user = ''
        self._credential: ScramCredential | None = None
        self._client_first_bare = ''
        self._gs2_header = ''
        self._server_first = ''
        self._nonce = ''

    def respond(self, token: bytes) -> bytes:
        try:
            if self.state is ExchangeState.CLIENT_FIRST:
                answer = self._client_first(_text(token))
                self.state = ExchangeState.CLIENT_FINAL
            elif self.state is ExchangeState.CLIENT_FINAL:
                answer = self._client_final(_text(token))
                self.state = ExchangeState.COMPLETE
                self.principal = self._user
            else:
                raise AuthenticationFailed(f'Authentication failed: unexpected SASL token, the exchange is '
                                           f'{self.state.value}')
        except AuthenticationFailed:
            self.state = ExchangeState.FAILED
            raise
        return answer.encode()

    def _client_first(self, message: str) -> str:
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise AuthenticationFailed(self._invalid_credentials())
        extensions = dict(item.split('=', 1) for item in match['extensions'].split(',')[1:] if '=' in item)
        if extensions.get('tokenauth', 'false').lower() == 'true':
            raise AuthenticationFailed(f'Token Authentication failed: Invalid tokenId : {match["name"]}')
        user = _unescape_name(match['name'])
        credential = self._credentials(user) if user is not None else None
        if credential is None:
            raise AuthenticationFailed(self._invalid_credentials())
        if match['authzid'] and _unescape_name(match['authzid']) != user:
            raise AuthenticationFailed('Authentication failed: Client requested an authorization id that is '
                                       'different from username')
        self._user = user
        self._credential = credential
        self._gs2_header = message[:match.start('bare')]
        self._client_first_bare = match['bare']
        self._nonce = match['nonce'] + base64.b64encode(os.urandom(_NONCE_BYTES)).decode()
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f'r={self._nonce},s={salt},i={self._credential.iterations}'
        return self._server_first

    def _client_final(self, message: str) -> str:
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None or match['nonce'] != self._nonce:
            raise AuthenticationFailed(self._invalid_credentials())
        if match['binding'] != base64.b64encode(self._gs2_header.encode()).decode():
            raise AuthenticationFailed(self._invalid_credentials())
        credential = self._credential
        auth_message = ','.join((self._client_first_bare, self._server_first, message[:match.start('proof') - 3]))
        signature = hmac.new(credential.stored_key, auth_message.encode(), self._hash).digest()
        try:
            proof = base64.b64decode(match['proof'], validate=True)
        except ValueError:
            raise AuthenticationFailed(self._invalid_credentials()) from None
        if len(proof) != len(signature):
            raise AuthenticationFailed(self._invalid_credentials())
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise AuthenticationFailed(self._invalid_credentials())
        server_signature = hmac.new(credential.server_key, auth_message.encode(), self._hash).digest()
        return 'v=' + base64.b64encode(server_signature).decode()

    def _invalid_credentials(self) -> str:
        return f'Authentication failed during authentication due to invalid credentials with SASL mechanism ' \
               f'{self.mechanism}'


def _text(token: bytes) -> str:
    try:
        return token.decode('utf-8')
    except UnicodeDecodeError:
        raise AuthenticationFailed('Authentication failed: the SCRAM message is not UTF-8') from None


def _unescape_name(name: str) -> str | None:
    """A SCRAM saslname as a user name (``=2C`` is ',', ``=3D`` is '='); None when an '=' escapes nothing."""
    if re.search(r'=(?!2C|3D)', name):
        return None
    return name.replace('=2C', ',').replace('=3D', '=')
