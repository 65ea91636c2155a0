"""The transaction coordinator of the reference cluster: transactional ids, producer epochs, markers.

Kafka's transaction protocol at both ``transaction.version`` levels clients use:

- **v1** (clients that speak EndTxn v4 or older): clients add partitions with AddPartitionsToTxn and groups with
  AddOffsetsToTxn; an epoch is bumped by InitProducerId, and by the coordinator to fence a producer whose
  transaction timed out.
- **v2** (KIP-890 part 2, while the cluster finalizes ``transaction.version`` 2): Produce v12+ and
  TxnOffsetCommit v5+ add their partition or group to the transaction themselves
  (:meth:`TransactionCoordinator.add_implicitly`), and EndTxn v5 bumps the producer epoch on every commit and
  abort (:meth:`TransactionCoordinator.end_transaction_v2`): the markers carry the new epoch, the answer names it,
  and a retry with the epoch before it gets the same answer.

:class:`Transaction` is the state machine of one transactional id::

    Empty -> Ongoing -> PrepareCommit -> CompleteCommit -> Ongoing | Empty | PrepareAbort ...
                     -> PrepareAbort  -> CompleteAbort  -> Ongoing | Empty | PrepareAbort ...

(``-> PrepareAbort`` from Empty and Complete*: v2's abort of a transaction with nothing in it, which bumps the
epoch) and an invalid transition raises :class:`~kafka_kip.state_machine.InvalidTransition` (a coordinator bug,
never a client error).
Ending a transaction writes a commit or abort marker (a control batch) to every partition in it, and
commits or drops the offsets it sent for its groups (TxnOffsetCommit). A partition without a leader gets
its marker when one is elected; until then the transaction stays in Prepare* and its producer is answered
CONCURRENT_TRANSACTIONS. A sweep every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``
aborts the transactions open longer than their timeout, bumping the epoch so the late producer is fenced.

Every operation takes the id of the broker the request reached: only the coordinator of the transactional
id (``ClusterState.coordinator_for``) serves it, the others answer NOT_COORDINATOR.
"""
from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafka.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    NotCoordinatorError,
    ProducerFencedError,
)
from kafka.structs import TopicPartition

from kafka_kip.protocol import constants
from kafka_kip.state_machine import Transitions
from kafka_kip_reference.broker.groups import GroupCoordinator
from kafka_kip_reference.broker.state import ClusterState

#: Kafka moves a producer to a new id before its epoch would overflow (``Short.MaxValue - 1``).
MAX_PRODUCER_EPOCH = 32766
#: The coordinator epoch written into markers (the epoch of the transaction log partition in Kafka).
COORDINATOR_EPOCH = 0
#: How often an undelivered marker is tried again (its partition had no leader).
MARKER_RETRY_S = 0.05


class TxnState(enum.Enum):
    """Kafka's transaction states (the value is Kafka's name for it)."""

    EMPTY = 'Empty'
    ONGOING = 'Ongoing'
    PREPARE_COMMIT = 'PrepareCommit'
    PREPARE_ABORT = 'PrepareAbort'
    COMPLETE_COMMIT = 'CompleteCommit'
    COMPLETE_ABORT = 'CompleteAbort'


#: state -> the states it may move to (Kafka's ``TransactionState.validPreviousStates``, read forwards).
TRANSITIONS: Transitions[TxnState] = Transitions({
    TxnState.EMPTY: {TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT},
    TxnState.ONGOING: {TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT},
    TxnState.PREPARE_COMMIT: {TxnState.COMPLETE_COMMIT},
    TxnState.PREPARE_ABORT: {TxnState.COMPLETE_ABORT},
    TxnState.COMPLETE_COMMIT: {TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT},
    TxnState.COMPLETE_ABORT: {TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT},
})


