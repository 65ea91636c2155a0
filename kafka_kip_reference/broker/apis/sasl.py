"""SaslHandshake and SaslAuthenticate: SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 on listeners of a cluster with
``users`` (the exchanges: :mod:`kafka_kip_reference.broker.sasl_mechanisms`), and OAUTHBEARER with unsecured JWS tokens where
``sasl.enabled.mechanisms`` names it (:mod:`kafka_kip_reference.broker.oauthbearer`).

Until a connection is authenticated the broker lets only ApiVersions and these two through (anything else
closes the connection, as Kafka does), each at most ``sasl.server.max.receive.size`` bytes (SASL tokens included;
a larger one closes the connection unread); a mechanism not in ``sasl.enabled.mechanisms`` is answered
UNSUPPORTED_SASL_MECHANISM and closes the connection. On a
listener without SASL, or after authentication, both are
answered with ILLEGAL_SASL_STATE. A failed authentication is answered after
``connection.failed.authentication.delay.ms`` and closes the connection, as on Kafka.
"""
from __future__ import annotations

import asyncio

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.context import CloseConnection, RequestContext, Session
from kafka_kip_reference.broker.oauthbearer import OAUTHBEARER, OAuthBearerExchange
from kafka_kip_reference.broker.registry import handles
from kafka_kip_reference.broker.sasl_mechanisms import AuthenticationFailed, start_exchange


@handles(ApiKey.SaslHandshake, 0, 1)
async def handle_sasl_handshake(request, ctx: RequestContext):
    """v1: the tokens follow in SaslAuthenticate; v0: they follow bare (see :func:`respond_raw_token`)."""
    response_class = RESPONSES[ApiKey.SaslHandshake]
    session = ctx.session
    enabled = ctx.cluster.config['sasl.enabled.mechanisms'].split(',')
    if not ctx.cluster.users or session.authenticated or session.sasl is not None:
        return response_class(version=ctx.api_version, error_code=constants.ILLEGAL_SASL_STATE,
                              mechanisms=enabled)
    if request.mechanism not in enabled:  # answered, then the connection is closed (as Kafka)
        session.close_after_response = True
        return response_class(version=ctx.api_version, error_code=constants.UNSUPPORTED_SASL_MECHANISM,
                              mechanisms=enabled)
    session.sasl = (OAuthBearerExchange() if request.mechanism == OAUTHBEARER
                    else start_exchange(request.mechanism, ctx.cluster.users, ctx.cluster.scram_credentials.get))
    session.raw_sasl_token_next = ctx.api_version == 0
    return response_class(version=ctx.api_version, error_code=constants.NONE, mechanisms=enabled)


def respond_raw_token(token: bytes, session: Session) -> bytes | None:
    """The server's bare token in answer to a bare client token after a SaslHandshake v0, or None when the
    authentication failed (Kafka then closes the connection)."""
    try:
        answer = session.sasl.respond(token)
    except AuthenticationFailed:
        session.raw_sasl_token_next = False
        return None
    _maybe_authenticated(session)
    session.raw_sasl_token_next = not session.authenticated
    return answer


@handles(ApiKey.SaslAuthenticate, 0, 2)
async def handle_sasl_authenticate(request, ctx: RequestContext):
    response_class = RESPONSES[ApiKey.SaslAuthenticate]
    session = ctx.session
    if not ctx.cluster.users or session.authenticated:
        return response_class(version=ctx.api_version, error_code=constants.ILLEGAL_SASL_STATE,
                              error_message='SASL is not enabled on this listener or already done', auth_bytes=b'')
    if session.sasl is None or session.raw_sasl_token_next:
        raise CloseConnection('SaslAuthenticate without a SaslHandshake v1 before it')
    try:
        answer = session.sasl.respond(bytes(request.auth_bytes or b''))
    except AuthenticationFailed as exc:
        # Kafka answers a failed authentication (and closes the connection) after connection.failed.authentication
        # .delay.ms: password guesses are slowed down, other connections are not.
        await asyncio.sleep(ctx.cluster.config.int('connection.failed.authentication.delay.ms') / 1000)
        session.close_after_response = True
        return response_class(version=ctx.api_version, error_code=constants.SASL_AUTHENTICATION_FAILED,
                              error_message=str(exc), auth_bytes=b'')
    _maybe_authenticated(session)
    # Kafka's SaslServerAuthenticator leaves the message at its generated default, the empty string (not null)
    return response_class(version=ctx.api_version, error_code=constants.NONE, error_message='',
                          auth_bytes=answer, session_lifetime_ms=0)


def _maybe_authenticated(session: Session) -> None:
    if session.sasl.principal is not None:
        session.authenticated = True
        session.principal = session.sasl.principal
