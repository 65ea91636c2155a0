"""SASL OAUTHBEARER (RFC 7628) with Apache Kafka's default validation of unsecured JWS tokens.

Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``: the token is ``base64url(header).base64url(claims).`` with an
empty signature and ``"alg": "none"``; the ``sub`` claim names the principal, ``exp`` (seconds) is required and must
not have passed, ``iat`` (if present) must not be in the future. Any subject is accepted: enable the mechanism only
where that is wanted (``sasl.enabled.mechanisms``; it is off by default). A bad token is answered, as Kafka's
``OAuthBearerSaslServer`` does, with the JSON error as the server's challenge; the client's ``\\x01`` then fails the
authentication with that message.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
import time

from kafka_kip_reference.broker.sasl_mechanisms import AuthenticationFailed, SaslExchange

OAUTHBEARER = 'OAUTHBEARER'
_CLIENT_FIRST = re.compile(rb'n,(?:a=(?P<authzid>[^,]*))?,\x01(?P<pairs>(?:[^\x01]*\x01)*)\x01')
_INVALID_TOKEN = json.dumps({'status': 'invalid_token'}, separators=(',', ':'))
_CONTROL_A = b'\x01'


class InvalidToken(ValueError):
    """An unsecured JWS Kafka's validator refuses (the message says why)."""


def unsecured_jws_subject(token: str, now_ms: int) -> str:
    """The principal (``sub``) of a valid unsecured JWS; InvalidToken otherwise."""
    parts = token.split('.')
    if len(parts) != 3 or parts[2]:
        raise InvalidToken('an unsecured JWS has three parts and an empty signature')
    header, claims = (_json_part(part) for part in parts[:2])
    if header.get('alg') != 'none':
        raise InvalidToken(f'the JWS alg must be "none", got {header.get("alg")!r}')
    subject, expires, issued = claims.get('sub'), claims.get('exp'), claims.get('iat')
    if not isinstance(subject, str) or not subject.strip():
        raise InvalidToken('no sub claim')
    if isinstance(expires, bool) or not isinstance(expires, (int, float)):
        raise InvalidToken('no exp claim (a number of seconds)')
    if expires * 1000 < now_ms:
        raise InvalidToken(f'the token expired at {expires}')
    if issued is not None and (isinstance(issued, bool) or not isinstance(issued, (int, float))
                               or issued * 1000 > now_ms):
        raise InvalidToken(f'the token is issued in the future or malformed: iat {issued!r}')
    return subject


def _json_part(part: str) -> dict:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + '=' * (-len(part) % 4)))
    except (binascii.Error, ValueError):
        raise InvalidToken('a JWS part is not base64url-encoded JSON') from None
    if not isinstance(value, dict):
        raise InvalidToken('a JWS part is not a JSON object')
    return value


class OAuthBearerExchange(SaslExchange):
    """The server side of SASL OAUTHBEARER with unsecured JWS validation."""

    mechanism = OAUTHBEARER

    def __init__(self) -> None:
        self._error: str | None = None

    def respond(self, token: bytes) -> bytes:
        if self._error is not None and token == _CONTROL_A:
            raise AuthenticationFailed(self._error)
        if self.principal is not None or self._error is not None:
            raise AuthenticationFailed('Authentication failed: unexpected SASL token')
        match = _CLIENT_FIRST.fullmatch(token)
        if match is None:
            raise AuthenticationFailed('Invalid OAUTHBEARER client first message')
        pairs = dict(pair.split(b'=', 1) for pair in match['pairs'].split(_CONTROL_A) if b'=' in pair)
        scheme, _, bearer = pairs.get(b'auth', b'').decode('utf-8', 'replace').partition(' ')
        try:
            if scheme.lower() != 'bearer':
                raise InvalidToken('no Bearer token')
            subject = unsecured_jws_subject(bearer.strip(), int(time.time() * 1000))
        except InvalidToken:
            self._error = _INVALID_TOKEN
            return self._error.encode()
        authzid = match['authzid']
        if authzid and authzid.decode('utf-8', 'replace') != subject:
            raise AuthenticationFailed('Authentication failed: Client requested an authorization id that is '
                                       'different from username')
        self.principal = subject
        return b''