@dataclass
class Transaction:
    """What the coordinator knows about one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    last_producer_epoch: int = constants.NO_PRODUCER_EPOCH
    """The epoch before the latest bump (a retried InitProducerId may still present it)."""
    previous_producer_id: int = constants.NO_PRODUCER_ID
    """The producer id before the epoch overflowed into a new one (a retried EndTxn v5 may still present it)."""
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    started_ms: int = -1
    pending_markers: set[TopicPartition] = field(default_factory=set)

    def transition(self, state: TxnState) -> None:
        self.state = TRANSITIONS.check(f'transaction {self.transactional_id!r}', self.state, state)

    def bump_epoch(self, new_producer_id: int) -> None:
        """A new epoch (a new producer id when the epoch would overflow); the old one is fenced."""
        self.last_producer_epoch = self.producer_epoch
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            self.previous_producer_id = self.producer_id
            self.producer_id, self.producer_epoch, self.last_producer_epoch = new_producer_id, 0, constants.NO_PRODUCER_EPOCH
        else:
            self.producer_epoch += 1

    @property
    def preparing(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass(frozen=True)
class InitResult:
    error: int
    producer_id: int = constants.NO_PRODUCER_ID
    producer_epoch: int = constants.NO_PRODUCER_EPOCH


class TransactionCoordinator:
    """The transaction coordinator shared by all brokers of a cluster (see the module docstring)."""

    def __init__(self, cluster: ClusterState, groups: GroupCoordinator) -> None:
        self._cluster = cluster
        self._groups = groups
        self.max_timeout_ms = cluster.config.int('transaction.max.timeout.ms')
        self._sweep_s = cluster.config.int('transaction.abort.timed.out.transaction.cleanup.interval.ms') / 1000
        self.transactions: dict[str, Transaction] = {}
        self._timer: asyncio.TimerHandle | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the timeout sweep (on the cluster's loop)."""
        if self._timer is None:
            self._timer = self._cluster.loop.call_later(self._sweep_s, self._sweep)

    def resume_markers(self) -> None:
        """Write the markers of the transactions that were ending when the cluster closed (data directory)."""
        for txn in self.transactions.values():
            if txn.preparing:
                self._write_markers(txn, commit=txn.state is TxnState.PREPARE_COMMIT)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _sweep(self) -> None:
        now = self._cluster.now_ms()
        for txn in list(self.transactions.values()):
            if txn.state is TxnState.ONGOING and now - txn.started_ms > txn.timeout_ms:
                txn.bump_epoch(self._cluster.allocate_producer_id())  # fences the producer that went quiet
                self._end(txn, commit=False)
        self._timer = self._cluster.loop.call_later(self._sweep_s, self._sweep)

    # -- InitProducerId -------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int,
                         broker_id: int) -> InitResult:
        """A producer id and epoch for ``transactional_id``: a new epoch fences every older producer.

        ``producer_id`` / ``producer_epoch`` (InitProducerId v3+, KIP-360) are the caller's current ones, or
        -1: a producer that is not the latest one for the id is PRODUCER_FENCED.
        """
        if not transactional_id:
            return InitResult(InvalidRequestError.errno)
        if self._not_coordinator(transactional_id, broker_id):
            return InitResult(NotCoordinatorError.errno)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return InitResult(InvalidTransactionTimeoutError.errno)
        txn = self.transactions.get(transactional_id)
        if txn is None:
            txn = Transaction(transactional_id, self._cluster.allocate_producer_id(), 0, timeout_ms)
            self.transactions[transactional_id] = txn
            return InitResult(constants.NONE, txn.producer_id, txn.producer_epoch)
        if producer_id != constants.NO_PRODUCER_ID and not (
                producer_id == txn.producer_id and producer_epoch in (txn.producer_epoch, txn.last_producer_epoch)):
            return InitResult(ProducerFencedError.errno)
        if txn.preparing:
            return InitResult(ConcurrentTransactionsError.errno)
        if txn.state is TxnState.ONGOING:
            # Kafka aborts the open transaction under a bumped epoch first (the old producer is fenced).
            txn.bump_epoch(self._cluster.allocate_producer_id())
            self._end(txn, commit=False)
            if txn.preparing:
                return InitResult(ConcurrentTransactionsError.errno)
        txn.bump_epoch(self._cluster.allocate_producer_id())
        txn.transition(TxnState.EMPTY)
        txn.timeout_ms = timeout_ms
        return InitResult(constants.NONE, txn.producer_id, txn.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], broker_id: int) -> int:
        """Add ``partitions`` to the producer's transaction (which starts if it was not open)."""
        return self._add(transactional_id, producer_id, producer_epoch, broker_id, partitions=partitions)

    def add_implicitly(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition] = (), group_id: str | None = None) -> int:
        """KIP-890 part 2: a Produce v12+ or TxnOffsetCommit v5+ adds its partition (or group) to the producer's
        transaction, starting it if none is open, as the broker's own AddPartitionsToTxn to the coordinator does
        (so whichever broker the request reached may call it)."""
        return self._add(transactional_id, producer_id, producer_epoch, None, partitions, group_id)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition], broker_id: int) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn ``verify_only``: NONE for each partition in the open transaction, else
        INVALID_TXN_STATE (or the producer's error for all)."""
        txn, error = self._producer_transaction(transactional_id, producer_id, producer_epoch, broker_id)
        return {tp: error or (constants.NONE if txn.state is TxnState.ONGOING and tp in txn.partitions
                              else InvalidTxnStateError.errno) for tp in partitions}

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                    broker_id: int) -> int:
        """AddOffsetsToTxn: the group's offsets (TxnOffsetCommit) become part of the transaction."""
        return self._add(transactional_id, producer_id, producer_epoch, broker_id, group_id=group_id)

    def _add(self, transactional_id: str, producer_id: int, producer_epoch: int, broker_id: int | None,
             partitions: Iterable[TopicPartition] = (), group_id: str | None = None) -> int:
        txn, error = self._producer_transaction(transactional_id, producer_id, producer_epoch, broker_id)
        if error:
            return error
        self._open(txn)
        txn.partitions.update(partitions)
        if group_id is not None:
            txn.groups.add(group_id)
        return constants.NONE

    def _open(self, txn: Transaction) -> None:
        if txn.state is not TxnState.ONGOING:
            txn.transition(TxnState.ONGOING)
            txn.partitions.clear()
            txn.groups.clear()
            txn.started_ms = self._cluster.now_ms()

    # -- EndTxn ---------------------------------------------------------------------------------

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        broker_id: int) -> InitResult:
        """Commit or abort the producer's transaction; a retry of the same decision is answered NONE."""
        txn, error = self._producer_transaction(transactional_id, producer_id, producer_epoch, broker_id)
        if error:
            return InitResult(error)
        if txn.state is TxnState.ONGOING:
            self._end(txn, commit)
            error = constants.NONE
        else:  # a retry of the decision just completed is fine; anything else is out of place
            completed = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            error = constants.NONE if txn.state is completed else InvalidTxnStateError.errno
        return InitResult(error, txn.producer_id, txn.producer_epoch)

    def end_transaction_v2(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                           broker_id: int) -> InitResult:
        """EndTxn v5 (KIP-890 part 2): every commit and abort bumps the epoch, and the answer names the new one.

        Kafka's table for the states after a transaction (Retry: the epoch before the bump; Current: the
        coordinator's epoch; EB: the epoch is bumped)::

                           Abort Retry  Abort Current  Commit Retry  Commit Current
            Empty          FENCED       EB             FENCED        INVALID_TXN_STATE
            CompleteAbort  NONE         EB             INVALID       INVALID_TXN_STATE
            CompleteCommit INVALID      EB             NONE          INVALID_TXN_STATE
        """
        if not transactional_id:
            return InitResult(InvalidRequestError.errno)
        if self._not_coordinator(transactional_id, broker_id):
            return InitResult(NotCoordinatorError.errno)
        txn = self.transactions.get(transactional_id)
        if txn is None:
            return InitResult(InvalidProducerIdMappingError.errno)
        retry_on_overflow = (txn.previous_producer_id == producer_id and producer_epoch == MAX_PRODUCER_EPOCH
                             and txn.producer_epoch == 0)
        retry_on_bump = txn.producer_epoch == producer_epoch + 1
        if txn.producer_id != producer_id and not retry_on_overflow:
            return InitResult(InvalidProducerIdMappingError.errno)
        current = producer_epoch == txn.producer_epoch and txn.producer_id == producer_id
        retry = retry_on_bump or retry_on_overflow
        valid = {TxnState.ONGOING: current, TxnState.EMPTY: current,
                 TxnState.PREPARE_COMMIT: retry_on_bump, TxnState.PREPARE_ABORT: retry_on_bump}.get(
            txn.state, retry or current)
        if not valid:
            return InitResult(ProducerFencedError.errno)
        completed, preparing = ((TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT) if commit
                                else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT))
        if txn.state is TxnState.ONGOING or (not commit and not retry and not txn.preparing):
            self._end_bumping_epoch(txn, commit)
        elif txn.state is preparing:
            return InitResult(ConcurrentTransactionsError.errno)
        elif not (txn.state is completed and retry):
            return InitResult(InvalidTxnStateError.errno)
        return InitResult(constants.NONE, txn.producer_id, txn.producer_epoch)

    def _end_bumping_epoch(self, txn: Transaction, commit: bool) -> None:
        """End ``txn`` (an empty one: abort it) under the next epoch, the markers carrying it; a new producer id
        once the epoch is exhausted (the markers still name the old one)."""
        if txn.state is not TxnState.ONGOING:  # v2's abort of nothing: a transaction without partitions
            txn.partitions.clear()
            txn.groups.clear()
        producer_id, marker_epoch = txn.producer_id, txn.producer_epoch + 1
        txn.bump_epoch(self._cluster.allocate_producer_id() if txn.producer_epoch >= MAX_PRODUCER_EPOCH
                       else constants.NO_PRODUCER_ID)
        self._end(txn, commit, producer_id, marker_epoch)

    def _end(self, txn: Transaction, commit: bool, producer_id: int | None = None,
             marker_epoch: int | None = None) -> None:
        """Write ``txn``'s markers (as ``producer_id`` at ``marker_epoch``, by default its current ones)."""
        producer_id = txn.producer_id if producer_id is None else producer_id
        marker_epoch = txn.producer_epoch if marker_epoch is None else marker_epoch
        txn.transition(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
        txn.pending_markers = set(txn.partitions)
        for group_id in txn.groups:
            self._groups.complete_transaction(group_id, producer_id, commit)
        self._write_markers(txn, commit, producer_id, marker_epoch)

    def _write_markers(self, txn: Transaction, commit: bool, producer_id: int, producer_epoch: int) -> None:
        for tp in sorted(txn.pending_markers):
            if self._cluster.write_marker(tp, commit, producer_id, producer_epoch, COORDINATOR_EPOCH):
                txn.pending_markers.discard(tp)
        if txn.pending_markers:
            self._cluster.loop.call_later(MARKER_RETRY_S, self._write_markers, txn, commit, producer_id,
                                          producer_epoch)
            return
        txn.transition(TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)

    # -- Produce verification -------------------------------------------------------------------

    def verify_produce(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                       tp: TopicPartition) -> int:
        """The error for a transactional batch of ``producer_id``/``producer_epoch`` to ``tp``, NONE if it
        belongs to the open transaction of ``transactional_id`` (Kafka's partition verification, KIP-890)."""
        txn = self.transactions.get(transactional_id or '')
        if txn is None or txn.producer_id != producer_id:
            return InvalidProducerIdMappingError.errno
        if producer_epoch != txn.producer_epoch:
            return InvalidProducerEpochError.errno
        if txn.state is not TxnState.ONGOING or tp not in txn.partitions:
            return InvalidTxnStateError.errno
        return constants.NONE

    # -- helpers --------------------------------------------------------------------------------

    def _not_coordinator(self, transactional_id: str, broker_id: int) -> bool:
        return self._cluster.coordinator_for(transactional_id) != broker_id

    def _producer_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              broker_id: int | None) -> tuple[Transaction | None, int]:
        """The transaction of a producer's request, or the error Kafka answers it with (``broker_id`` None: a
        broker's own request to the coordinator)."""
        if not transactional_id:
            return None, InvalidRequestError.errno
        if broker_id is not None and self._not_coordinator(transactional_id, broker_id):
            return None, NotCoordinatorError.errno
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return None, InvalidProducerIdMappingError.errno
        if producer_epoch != txn.producer_epoch:
            return None, ProducerFencedError.errno
        if txn.preparing:
            return None, ConcurrentTransactionsError.errno
        return txn, constants.NONE
