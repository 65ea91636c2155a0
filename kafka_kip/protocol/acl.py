"""ACL operation codes on the wire: Apache Kafka's, plus KIP-391's REPLICATOR_WRITE under a code Kafka does not use.

``AclOperation`` is an int8 in CreateAcls / DescribeAcls / DeleteAcls. Kafka's operations are 0-14 (13 is
CREATE_TOKENS); :data:`REPLICATOR_WRITE` is 100, far from them. It is an operation on the CLUSTER resource:
with an authorizer, producing with offsets (``use_offset``) needs it. :class:`ACLOperation` is kafka-python's enum
of the same name with REPLICATOR_WRITE added (kafka-python's own enum cannot decode 100); Kafka's authorized-operations
bitfields (32 bits) cannot carry it.
"""
from __future__ import annotations

from enum import IntEnum

from kafka.admin import ACLOperation as _StockACLOperation

#: KIP-391's REPLICATOR_WRITE (produce with offsets): the ACL operation code, outside Apache Kafka's 0-14.
REPLICATOR_WRITE = 100

if REPLICATOR_WRITE in {member.value for member in _StockACLOperation}:  # tripwire: kafka-python took the code
    raise ImportError(f'kafka-python defines ACL operation {REPLICATOR_WRITE}; kafka_kip needs another code for '
                      'REPLICATOR_WRITE')

#: kafka-python's ACL operations plus REPLICATOR_WRITE (the same names and values otherwise).
ACLOperation = IntEnum('ACLOperation', {**{member.name: member.value for member in _StockACLOperation},
                                        'REPLICATOR_WRITE': REPLICATOR_WRITE}, module=__name__)

__all__ = ['REPLICATOR_WRITE', 'ACLOperation']
