"""ACL operation codes on the wire: Apache Kafka's, plus KIP-391's REPLICATOR_WRITE under a code Kafka does not use.

``AclOperation`` is an int8 in CreateAcls / DescribeAcls / DeleteAcls. Apache Kafka 4.4's operations are 0-15 (13 is
CREATE_TOKENS, 15 KIP-939's TWO_PHASE_COMMIT, which kafka-python does not have yet); :data:`REPLICATOR_WRITE` is 100,
far from them. It is an operation on the CLUSTER resource: with an authorizer, producing with offsets
(``use_offset``) needs it. :class:`ACLOperation` is kafka-python's enum of the same name with TWO_PHASE_COMMIT and
REPLICATOR_WRITE added (kafka-python's own enum cannot decode either); Kafka's authorized-operations bitfields
(32 bits) cannot carry REPLICATOR_WRITE.
"""
from __future__ import annotations

from enum import IntEnum

from kafka.admin import ACLOperation as _StockACLOperation

#: KIP-391's REPLICATOR_WRITE (produce with offsets): the ACL operation code, outside Apache Kafka's 0-15.
REPLICATOR_WRITE = 100

if REPLICATOR_WRITE in {member.value for member in _StockACLOperation}:  # tripwire: kafka-python took the code
    raise ImportError(f'kafka-python defines ACL operation {REPLICATOR_WRITE}; kafka_kip needs another code for '
                      'REPLICATOR_WRITE')

#: Apache Kafka 4.4's ACL operation for KIP-939 transactions (on transactional ids), missing from kafka-python.
TWO_PHASE_COMMIT = 15

_stock = {member.name: member.value for member in _StockACLOperation}
if _stock.get('TWO_PHASE_COMMIT', TWO_PHASE_COMMIT) != TWO_PHASE_COMMIT:  # tripwire: kafka-python disagrees
    raise ImportError(f"kafka-python's ACLOperation.TWO_PHASE_COMMIT is {_stock['TWO_PHASE_COMMIT']}, not Apache "
                      f"Kafka's {TWO_PHASE_COMMIT}")

#: kafka-python's ACL operations plus TWO_PHASE_COMMIT and REPLICATOR_WRITE (the same names and values otherwise).
ACLOperation = IntEnum('ACLOperation', {**_stock, 'TWO_PHASE_COMMIT': TWO_PHASE_COMMIT,
                                        'REPLICATOR_WRITE': REPLICATOR_WRITE}, module=__name__)

__all__ = ['REPLICATOR_WRITE', 'TWO_PHASE_COMMIT', 'ACLOperation']
