"""ACLs with KIP-391's REPLICATOR_WRITE in kafka_kip's admin client.

kafka-python's ``ACLOperation`` has no REPLICATOR_WRITE (:data:`kafka_kip.protocol.acl.REPLICATOR_WRITE`, 100),
its ``ACLFilter`` refuses any other enum and its admin client cannot read an ACL of that operation back. kafka_kip's
:class:`~kafka_kip.protocol.acl.ACLOperation` adds it; :class:`ACLFilter` and :class:`ACL` here take it (and every
kafka-python operation); ``AclResultsMixin`` (:mod:`kafka_kip._patch.admin_acl_results`) gives
``KafkaAdminClient.describe_acls`` / ``delete_acls`` ACLs with kafka_kip's operations. Everything else is kafka-python's::

    from kafka_kip.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
    admin.create_acls([ACL('User:mirror', '*', ACLOperation.REPLICATOR_WRITE, ACLPermissionType.ALLOW,
                           ResourcePattern(ResourceType.CLUSTER, 'kafka-cluster'))])
"""
from __future__ import annotations

import kafka.admin as stock
from kafka.admin import ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourceType
from kafka.errors import IllegalArgumentError

from kafka_kip._patch import admin_acl_results
from kafka_kip.protocol.acl import ACLOperation


class ACLFilter(stock.ACLFilter):
    """kafka-python's ``ACLFilter``, whose ``operation`` may also be kafka_kip's ``ACLOperation`` (REPLICATOR_WRITE)."""

    def validate(self) -> None:
        if not isinstance(self.operation, (ACLOperation, stock.ACLOperation)):
            raise IllegalArgumentError('operation must be an ACLOperation')
        if not isinstance(self.permission_type, ACLPermissionType):
            raise IllegalArgumentError('permission_type must be an ACLPermissionType')
        if not isinstance(self.resource_pattern, stock.ResourcePatternFilter):
            raise IllegalArgumentError('resource_pattern must be a ResourcePatternFilter')


class ACL(stock.ACL):
    """kafka-python's ``ACL`` whose ``operation`` may also be kafka_kip's ``ACLOperation`` (REPLICATOR_WRITE)."""

    def validate(self) -> None:
        if not isinstance(self.operation, (ACLOperation, stock.ACLOperation)):
            raise IllegalArgumentError('operation must be an ACLOperation object')
        super().validate()


def _acl(principal: str, host: str, operation: int, permission: int, resource_type: int, name: str,
         pattern: int) -> ACL:
    return ACL(principal=principal, host=host, operation=ACLOperation(operation),
               permission_type=ACLPermissionType(permission),
               resource_pattern=ResourcePattern(ResourceType(resource_type), name, ACLResourcePatternType(pattern)))


#: ``KafkaAdminClient.describe_acls`` / ``delete_acls`` answers with kafka_kip's ACL types (kafka_kip._patch)
AclResultsMixin = admin_acl_results.install(_acl)


__all__ = ['ACL', 'ACLFilter', 'ACLOperation', 'AclResultsMixin']
