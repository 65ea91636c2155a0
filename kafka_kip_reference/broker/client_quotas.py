"""Client quotas as Kafka 4.4's controller stores them and its brokers describe and resolve them.

An entity is a set of ``(entity type, name)`` pairs (``user``, ``client-id``, ``ip``; name None: the default of the
type); each entity has quota values by key. :meth:`ClientQuotas.alter` checks an alteration as Kafka's
``ClientQuotaControlManager`` (entity combinations, keys per combination, values), :meth:`ClientQuotas.describe`
filters as ``ClientQuotasImage.describe`` (exact / default / any-specified components, ``strict``), and
:meth:`ClientQuotas.byte_rate_limit` resolves which entity's ``producer_byte_rate`` / ``consumer_byte_rate`` applies
to a (user, client id) in ``ClientQuotaManager``'s order of precedence. Throttling itself:
:mod:`kafka_kip_reference.broker.quota_throttling`.
"""
from __future__ import annotations

import enum
import ipaddress
import math
from collections.abc import Iterable
from dataclasses import dataclass

from kafka_kip.protocol import constants
from kafka_kip_reference.broker.model import ClusterError

USER, CLIENT_ID, IP = 'user', 'client-id', 'ip'
ENTITY_TYPES = (USER, CLIENT_ID, IP)

#: ``((entity type, name or None for the default), ...)`` in :data:`ENTITY_TYPES` order.
Entity = tuple[tuple[str, 'str | None'], ...]


class ValueType(enum.Enum):
    """The ConfigDef type of a quota key: what values Kafka accepts for it."""

    DOUBLE = None
    INT = 2 ** 31 - 1
    LONG = 2 ** 63 - 1


PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = 'producer_byte_rate', 'consumer_byte_rate'
#: The keys a user / client-id / (user, client-id) entity may have (Kafka's ``userAndClientQuotaConfigs``).
USER_AND_CLIENT_KEYS = {PRODUCER_BYTE_RATE: ValueType.LONG, CONSUMER_BYTE_RATE: ValueType.LONG,
                        'request_percentage': ValueType.DOUBLE, 'controller_mutation_rate': ValueType.DOUBLE}
#: The keys an ip entity may have (Kafka's ``ipConfigs``).
IP_KEYS = {'connection_creation_rate': ValueType.INT}


class MatchType(enum.IntEnum):
    """DescribeClientQuotas' filter component match types."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


@dataclass(frozen=True)
class Alteration:
    """One entity's changes: ``(key, value)`` pairs, value None to remove the key."""

    entity: dict[str, str | None]
    ops: list[tuple[str, float | None]]


