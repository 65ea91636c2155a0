"""DescribeUserScramCredentials and AlterUserScramCredentials over the cluster's
:class:`~kafka_kip_reference.broker.scram_credentials.ScramCredentials`, with Kafka 4.4's checks and errors (its
``ScramImage.describe`` and ``ScramControlManager.alterCredentials``): a user altered twice in one request is
DUPLICATE_RESOURCE (none of its alterations apply), an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations
outside 4096..16384 UNACCEPTABLE_CREDENTIAL, removing a credential that does not exist RESOURCE_NOT_FOUND."""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.model import ClusterError
from kafka_kip_reference.broker.registry import handles
from kafka_kip_reference.broker.sasl_mechanisms import SCRAM_ITERATIONS
from kafka_kip_reference.broker.scram_credentials import MECHANISM_TYPES

DescribeResponse = RESPONSES[ApiKey.DescribeUserScramCredentials]
_Described = DescribeResponse.DescribeUserScramCredentialsResult
AlterResponse = RESPONSES[ApiKey.AlterUserScramCredentials]
_Altered = AlterResponse.AlterUserScramCredentialsResult
MAX_ITERATIONS = 16384
_TYPES = {mechanism: code for code, mechanism in MECHANISM_TYPES.items()}


@handles(ApiKey.DescribeUserScramCredentials, 0, 0)
async def handle_describe_user_scram_credentials(request: Any, ctx: RequestContext) -> Any:
    """Every user with a credential (no users named), or the users named: RESOURCE_NOT_FOUND for one without any,
    DUPLICATE_RESOURCE for one named twice."""
    store = ctx.cluster.scram_credentials
    named = [user.name for user in request.users or ()]
    results = []
    for user in dict.fromkeys(named) if named else store.users():
        credentials = store.of(user)
        if named.count(user) > 1:
            results.append(_Described(user=user, error_code=constants.DUPLICATE_RESOURCE,
                                      credential_infos=[], error_message=
                                      f'Cannot describe SCRAM credentials for the same user twice in a single '
                                      f'request: {user}'))
        elif not credentials:
            results.append(_Described(user=user, error_code=constants.RESOURCE_NOT_FOUND,
                                      credential_infos=[], error_message=
                                      f'Attempt to describe a user credential that does not exist: {user}'))
        else:
            results.append(_Described(user=user, error_code=constants.NONE, error_message=None,
                                      credential_infos=[
                _Described.CredentialInfo(mechanism=_TYPES[mechanism], iterations=credential.iterations)
                for mechanism, credential in credentials.items()]))
    return DescribeResponse(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                            error_message=None, results=results)


@handles(ApiKey.AlterUserScramCredentials, 0, 0)
async def handle_alter_user_scram_credentials(request: Any, ctx: RequestContext) -> Any:
    store = ctx.cluster.scram_credentials
    deletions: dict[str, Any] = {}
    upsertions: dict[str, Any] = {}
    errors: dict[str, tuple[int, str]] = {}
    for kind, alterations in (('deletion', request.deletions), ('upsertion', request.upsertions)):
        for alteration in alterations:
            user = alteration.name
            if user in errors:
                continue
            if deletions.pop(user, None) is not None or upsertions.pop(user, None) is not None:
                errors[user] = (constants.DUPLICATE_RESOURCE,
                                'A user credential cannot be altered twice in the same request')
                continue
            try:
                mechanism = _mechanism(alteration)
                if kind == 'deletion':
                    if store.get(user, mechanism) is None:
                        raise ClusterError(constants.RESOURCE_NOT_FOUND,
                                           'Attempt to delete a user credential that does not '
                                           'exist')
                    deletions[user] = mechanism
                else:
                    _check_upsertion(alteration)
                    upsertions[user] = alteration
            except ClusterError as exc:
                errors[user] = (exc.error_code, str(exc))
    for user, mechanism in deletions.items():
        store.delete(user, mechanism)
    for user, upsertion in upsertions.items():
        store.upsert(user, MECHANISM_TYPES[upsertion.mechanism], upsertion.salt, upsertion.iterations,
                     upsertion.salted_password)
    if deletions or upsertions:
        ctx.cluster.record_change(f'SCRAM credentials altered: {sorted(set(deletions) | set(upsertions))}')
    return AlterResponse(version=ctx.api_version, throttle_time_ms=0, results=[
        _Altered(user=user, error_code=constants.NONE, error_message=None)
        for user in (*deletions, *upsertions)] + [
        _Altered(user=user, error_code=error, error_message=message) for user, (error, message) in errors.items()])


def _mechanism(alteration: Any) -> str:
    if alteration.name == '':
        raise ClusterError(constants.UNACCEPTABLE_CREDENTIAL, 'Username must not be empty')
    mechanism = MECHANISM_TYPES.get(alteration.mechanism)
    if mechanism is None:
        raise ClusterError(constants.UNSUPPORTED_SASL_MECHANISM, 'Unknown SCRAM mechanism')
    return mechanism


def _check_upsertion(upsertion: Any) -> None:
    if upsertion.iterations < SCRAM_ITERATIONS:
        raise ClusterError(constants.UNACCEPTABLE_CREDENTIAL, 'Too few iterations')
    if upsertion.iterations > MAX_ITERATIONS:
        raise ClusterError(constants.UNACCEPTABLE_CREDENTIAL, 'Too many iterations')
    if not upsertion.salted_password:  # Kafka's HMAC refuses an empty key: an unexpected server error there
        raise ClusterError(constants.UNKNOWN_SERVER_ERROR, 'Empty key')
