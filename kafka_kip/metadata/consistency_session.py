"""One client's side of KIP-1243: what its requests carry, what their responses teach it, when it must stop.

A :class:`ConsistencySession` belongs to one client (its connection manager) and wraps the client's
:class:`~kafka_kip.metadata.store.ConsistencyContextStore`:

- :meth:`~ConsistencySession.request_state`: the consistency state a request to a ``kip.1243`` broker carries
  (the store's context; nothing while it is unknown); when the store has moved on (another client or process
  stored a newer context) it calls ``on_context_advanced(context)`` once, so the client refreshes its metadata;
- :meth:`~ConsistencySession.on_response`: a response header's state goes to the store; a response from
  another cluster than the store's makes the session *fatal* (:attr:`~ConsistencySession.fatal_error`, an
  ``InconsistentClusterIdError`` naming both cluster ids): the client sends nothing more and raises it to its
  caller; a broker whose image is older than what the request carried is remembered as *stale* for a while, so
  requests that may go anywhere go elsewhere (:meth:`~ConsistencySession.is_stale`; :meth:`~ConsistencySession.avoid`
  marks one, as the cluster cache does for a broker whose answer did not reflect a factory's write);
- :meth:`~ConsistencySession.check_cluster_id`: the same fatal check for a cluster id learnt otherwise (a
  MetadataResponse's, which stock brokers send too).

Brokers are remembered by address (``(host, port)``, from ``address_of(node_id)``, which the client's
connection manager sets), which a bootstrap connection shares with the broker it turns out to be.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable

from kafka.errors import InconsistentClusterIdError

from kafka_kip.errors import inconsistent_cluster_id
from kafka_kip.metadata.consistency import ConsistencyContext
from kafka_kip.metadata.store import ConsistencyContextStore
from kafka_kip.protocol.headers import ConsistencyState, consistency_state_tags

log = logging.getLogger(__name__)

Address = tuple[str, int]


class ConsistencySession:
    """One client's use of its consistency context store (see the module docstring). Thread-safe.

    ``stale_backoff_ms``: how long a broker that answered from metadata older than the request's context is
    avoided by requests that may go to any broker.
    """

    def __init__(self, store: ConsistencyContextStore, stale_backoff_ms: float = 1000) -> None:
        self.store = store
        self.stale_backoff_ms = stale_backoff_ms
        #: the InconsistentClusterIdError that ended this client's talking to brokers, or None
        self.fatal_error: InconsistentClusterIdError | None = None
        #: responses whose broker's metadata was older than the context their request carried
        self.stale_responses = 0
        self._sent: tuple[ConsistencyContext, tuple[ConsistencyState, bytes] | None] = (
            ConsistencyContext.unknown(), None)
        self._stale_until: dict[Address, float] = {}
        self._lock = threading.Lock()
        #: ``node_id -> (host, port)`` of the brokers the client knows (bootstrap nodes included), or None
        self.address_of: Callable[[Hashable], Address | None] = lambda node_id: None
        #: called with the store's context when a request finds it changed since the last request
        self.on_context_advanced: Callable[[ConsistencyContext], None] = lambda context: None

    # -- requests ------------------------------------------------------------------------------

    def request_state(self) -> tuple[ConsistencyState, bytes] | None:
        """The state a request carries (the store's context; None while it is unknown) and its header tags."""
        context = self.store.read()
        sent_context, sent = self._sent
        if context is not sent_context:
            if context.is_unknown():
                sent = None
            else:
                state = ConsistencyState(context.cluster_id, context.offset)
                sent = (state, consistency_state_tags(*state))
            self._sent = (context, sent)
            self.on_context_advanced(context)
        return sent

    # -- responses -----------------------------------------------------------------------------

    def on_response(self, node_id: Hashable, sent: ConsistencyState | None,
                    received: ConsistencyState | None) -> InconsistentClusterIdError | None:
        """Learn from the state of a response header from broker ``node_id`` (None: it carried none); the fatal
        error if the broker belongs to another cluster than the store's context."""
        if received is None or received.cluster_id is None:
            return None
        cluster_id, token = received
        current = self.store.read()
        if cluster_id == current.cluster_id and token <= current.offset and (
                sent is None or token >= sent.consistency_token):
            return None  # nothing new: the common case, once per response
        expected = sent.cluster_id if sent is not None else current.cluster_id
        if expected is not None and expected != cluster_id:
            return self.fail(inconsistent_cluster_id(expected, cluster_id, self._where(node_id)))
        if token >= 0 and (token > current.offset or current.cluster_id != cluster_id):
            try:
                self.store.store_latest(ConsistencyContext.of(cluster_id, token))
            except ValueError:  # the store moved to another cluster meanwhile (another client wrote it)
                return self.fail(inconsistent_cluster_id(self.store.read().cluster_id, cluster_id,
                                                         self._where(node_id)))
        if sent is not None and 0 <= token < sent.consistency_token:
            self.stale_responses += 1
            self.avoid(node_id)
        return None

    def _where(self, node_id: Hashable) -> str:
        address = self.address_of(node_id)
        return f'broker {node_id}' if address is None else f'broker {node_id} at {address[0]}:{address[1]}'

    def check_cluster_id(self, cluster_id: str | None, where: str) -> InconsistentClusterIdError | None:
        """The fatal error if ``cluster_id`` (learnt from ``where``) is not the cluster of the store's context."""
        expected = self.store.read().cluster_id
        if cluster_id is None or expected is None or cluster_id == expected:
            return None
        return self.fail(inconsistent_cluster_id(expected, cluster_id, where))

    # -- stale brokers ---------------------------------------------------------------------------

    def avoid(self, node_id: Hashable) -> None:
        """Avoid broker ``node_id`` for ``stale_backoff_ms``: it answered from stale metadata."""
        address = self.address_of(node_id)
        if address is not None:
            self._stale_until[address] = time.monotonic() + self.stale_backoff_ms / 1000

    def is_stale(self, node_id: Hashable) -> bool:
        """True while broker ``node_id`` is avoided: it answered from metadata older than the context."""
        address = self.address_of(node_id)
        until = None if address is None else self._stale_until.get(address)
        if until is None:
            return False
        if time.monotonic() < until:
            return True
        self._stale_until.pop(address, None)
        return False

    # -- the end -------------------------------------------------------------------------------

    def fail(self, error: InconsistentClusterIdError) -> InconsistentClusterIdError:
        """Make the session fatal with ``error`` (the first error stays); returns the fatal error."""
        with self._lock:
            first = self.fatal_error is None
            if first:
                self.fatal_error = error
        if first:
            log.error('%s', error)
        return self.fatal_error


__all__ = ['Address', 'ConsistencySession']
