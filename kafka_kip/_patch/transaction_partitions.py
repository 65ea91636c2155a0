"""Adding a partition to a transaction that is already committing (KIP-253 re-partitioning).

Records refused for a stale partition count are re-partitioned on the sender thread, possibly after the
application called ``commit_transaction()``: their new partitions must join the transaction before it ends.
kafka-python's ``maybe_add_partition_to_transaction`` refuses outside IN_TRANSACTION (it guards ``send()``),
while its sender already handles partitions added later: ``next_request_handler`` sends AddPartitionsToTxn for
``_new_partitions_in_transaction`` before anything else it has queued, and holds EndTxn back until every batch
is done. The function built here adds to that set while the transaction is open or committing. Scoped: only
kafka_kip's accumulator calls it, on the sender thread.
"""
from __future__ import annotations

from collections.abc import Callable

from kafka.producer.transaction_manager import TransactionManager, TransactionState
from kafka.structs import TopicPartition

from kafka_kip._patch.rebind import require_names

_OPEN = (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION)


def install() -> Callable[[TransactionManager, TopicPartition], bool]:
    """``add(manager, tp)``: ``tp`` joins ``manager``'s open or committing transaction (True), unless the
    transaction is in another state (False: aborting, failed). Raises KafkaPythonChanged if kafka-python no
    longer keeps the partitions to add in ``_new_partitions_in_transaction`` or no longer sends them from
    ``next_request_handler``."""
    require_names(TransactionManager.maybe_add_partition_to_transaction,
                  {'_new_partitions_in_transaction', 'is_partition_added', 'is_partition_pending_add'},
                  'to keep the partitions a transaction is about to add')
    require_names(TransactionManager.next_request_handler,
                  {'_new_partitions_in_transaction', '_add_partitions_to_transaction_handler'},
                  'to add partitions to the transaction before ending it')

    def add(manager: TransactionManager, tp: TopicPartition) -> bool:
        with manager._lock:
            if manager._current_state not in _OPEN:
                return False
            if not (manager.is_partition_added(tp) or manager.is_partition_pending_add(tp)):
                manager._new_partitions_in_transaction.add(tp)
            return True

    return add


__all__ = ['install']
