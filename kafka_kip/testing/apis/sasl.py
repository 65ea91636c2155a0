"""SaslHandshake and SaslAuthenticate: SASL PLAIN on listeners of a cluster with ``users``.

Until a connection is authenticated the broker lets only ApiVersions and these two through (anything else
closes the connection, as Kafka does). On a listener without SASL, or after authentication, both are
answered with ILLEGAL_SASL_STATE.
"""
from __future__ import annotations

import asyncio

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.messages import RESPONSES
from kafka_kip.testing.codes import (
    ILLEGAL_SASL_STATE,
    NONE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
)
from kafka_kip.testing.context import CloseConnection, RequestContext, Session
from kafka_kip.testing.registry import handles

MECHANISMS = ['PLAIN']


@handles(ApiKey.SaslHandshake, 0, 1)
async def handle_sasl_handshake(request, ctx: RequestContext):
    """v1: the token follows in SaslAuthenticate; v0: it follows bare (see :func:`authenticate_raw_token`)."""
    response_class = RESPONSES[ApiKey.SaslHandshake]
    session = ctx.session
    if not ctx.cluster.users or session.authenticated:
        return response_class(version=ctx.api_version, error_code=ILLEGAL_SASL_STATE, mechanisms=[])
    error = NONE if request.mechanism in MECHANISMS else UNSUPPORTED_SASL_MECHANISM
    session.handshake_done = error == NONE
    session.raw_sasl_token_next = session.handshake_done and ctx.api_version == 0
    return response_class(version=ctx.api_version, error_code=error, mechanisms=MECHANISMS)


def authenticate_raw_token(token: bytes, session: Session, users: dict[str, str]) -> bool:
    """The bare PLAIN token after a SaslHandshake v0: True if it authenticates the connection (Kafka closes
    the connection otherwise)."""
    session.raw_sasl_token_next = False
    user = check_plain(token, users)
    if user is None:
        return False
    session.authenticated = True
    session.principal = user
    return True


@handles(ApiKey.SaslAuthenticate, 0, 2)
async def handle_sasl_authenticate(request, ctx: RequestContext):
    response_class = RESPONSES[ApiKey.SaslAuthenticate]
    session = ctx.session
    if not ctx.cluster.users or session.authenticated:
        return response_class(version=ctx.api_version, error_code=ILLEGAL_SASL_STATE,
                              error_message='SASL is not enabled on this listener or already done', auth_bytes=b'')
    if not session.handshake_done:
        raise CloseConnection('SaslAuthenticate before a successful SaslHandshake')
    user = check_plain(bytes(request.auth_bytes or b''), ctx.cluster.users)
    if user is None:
        # Kafka answers a failed authentication (and closes the connection) after connection.failed.authentication
        # .delay.ms: password guesses are slowed down, other connections are not.
        await asyncio.sleep(ctx.cluster.config.int('connection.failed.authentication.delay.ms') / 1000)
        session.close_after_response = True
        return response_class(version=ctx.api_version, error_code=SASL_AUTHENTICATION_FAILED,
                              error_message='Authentication failed: Invalid username or password', auth_bytes=b'')
    session.authenticated = True
    session.principal = user
    return response_class(version=ctx.api_version, error_code=NONE, error_message=None, auth_bytes=b'',
                          session_lifetime_ms=0)


def check_plain(token: bytes, users: dict[str, str]) -> str | None:
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
