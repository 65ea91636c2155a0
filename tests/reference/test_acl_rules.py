"""Kafka's ACL rules on the authorizer itself (deny wins, implied DESCRIBE, wildcards, prefixes, hosts, super
users), and an authorization policy for every API the brokers handle.
"""
from __future__ import annotations

from kafka.admin import (
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourceType,
)

from kafka_kip_reference.broker.acl import AclBinding, Authorizer
from kafka_kip_reference.broker.apis import HANDLERS
from kafka_kip_reference.broker.authorization import POLICIES


def binding(principal: str, operation: int, name: str = 't', *, deny: bool = False, host: str = '*',
            pattern: int = ACLResourcePatternType.LITERAL, resource_type: int = ResourceType.TOPIC) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation,
                      ACLPermissionType.DENY if deny else ACLPermissionType.ALLOW)


def test_kafkas_rules_deny_wins_implied_describe_wildcards_prefixes_hosts():
    authorizer = Authorizer(super_users={'root'})
    for acl in (binding('User:a', ACLOperation.READ, 'orders'),
                binding('User:a', ACLOperation.READ, 'orders', deny=True, host='10.0.0.9'),
                binding('User:b', ACLOperation.ALL, 'team-', pattern=ACLResourcePatternType.PREFIXED),
                binding('User:b', ACLOperation.DELETE, 'team-keep', deny=True),
                binding('User:*', ACLOperation.ALTER_CONFIGS, '*'),
                binding('User:c', ACLOperation.READ, 'x', deny=True)):
        authorizer.create(acl)

    def may(user: str, operation: int, name: str, host: str = '127.0.0.1') -> bool:
        return authorizer.authorize(f'User:{user}', host, operation, ResourceType.TOPIC, name)

    assert may('a', ACLOperation.READ, 'orders') and may('a', ACLOperation.DESCRIBE, 'orders')  # READ => DESCRIBE
    assert not may('a', ACLOperation.WRITE, 'orders')
    assert not may('a', ACLOperation.READ, 'orders', host='10.0.0.9')  # the DENY of that host wins
    assert may('b', ACLOperation.WRITE, 'team-x') and not may('b', ACLOperation.WRITE, 'teamx')
    assert may('b', ACLOperation.READ, 'team-keep') and not may('b', ACLOperation.DELETE, 'team-keep')
    assert may('anyone', ACLOperation.DESCRIBE_CONFIGS, 'whatever')  # ALTER_CONFIGS => DESCRIBE_CONFIGS, User:*
    assert not may('anyone', ACLOperation.DESCRIBE, 'whatever')
    assert not may('c', ACLOperation.DESCRIBE, 'x')  # a DENY of READ implies no DENY of DESCRIBE: no ACL allows
    assert may('root', ACLOperation.DELETE, 'anything')  # a super user
    assert authorizer.authorized_operations('User:b', '127.0.0.1', ResourceType.TOPIC, 'team-keep') == {
        3, 4, 5, 7, 8, 10, 11}  # all but DELETE (6)
    # authorize_any: an ALLOW no DENY covers entirely (Kafka's authorizeByResourceType, used for idempotence)
    assert authorizer.authorize_any('User:b', '127.0.0.1', ACLOperation.WRITE, ResourceType.TOPIC)
    authorizer.create(binding('User:b', ACLOperation.WRITE, 'team', deny=True, pattern=ACLResourcePatternType.PREFIXED))
    assert not authorizer.authorize_any('User:b', '127.0.0.1', ACLOperation.WRITE, ResourceType.TOPIC)
    assert not authorizer.authorize_any('User:a', '127.0.0.1', ACLOperation.WRITE, ResourceType.TOPIC)


def test_every_api_the_brokers_handle_has_an_authorization_policy():
    assert sorted(key for key in HANDLERS if key not in POLICIES) == []
