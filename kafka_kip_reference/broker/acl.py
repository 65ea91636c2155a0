"""The reference cluster's ACL authorizer: Apache Kafka's StandardAuthorizer rules over an in-memory ACL store.

An ACL (:class:`AclBinding`) allows or denies a principal (``User:alice``, or ``User:*`` for everyone) from a host
(``*`` for any) an operation on resources: a literal name (``*`` for all of that type) or a name prefix. A request
is authorized, as in Kafka with ``allow.everyone.if.no.acl.found=false``:

- super users (``ReferenceCluster(super_users={...})``) may do everything;
- a matching DENY wins over any ALLOW; otherwise a matching ALLOW allows; no match denies;
- ALL matches every operation; an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW of
  ALTER_CONFIGS also allows DESCRIBE_CONFIGS (a DENY implies nothing).

Connections that did not authenticate with SASL are ``User:ANONYMOUS``, as on Kafka's PLAINTEXT and SSL
listeners. The cluster resource is named ``kafka-cluster``. KIP-391's REPLICATOR_WRITE
(:data:`kafka_kip.protocol.acl.REPLICATOR_WRITE`) is an operation on it. Every ACL change is appended to the
cluster metadata log, as Kafka's ``AccessControlEntryRecord`` / ``RemoveAccessControlEntryRecord``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kafka.admin import ACLPermissionType, ACLResourcePatternType, ResourceType

from kafka_kip.protocol.acl import REPLICATOR_WRITE, ACLOperation

CLUSTER_NAME = 'kafka-cluster'
WILDCARD = '*'
WILDCARD_PRINCIPAL = 'User:*'
ANONYMOUS = 'User:ANONYMOUS'

_IMPLIES_DESCRIBE = frozenset({ACLOperation.DESCRIBE, ACLOperation.READ, ACLOperation.WRITE, ACLOperation.DELETE,
                               ACLOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({ACLOperation.DESCRIBE_CONFIGS, ACLOperation.ALTER_CONFIGS})
#: The operations each resource type has (Kafka's ``AclEntry.supportedOperations``): what authorized-operations
#: bitfields report. REPLICATOR_WRITE (code 100) does not fit a 32-bit bitfield and is left out of them.
SUPPORTED_OPERATIONS: dict[int, tuple[int, ...]] = {
    ResourceType.TOPIC: (ACLOperation.READ, ACLOperation.WRITE, ACLOperation.CREATE, ACLOperation.DESCRIBE,
                         ACLOperation.DELETE, ACLOperation.ALTER, ACLOperation.DESCRIBE_CONFIGS,
                         ACLOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (ACLOperation.READ, ACLOperation.DESCRIBE, ACLOperation.DELETE, ACLOperation.DESCRIBE_CONFIGS,
                         ACLOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (ACLOperation.CREATE, ACLOperation.CLUSTER_ACTION, ACLOperation.DESCRIBE_CONFIGS,
                           ACLOperation.ALTER_CONFIGS, ACLOperation.IDEMPOTENT_WRITE, ACLOperation.ALTER,
                           ACLOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (ACLOperation.DESCRIBE, ACLOperation.WRITE, ACLOperation.TWO_PHASE_COMMIT),
}


def all_operations(resource_type: int) -> frozenset[int]:
    """What authorized-operations fields report on a cluster without an authorizer: every operation of the
    resource type (Kafka's ``AuthHelper.authorizedOperations`` without an authorizer)."""
    return frozenset(SUPPORTED_OPERATIONS[resource_type])


class InvalidAcl(ValueError):
    """An ACL CreateAcls cannot store; the message is what Kafka answers (INVALID_REQUEST)."""


@dataclass(frozen=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (the fields of CreateAcls' ``AclCreation``)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def validate(self) -> None:
        """InvalidAcl unless CreateAcls may store this ACL (Kafka's checks, with its messages)."""
        if self.resource_type not in SUPPORTED_OPERATIONS and self.resource_type not in (
                ResourceType.DELEGATION_TOKEN, ResourceType.USER):
            raise InvalidAcl(f'Invalid resourceType {_name(ResourceType, self.resource_type)}')
        if self.pattern_type not in (ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED):
            raise InvalidAcl(f'Invalid patternType {_name(ACLResourcePatternType, self.pattern_type)}')
        if self.operation in (ACLOperation.UNKNOWN, ACLOperation.ANY) or self.operation not in ACLOperation._value2member_map_:
            raise InvalidAcl(f'Invalid operation {_name(ACLOperation, self.operation)}')
        if self.permission not in (ACLPermissionType.ALLOW, ACLPermissionType.DENY):
            raise InvalidAcl(f'Invalid permissionType {_name(ACLPermissionType, self.permission)}')
        if not self.resource_name:
            raise InvalidAcl('Resource name should not be empty')
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl(f'The only valid name for the CLUSTER resource is {CLUSTER_NAME}')
        if ':' not in self.principal or not self.principal.split(':', 1)[1]:
            raise InvalidAcl(f'Could not parse principal {self.principal!r}: expected Type:Name')

    def matches_resource(self, resource_type: int, name: str) -> bool:
        """True if this ACL's pattern covers resource ``name`` of ``resource_type``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == ACLResourcePatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)

    def decides(self, principal: str, host: str, operation: int) -> bool | None:
        """True (allow) / False (deny) if this ACL applies to ``principal`` from ``host`` doing ``operation``,
        None if it does not apply (Kafka's ``StandardAuthorizerData.findResult``)."""
        if self.principal not in (principal, WILDCARD_PRINCIPAL) or self.host not in (host, WILDCARD):
            return None
        allow = self.permission == ACLPermissionType.ALLOW
        if self.operation != ACLOperation.ALL and self.operation != operation:
            if not allow:
                return None  # a DENY implies nothing
            if operation == ACLOperation.DESCRIBE and self.operation in _IMPLIES_DESCRIBE:
                return True
            if operation == ACLOperation.DESCRIBE_CONFIGS and self.operation in _IMPLIES_DESCRIBE_CONFIGS:
                return True
            return None
        return allow


@dataclass(frozen=True)
class AclFilter:
    """What DescribeAcls / DeleteAcls select (``None`` name, principal or host: any; ANY types and operations:
    any; MATCH pattern: the ACLs that would apply to the named resource) - Kafka's ``AclBindingFilter``."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def invalid(self) -> str | None:
        """Why Kafka refuses this filter (INVALID_REQUEST), or None."""
        for value, enum in ((self.resource_type, ResourceType), (self.pattern_type, ACLResourcePatternType),
                            (self.operation, ACLOperation), (self.permission, ACLPermissionType)):
            if value not in enum._value2member_map_ or value == 0:
                return f'Invalid {enum.__name__} filter {value}'
        return None

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (ACLResourcePatternType.ANY, ACLResourcePatternType.MATCH, acl.pattern_type):
            return False
        if self.resource_name is not None:
            if self.pattern_type in (ACLResourcePatternType.ANY, acl.pattern_type):
                if self.resource_name != acl.resource_name:
                    return False
            elif acl.pattern_type == ACLResourcePatternType.LITERAL:
                if acl.resource_name not in (self.resource_name, WILDCARD):
                    return False
            elif not self.resource_name.startswith(acl.resource_name):
                return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and self.operation in (ACLOperation.ANY, acl.operation)
                and self.permission in (ACLPermissionType.ANY, acl.permission))


class Authorizer:
    """The ACLs of a cluster and its super users; answers whether a principal may do an operation."""

    def __init__(self, super_users: Iterable[str] = (), on_change: Callable[[str], None] = lambda _change: None,
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(principal(name.strip()) for name in super_users)
        #: Kafka's ``allow.everyone.if.no.acl.found``: a resource no ACL names is open to everyone
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: list[AclBinding] = []
        self._on_change = on_change

    # -- the ACL store ----------------------------------------------------------------------------------------

    def create(self, acl: AclBinding) -> None:
        """Store ``acl`` (validated: InvalidAcl); storing one that exists changes nothing, as in Kafka."""
        acl.validate()
        if acl not in self._acls:
            self._acls.append(acl)
            self._on_change(f'ACL created: {describe(acl)}')

    def acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """The stored ACLs ``acl_filter`` selects (all without one), in creation order."""
        return [acl for acl in self._acls if acl_filter is None or acl_filter.matches(acl)]

    def delete(self, acl_filter: AclFilter) -> list[AclBinding]:
        """Remove and return the ACLs ``acl_filter`` selects."""
        removed = self.acls(acl_filter)
        for acl in removed:
            self._acls.remove(acl)
            self._on_change(f'ACL deleted: {describe(acl)}')
        return removed

    # -- decisions --------------------------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        """May ``principal`` connected from ``host`` do ``operation`` on resource ``name`` of ``resource_type``?"""
        if principal in self.super_users:
            return True
        allowed = named = False
        for acl in self._acls:
            if acl.matches_resource(resource_type, name):
                named = True
                decision = acl.decides(principal, host, operation)
                if decision is False:
                    return False
                allowed = allowed or bool(decision)
        return allowed or (not named and self.allow_everyone_if_no_acl_found)

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """May ``principal`` do ``operation`` on some resource of ``resource_type`` (Kafka's
        ``authorizeByResourceType``: an ALLOW that no DENY covers entirely)?"""
        if principal in self.super_users:
            return True
        if self.allow_everyone_if_no_acl_found and self.authorize(principal, host, operation, resource_type,
                                                                 'hardcode'):
            return True  # Kafka's authorizeByResourceType asks about a resource named 'hardcode' first
        denied = [acl for acl in self._acls if acl.resource_type == resource_type
                  and acl.decides(principal, host, operation) is False]
        if any(acl.resource_name == WILDCARD and acl.pattern_type == ACLResourcePatternType.LITERAL
               for acl in denied):
            return False
        for acl in self._acls:
            if acl.resource_type != resource_type or not acl.decides(principal, host, operation):
                continue
            covered = any(deny.pattern_type == ACLResourcePatternType.PREFIXED
                          and acl.resource_name.startswith(deny.resource_name)
                          or deny.pattern_type == acl.pattern_type and deny.resource_name == acl.resource_name
                          for deny in denied)
            if not covered:
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str) -> frozenset[int]:
        """The operations of ``resource_type`` (Kafka's supported ones) ``principal`` may do on resource ``name``:
        what authorized-operations fields report (kafka-python reads those bitfields as sets of operations)."""
        return frozenset(operation for operation in SUPPORTED_OPERATIONS.get(resource_type, ())
                         if self.authorize(principal, host, operation, resource_type, name))


def principal(name: str) -> str:
    """A user name as a principal (``alice`` -> ``User:alice``); a principal stays as it is."""
    return name if ':' in name else f'User:{name}'


def describe(acl: AclBinding) -> str:
    """An ACL as Kafka's tools print it."""
    return (f'(principal={acl.principal}, host={acl.host}, operation={_name(ACLOperation, acl.operation)}, '
            f'permissionType={_name(ACLPermissionType, acl.permission)}) on '
            f'{_name(ResourceType, acl.resource_type)}:{_name(ACLResourcePatternType, acl.pattern_type)}:'
            f'{acl.resource_name}')


def _name(enum, value: int) -> str:
    member = enum._value2member_map_.get(value)
    return member.name if member is not None else str(value)


def replicator_acl(user: str) -> AclBinding:
    """The ACL letting ``user`` produce with offsets (KIP-391): ALLOW REPLICATOR_WRITE on the cluster."""
    return AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, ACLResourcePatternType.LITERAL, principal(user), WILDCARD,
                      REPLICATOR_WRITE, ACLPermissionType.ALLOW)
