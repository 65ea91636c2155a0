"""Target producer ids: one idempotent producer for the whole copier, a new id only where a chain broke.

An idempotent producer keeps one sequence per partition under one producer id, so every partition of a
copier writes under the same id (one InitProducerId per copier, not per partition). A partition whose
sequence chain broke (a failed or uncertain write, a refused sequence) resumes from the target's end under
an id it has never written with, where its sequence starts again at 0: the current shared id if it did not
use that one, else a new shared id that the partitions breaking at the same time then share too.
"""
from __future__ import annotations

import logging

from kafka.future import Future
from kafka.net.selector import NetworkSelector

import kafka_kip.errors as Errors
from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.lookups import Lookups
from kafka_kip.protocol import requests

log = logging.getLogger(__name__)
NO_PRODUCER = (-1, -1)


class ProducerIds:
    """Hands out ``(producer id, epoch)`` to a copier's partitions (see the module docstring).

    ``enabled`` False (or a target that gives no producer id) hands out :data:`NO_PRODUCER`: writes
    without idempotence.
    """

    def __init__(self, target: ClusterClient, lookups: Lookups, net: NetworkSelector, *, enabled: bool = True) -> None:
        self.target = target
        self._lookups = lookups
        self._net = net
        self._enabled = enabled
        self._current: tuple[int, int] | None = None
        self._fetching: Future | None = None
        self.fetched = 0  # InitProducerId answers received

    async def fresh(self, used: int) -> tuple[int, int]:
        """An id the partition has not written with (``used``: the id it wrote with last, -1 none)."""
        while self._enabled:
            current = self._current
            if current is not None and current[0] != used:
                return current
            if self._fetching is None:
                self._fetching = self._net.call_soon_with_future(self._fetch)
            await self._fetching
        return NO_PRODUCER

    async def _fetch(self) -> None:
        try:
            response = await self._lookups.ask(self.target, lambda _: requests.init_producer_id(),
                                               lambda: (self.target.manager.least_loaded_node(), -1), lambda r: r)
        except Errors.KafkaError as exc:
            if exc.retriable:
                raise
            log.warning('the target gives no producer id (%s); writing one batch at a time without idempotence', exc)
            self._enabled = False
        else:
            self._current = (response.producer_id, response.producer_epoch)
            self.fetched += 1
        finally:
            self._fetching = None