class ClientQuotas:
    """The cluster's client quotas (the brokers share them: Kafka's metadata image)."""

    def __init__(self) -> None:
        self._quotas: dict[Entity, dict[str, float]] = {}

    def __bool__(self) -> bool:
        return bool(self._quotas)

    def alter(self, alterations: Iterable[Alteration], validate_only: bool
              ) -> list[tuple[dict[str, str | None], int, str | None]]:
        """``(entity, error code, message)`` per distinct entity, as Kafka's controller answers: an entity named
        twice keeps its first alteration but is answered INVALID_REQUEST; unless ``validate_only`` the valid
        alterations are applied, each entity all or nothing."""
        results: dict[frozenset, tuple[dict[str, str | None], int, str | None]] = {}
        for alteration in alterations:
            key = frozenset(alteration.entity.items())
            names = [name for name, _ in alteration.ops]
            if key in results or len(set(names)) != len(names):
                results[key] = (alteration.entity, constants.INVALID_REQUEST,
                                f'Ignoring duplicate entity {_describe_entity(alteration.entity)}')
                continue
            try:
                entity = _checked_entity(alteration.entity)
                for name, value in alteration.ops:
                    if value is not None:
                        _check_value(IP_KEYS if IP in alteration.entity else USER_AND_CLIENT_KEYS, name, value)
            except ClusterError as exc:
                results[key] = (alteration.entity, exc.error_code, str(exc))
                continue
            results[key] = (alteration.entity, constants.NONE, None)
            if not validate_only:
                values = self._quotas.setdefault(entity, {})
                for name, value in alteration.ops:
                    if value is None:
                        values.pop(name, None)
                    else:
                        values[name] = value
                if not values:
                    del self._quotas[entity]
        return list(results.values())

    def describe(self, components: Iterable[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities matching the filter ``components`` (``(entity type, match type, match)``)."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for entity_type, match_type, match in components:
            if entity_type == '':
                raise ClusterError(constants.INVALID_REQUEST, 'Invalid empty entity type.')
            if entity_type in exact or entity_type in specified:
                raise ClusterError(constants.INVALID_REQUEST,
                                   f'Entity type {entity_type} cannot appear more than once in the '
                                   f'filter.')
            if entity_type not in ENTITY_TYPES:
                raise ClusterError(constants.UNSUPPORTED_VERSION, f'Unsupported entity type {entity_type}')
            if match_type == MatchType.EXACT:
                if match is None:
                    raise ClusterError(constants.INVALID_REQUEST, 'Request specified MATCH_TYPE_EXACT, but set match string to '
                                                                  'null.')
                exact[entity_type] = match
            elif match_type == MatchType.DEFAULT:
                if match is not None:
                    raise ClusterError(constants.INVALID_REQUEST, 'Request specified MATCH_TYPE_DEFAULT, but also specified a '
                                                                  'match string.')
                exact[entity_type] = None
            elif match_type == MatchType.SPECIFIED:
                if match is not None:
                    raise ClusterError(constants.INVALID_REQUEST, 'Request specified MATCH_TYPE_SPECIFIED, but also specified '
                                                                  'a match string.')
                specified.add(entity_type)
            else:
                raise ClusterError(constants.INVALID_REQUEST, f'Unknown match type {match_type}')
        named = set(exact) | specified
        if IP in named and named & {USER, CLIENT_ID}:
            raise ClusterError(constants.INVALID_REQUEST,
                               'Invalid entity filter component combination. IP filter component '
                               'should not be used with user or clientId filter component.')
        if not named and not strict:
            return [(entity, dict(values)) for entity, values in self._quotas.items()]
        matched = []
        for entity, values in self._quotas.items():
            names = dict(entity)
            if any(t not in names or names[t] != name for t, name in exact.items()):
                continue
            if any(t not in names for t in specified):
                continue
            if strict and len(names) != len(named):
                continue
            matched.append((entity, dict(values)))
        return matched if named else []

    def byte_rate_limit(self, key: str, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """``(bytes per second, sensor tags)`` of the ``key`` quota applying to ``user`` with ``client_id``, or None.

        The sensor tags ``(user, client id)`` name whose traffic is counted together: a user quota counts all the
        user's clients, a client-id quota all users of the client id, as Kafka's multi-level quota tags.
        """
        both, user_only, client_only = (user, client_id), (user, ''), ('', client_id)
        precedence = (({USER: user, CLIENT_ID: client_id}, both), ({USER: user, CLIENT_ID: None}, both),
                      ({USER: user}, user_only), ({USER: None, CLIENT_ID: client_id}, both),
                      ({USER: None, CLIENT_ID: None}, both), ({USER: None}, user_only),
                      ({CLIENT_ID: client_id}, client_only), ({CLIENT_ID: None}, client_only))
        for names, tags in precedence:
            values = self._quotas.get(tuple(names.items()))
            if values is not None and key in values:
                return values[key], tags
        return None


def _checked_entity(names: dict[str, str | None]) -> Entity:
    """The entity Kafka's controller accepts for ``names`` (``{entity type: name}``), else ClusterError."""
    if not names:
        raise ClusterError(constants.INVALID_REQUEST, 'Invalid empty client quota entity')
    for entity_type, name in names.items():
        if entity_type not in ENTITY_TYPES:
            raise ClusterError(constants.INVALID_REQUEST,
                               f'Unhandled client quota entity type: {entity_type}')
        if name == '':
            raise ClusterError(constants.INVALID_REQUEST, f'Empty {entity_type} not supported')
    if IP in names:
        if len(names) > 1:
            raise ClusterError(constants.INVALID_REQUEST,
                               'Invalid quota entity combination, IP entity shouldnot be '
                               'combined with User or ClientId')
        if names[IP] is not None and not _is_ip(names[IP]):
            raise ClusterError(constants.INVALID_REQUEST,
                               f'{names[IP]} is not a valid IP or resolvable host.')
    return tuple((t, names[t]) for t in ENTITY_TYPES if t in names)


def _check_value(keys: dict[str, ValueType], name: str, value: float) -> None:
    value_type = keys.get(name)
    if value_type is None:
        raise ClusterError(constants.INVALID_REQUEST, f'Invalid configuration key {name}')
    if not math.isfinite(value):
        raise ClusterError(constants.INVALID_REQUEST, f'Quota {name} must be a finite number')
    if value <= 0:
        raise ClusterError(constants.INVALID_REQUEST, f'Quota {name} must be greater than 0')
    if value_type is ValueType.DOUBLE:
        return
    if value > value_type.value:
        article = 'an' if value_type is ValueType.INT else 'a'
        raise ClusterError(constants.INVALID_REQUEST,
                           f'Proposed value for {name} is too large for {article} {value_type.name}.')
    if abs(math.fmod(value, 1.0)) > 1e-6:
        raise ClusterError(constants.INVALID_REQUEST, f'{name} cannot be a fractional value.')


def _is_ip(host: str) -> bool:
    """Kafka accepts an IP address or a host name that resolves; the reference cluster resolves nothing."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host == 'localhost'
    return True


def _describe_entity(entity: dict[str, str | None]) -> str:
    entries = ', '.join(f'{t}={name}' for t, name in entity.items())
    return f'ClientQuotaEntity(entries={{{entries}}})'
