"""ACLs with KIP-391's REPLICATOR_WRITE in kafka_kip's admin client.

kafka-python's ``ACLOperation`` has no REPLICATOR_WRITE (:data:`kafka_kip.protocol.acl.REPLICATOR_WRITE`, 100),
its ``ACLFilter`` refuses any other enum and its admin client cannot read an ACL of that operation back. kafka_kip's
:class:`~kafka_kip.protocol.acl.ACLOperation` adds it; :class:`ACLFilter` and :class:`ACL` here take it (and every
kafka-python operation); :class:`AclResultsMixin` gives ``KafkaAdminClient.describe_acls`` / ``delete_acls`` ACLs
with kafka_kip's operations. Everything else is kafka-python's::

    from kafka_kip.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
    admin.create_acls([ACL('User:mirror', '*', ACLOperation.REPLICATOR_WRITE, ACLPermissionType.ALLOW,
                           ResourcePattern(ResourceType.CLUSTER, 'kafka-cluster'))])
"""
from __future__ import annotations

from typing import Any

import kafka.admin as stock
import kafka.errors as errors
from kafka.admin import ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourceType
from kafka.errors import IllegalArgumentError

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


class AclResultsMixin:
    """The ACL answers of DescribeAcls and DeleteAcls read with kafka_kip's ``ACLOperation``."""

    @staticmethod
    def _convert_describe_acls_response_to_acls(describe_response: Any) -> tuple[list[ACL], type]:
        error = errors.for_code(describe_response.error_code)
        if error is not errors.NoError:
            raise error(describe_response.error_message)
        return [_acl(entry.principal, entry.host, entry.operation, entry.permission_type, resource.resource_type,
                     resource.resource_name, resource.pattern_type)
                for resource in describe_response.resources for entry in resource.acls], errors.NoError

    @staticmethod
    def _convert_delete_acls_response_to_matching_acls(acl_filters: list, delete_response: Any) -> list:
        return [(acl_filter, [_acl(acl.principal, acl.host, acl.operation, acl.permission_type, acl.resource_type,
                                   acl.resource_name, acl.pattern_type) for acl in result.matching_acls],
                 errors.for_code(result.error_code))
                for acl_filter, result in zip(acl_filters, delete_response.filter_results, strict=True)]


__all__ = ['ACL', 'ACLFilter', 'ACLOperation', 'AclResultsMixin']
