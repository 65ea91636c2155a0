"""The garbage collection policy of a ``kafka-kip broker`` process (never installed in a process embedding
:class:`~kafka_kip_reference.broker.cluster.ReferenceCluster`: that process's collector is its owner's).

CPython's full collection walks every tracked object. A cluster of 100,000 partitions holds over a million of them,
and a full collection then stops every broker of the process for a second or more (several on a loaded machine),
over and over while the cluster grows (each time the objects that survived young collections reach a quarter of
those in the oldest generation).

The policy: what survives a full collection is frozen (``gc.freeze()``: moved where later collections do not walk
it), so the next full collection walks only what came after, and growing the cluster costs collections in
proportion to the growth. Frozen objects that become garbage in a reference cycle are not reclaimed while frozen:
once the frozen objects have doubled since the last collection that walked them all, the next full collection
walks everything again (``gc.unfreeze()`` first). So the walks of the whole heap are as rare as its doublings, and
cyclic garbage among frozen objects stays below half of them. Objects without cycles are freed by reference
counting whether frozen or not.
"""
from __future__ import annotations

import gc
from typing import Any

#: The frozen objects may grow to this many times the count after the last collection that walked them all.
GROWTH_BEFORE_A_WHOLE_WALK = 2


class FreezeSurvivors:
    """The policy as a ``gc.callbacks`` entry: :meth:`install`, then :meth:`uninstall` (which unfreezes)."""

    def __init__(self) -> None:
        #: objects frozen now, and right after the last collection that walked them all (counted here:
        #: ``gc.get_freeze_count()`` walks every frozen object)
        self._frozen = 0
        self._frozen_after_whole_walk = 0
        self._whole = False
        #: full collections that walked only what came after the last freeze, and those that walked everything
        self.partial_walks = 0
        self.whole_walks = 0

    def install(self) -> None:
        gc.collect()
        gc.freeze()
        self._frozen = self._frozen_after_whole_walk = gc.get_freeze_count()
        gc.callbacks.append(self)

    def uninstall(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)
        gc.unfreeze()

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info['generation'] != 2:
            return
        if phase == 'start':
            self._whole = self._frozen > GROWTH_BEFORE_A_WHOLE_WALK * max(self._frozen_after_whole_walk, 1)
            if self._whole:
                gc.unfreeze()  # this collection walks everything: cyclic garbage among the frozen is reclaimed
                self._frozen = 0
            return
        survivors = len(gc.get_objects(generation=2))  # what this collection walked and kept
        gc.freeze()
        self._frozen += survivors
        if self._whole:
            self._frozen_after_whole_walk = self._frozen
            self.whole_walks += 1
        else:
            self.partial_walks += 1


__all__ = ['GROWTH_BEFORE_A_WHOLE_WALK', 'FreezeSurvivors']
