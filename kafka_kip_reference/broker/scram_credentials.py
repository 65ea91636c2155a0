"""The SCRAM credentials the brokers' SCRAM authenticator checks, by user and mechanism.

The cluster's ``users`` start with a credential of each SCRAM mechanism (4096 iterations); AlterUserScramCredentials
adds, replaces and removes credentials at run time and the next SCRAM authentication uses them (connections
already authenticated stay so, as on Kafka). SASL PLAIN keeps checking ``users``' passwords: Kafka's PLAIN
callback does not read SCRAM credentials either.
"""
from __future__ import annotations

from collections.abc import Mapping

from kafka_kip_reference.broker.sasl_mechanisms import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    salted_credential,
    scram_credential,
)

#: Kafka's ``ScramMechanism`` type codes (AlterUserScramCredentials / DescribeUserScramCredentials).
MECHANISM_TYPES = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}


class ScramCredentials:
    """``(user, mechanism) -> ScramCredential``."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._credentials: dict[tuple[str, str], ScramCredential] = {
            (user, mechanism): scram_credential(mechanism, user, password)
            for user, password in users.items() for mechanism in MECHANISM_TYPES.values()}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def users(self) -> list[str]:
        """Every user with a credential, in the order they got their first."""
        return list(dict.fromkeys(user for user, _ in self._credentials))

    def of(self, user: str) -> dict[str, ScramCredential]:
        """``{mechanism: credential}`` of ``user``, in mechanism order."""
        return {mechanism: self._credentials[user, mechanism] for mechanism in MECHANISM_TYPES.values()
                if (user, mechanism) in self._credentials}

    def upsert(self, user: str, mechanism: str, salt: bytes, iterations: int, salted_password: bytes) -> None:
        """Store the credential a client derived (Kafka stores the stored key and server key, never the password)."""
        self._credentials[user, mechanism] = salted_credential(mechanism, salt, iterations, salted_password)

    def restore(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        """Store ``credential`` as it was stored before (a data directory read back)."""
        self._credentials[user, mechanism] = credential

    def delete(self, user: str, mechanism: str) -> None:
        del self._credentials[user, mechanism]
