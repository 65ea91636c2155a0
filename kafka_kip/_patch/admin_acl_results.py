"""ACLs read back by kafka_kip's admin client with kafka_kip's ACL types (KIP-391's REPLICATOR_WRITE).

kafka-python's ``describe_acls`` / ``delete_acls`` turn DescribeAcls / DeleteAcls answers into ACL objects in two
static methods that convert each operation with kafka-python's ``ACLOperation``, which has no REPLICATOR_WRITE
(100) and fails on it. :func:`install` returns a mixin overriding those two methods; only
:class:`kafka_kip.admin.KafkaAdminClient` inherits it, so kafka-python's own admin client is left as it is.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kafka.errors as errors
from kafka.admin._acls import ACLAdminMixin

from kafka_kip._patch.rebind import require_names

#: ``acl(principal, host, operation, permission, resource_type, name, pattern)`` -> an ACL object
AclFactory = Callable[[str, str, int, int, int, str, int], Any]


def install(acl: AclFactory) -> type:
    """A mixin whose ACL answers are built by ``acl``.

    Raises KafkaPythonChanged if ``describe_acls`` / ``delete_acls`` no longer build their results in the two
    static methods it overrides.
    """
    require_names(ACLAdminMixin.describe_acls, {'_convert_describe_acls_response_to_acls'},
                  'to build the ACLs of a DescribeAcls answer')
    require_names(ACLAdminMixin.delete_acls, {'_convert_delete_acls_response_to_matching_acls'},
                  'to build the ACLs of a DeleteAcls answer')

    class AclResults:
        """The ACL answers of DescribeAcls and DeleteAcls built with kafka_kip's ACL types."""

        @staticmethod
        def _convert_describe_acls_response_to_acls(describe_response: Any) -> tuple[list, type]:
            error = errors.for_code(describe_response.error_code)
            if error is not errors.NoError:
                raise error(describe_response.error_message)
            return [acl(entry.principal, entry.host, entry.operation, entry.permission_type, resource.resource_type,
                        resource.resource_name, resource.pattern_type)
                    for resource in describe_response.resources for entry in resource.acls], errors.NoError

        @staticmethod
        def _convert_delete_acls_response_to_matching_acls(acl_filters: list, delete_response: Any) -> list:
            return [(acl_filter, [acl(found.principal, found.host, found.operation, found.permission_type,
                                      found.resource_type, found.resource_name, found.pattern_type)
                                  for found in result.matching_acls], errors.for_code(result.error_code))
                    for acl_filter, result in zip(acl_filters, delete_response.filter_results, strict=True)]

    return AclResults
