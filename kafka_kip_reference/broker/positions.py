"""KIP-253's position exchange of one consumer group: what members need to know and what they report.

A member holding a partition created by an expansion names, in each heartbeat, the prior partitions whose
group position it waits for (``need_positions``); every member learns the union of those needs from its
heartbeat responses and reports its own positions on the needed partitions it consumes (``positions``).
The coordinator keeps the latest report per needed partition and answers each member the positions of the
partitions it needs. Reports are kept for one generation only: after a rebalance a partition's new owner
starts from the committed offset, which may be below what the old owner reported, so the old report could
release a hold early.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafka.structs import TopicPartition


class PositionExchange:
    """The needs and reported positions of one group's current generation (on the cluster's loop only)."""

    def __init__(self) -> None:
        self._needs: dict[str, frozenset[TopicPartition]] = {}
        self._positions: dict[TopicPartition, int] = {}

    def needed(self) -> frozenset[TopicPartition]:
        """The partitions some member of the group waits for."""
        return frozenset().union(*self._needs.values())

    def exchange(self, member_id: str, needs: Iterable[TopicPartition],
                 reports: Mapping[TopicPartition, int]) -> tuple[dict[TopicPartition, int], frozenset[TopicPartition]]:
        """A heartbeat of ``member_id``: it now needs exactly ``needs`` and reports ``reports``.

        Returns the positions known for the partitions it needs and the partitions the group needs. Reports of
        partitions nobody needs are not kept.
        """
        wanted = frozenset(needs)
        if wanted:
            self._needs[member_id] = wanted
        else:
            self._needs.pop(member_id, None)
        needed = self.needed()
        for tp, offset in reports.items():
            if tp in needed:
                self._positions[tp] = offset
        for tp in set(self._positions) - needed:
            del self._positions[tp]
        return {tp: self._positions[tp] for tp in wanted if tp in self._positions}, needed

    def forget_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """The reports of ``partitions`` no longer hold (their owner released them; the next owner reports anew)."""
        for tp in partitions:
            self._positions.pop(tp, None)

    def forget_member(self, member_id: str) -> None:
        """``member_id`` left the group: it needs nothing any more."""
        self._needs.pop(member_id, None)

    def new_generation(self) -> None:
        """A rebalance completed: every report belongs to the previous generation."""
        self._positions.clear()


__all__ = ['PositionExchange']
