"""A source partition's copy state: its lifecycle (:class:`CopyState`) and its data, grouped by role.

The lifecycle is an explicit state machine. A *task* (a coroutine of :mod:`kafka_kip.mirror.recovery`)
owns the partition in the states marked owned: while it runs, the copy loop neither reads nor writes
the partition, and answers to requests sent before it began are dropped (``generation``). Every
change goes through a named transition; a transition the table does not allow raises
:class:`InvalidTransition` (a bug, surfaced from ``Copier.poll``).

The data is split by role: :class:`ReadCursor` (where reading the source stands), :class:`Outbox`
(batches read and not yet acknowledged), :class:`ProducerSession` (the target producer id and its
sequence) and :class:`Acknowledged` (what the target confirmed); the cursor keeps the source epochs it
read in an :class:`~kafka_kip.protocol.epoch_cache.EpochCache` (the broker's logs use the same class), for
an exact divergence point.
"""
from __future__ import annotations

import enum
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from kafka.future import Future
from kafka.structs import TopicPartition

from kafka_kip.mirror.batches import Piece
from kafka_kip.mirror.offset_map import PartitionMap
from kafka_kip.protocol.constants import UNKNOWN_EPOCH
from kafka_kip.protocol.epoch_cache import EpochCache
from kafka_kip.state_machine import InvalidTransition as _InvalidTransition
from kafka_kip.state_machine import Transitions

_EPOCH_CACHE = 32  # source epochs remembered per partition (divergence search)


class _Named(str, enum.Enum):
    """An enum whose members are their string values (in comparisons, JSON and f-strings)."""

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class CopyState(_Named):
    """Where a partition's copy is in its lifecycle."""

    STARTING = 'starting'  # task: producer session, target end, resume check
    COPYING = 'copying'  # reading the source and writing the target
    BROKEN = 'broken'  # a write failed or is uncertain: no new writes; recovery once the writes in flight end
    RECOVERING = 'recovering'  # task: continue from the target's end with a new producer session
    VALIDATING = 'validating'  # task: the source leader changed; does it still have what was read (KIP-320)?
    INVESTIGATING = 'investigating'  # task: a fetch was out of range; the source's log start and end are read
    TRUNCATING = 'truncating'  # task: the source lost records that were read; drain, report, stop or continue
    REMAPPING = 'remapping'  # task: offsets cannot stay the source's (a checked gap, a divergence): translated mode
    DONE = 'done'  # the bounded range is on the target
    STOPPED = 'stopped'  # an incident stopped the partition

    @property
    def owned(self) -> bool:
        """True while a task owns the partition."""
        return self in _OWNED

    @property
    def final(self) -> bool:
        return self in (CopyState.DONE, CopyState.STOPPED)


_OWNED = frozenset({CopyState.STARTING, CopyState.RECOVERING, CopyState.VALIDATING, CopyState.INVESTIGATING,
                    CopyState.TRUNCATING, CopyState.REMAPPING})
_TASK_ENDS = frozenset({CopyState.COPYING, CopyState.BROKEN, CopyState.STOPPED})
#: Allowed transitions: state -> the states it may go to.
TRANSITIONS: Transitions[CopyState] = Transitions({
    CopyState.STARTING: _TASK_ENDS | {CopyState.TRUNCATING},
    CopyState.COPYING: frozenset({CopyState.VALIDATING, CopyState.INVESTIGATING, CopyState.TRUNCATING,
                                  CopyState.REMAPPING, CopyState.BROKEN, CopyState.DONE, CopyState.STOPPED}),
    CopyState.BROKEN: frozenset({CopyState.RECOVERING, CopyState.STOPPED}),
    CopyState.RECOVERING: _TASK_ENDS | {CopyState.TRUNCATING},
    CopyState.VALIDATING: _TASK_ENDS | {CopyState.TRUNCATING},
    CopyState.INVESTIGATING: _TASK_ENDS | {CopyState.VALIDATING, CopyState.TRUNCATING},
    CopyState.TRUNCATING: _TASK_ENDS | {CopyState.REMAPPING},  # closest: the new history after the target's end
    CopyState.REMAPPING: _TASK_ENDS,
    CopyState.DONE: frozenset(),
    CopyState.STOPPED: frozenset(),
})


class InvalidTransition(_InvalidTransition):
    """A partition was asked to make a transition its lifecycle does not allow (a bug)."""

    def __init__(self, tp: TopicPartition, current: CopyState, wanted: CopyState) -> None:
        super().__init__(f'{tp.topic}-{tp.partition}', current, wanted)


class ProgressState(_Named):
    """A partition's state as reported in progress and summaries."""

    STARTING = 'starting'
    COPYING = 'copying'
    RECOVERING = 'recovering'
    STOPPED = 'stopped'
    DONE = 'done'


_PROGRESS = {CopyState.STARTING: ProgressState.STARTING, CopyState.COPYING: ProgressState.COPYING,
             CopyState.DONE: ProgressState.DONE, CopyState.STOPPED: ProgressState.STOPPED}


class IncidentKind(_Named):
    """What an :class:`Incident` reports."""

    TRUNCATION = 'truncation'  # the source lost records the mirror had read (unclean election)
    RETENTION = 'retention'  # records deleted on the source before they were copied
    OFFSET_GAP = 'offset-gap'  # checked mode: the target cannot hold the next record at its source offset
    OFFSET_MISMATCH = 'offset-mismatch'  # the target stored a batch at other offsets than the mirror's
    RECREATED = 'recreated'  # the source topic was deleted or recreated (another incarnation)
    ERROR = 'error'  # a request failed for good
    NOT_COPIED = 'not-copied'  # a source partition the target cannot hold (topic missing or too small)


@dataclass(frozen=True)
class Incident:
    """Data the copier could not copy as the source had it, reported instead of hidden.

    Ranges are ``[start, end)`` offsets: ``lost`` in the source's numbering, ``divergent`` the target
    offsets that hold records the source no longer has at those offsets. ``truncated_at`` is None when the
    divergence point is unknown. ``continued_at`` (``closest``; None when the partition stopped) is the
    target offset the copy continued at: the source's records from ``truncated_at`` on follow there (after
    those below it that were read and not yet on the target, if any), in translated mode when the target
    keeps copies of lost records (``divergent``).
    """

    kind: IncidentKind
    source: TopicPartition
    target: TopicPartition
    stopped: bool
    message: str
    lost: tuple[int, int] | None = None
    divergent: tuple[int, int] | None = None
    truncated_at: int | None = None
    continued_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out['kind'] = str(self.kind)
        out['source'] = f'{self.source.topic}-{self.source.partition}'
        out['target'] = f'{self.target.topic}-{self.target.partition}'
        return out


class PartitionProgress(NamedTuple):
    """A partition's copy state at one moment."""

    source: TopicPartition
    target: TopicPartition
    state: ProgressState
    position: int  # next source offset to read (-1 before the start is known)
    copied_to: int  # every source offset below this is on the target, skipped or reported
    target_end: int  # the target offset after the last acknowledged write
    source_end: int  # the source's high watermark as last fetched (-1 unknown)
    records: int  # records written by this copier
    bytes: int
    mode: str = ''  # how offsets are kept: 'broker', 'checked' or 'translated' ('' before it is chosen)
    copying_since: float = -1.0  # when it first began copying (monotonic seconds; -1 not yet)
    first_copied_at: float = -1.0  # when its first write was acknowledged (-1 none yet)
    last_copied_at: float = -1.0  # when its last write was acknowledged (-1 none yet)

    @property
    def lag(self) -> int:
        """Source records (offsets) not yet on the target; -1 when unknown."""
        if self.source_end < 0 or self.copied_to < 0:
            return -1
        return max(0, self.source_end - self.copied_to)


@dataclass(eq=False)
class ReadCursor:
    """Where reading the source stands."""

    position: int | None  # next source offset to read; None until the start is known
    end: int | None  # read up to this offset (exclusive); None: for as long as the copier runs
    leader_epoch: int = UNKNOWN_EPOCH  # highest source leader epoch seen: fetched with as current_leader_epoch
    epochs: EpochCache = field(default_factory=lambda: EpochCache(_EPOCH_CACHE))  # source epochs read
    source_end: int = -1  # the source's high watermark as last fetched
    fetching: bool = False  # a fetch for the partition is in flight
    retry_at: float = 0.0  # no fetch before this time (monotonic seconds) after a source error

    @property
    def wants_more(self) -> bool:
        return self.end is None or (self.position is not None and self.position < self.end)


@dataclass(eq=False)
class Outbox:
    """Batches read and not yet acknowledged: queued, then in flight (oldest first)."""

    queue: deque[Piece] = field(default_factory=deque)
    queued_bytes: int = 0
    in_flight: list[Piece] = field(default_factory=list)
    next_write: int = 0  # the target offset the next write lands at (checked, translated)
    drained: Future | None = None  # resolved when the last write in flight is answered
    # translated mode: the map is written ahead of the records it covers (kafka_kip.mirror.offset_map)
    planned: int = 0  # queued batches (from the head) whose map records are written or being written
    mapped: int = 0  # queued batches (from the head) whose map records are on the target: writable
    plan_target: int = 0  # the target offset the next planned batch lands at

    @property
    def empty(self) -> bool:
        return not self.queue and not self.in_flight

    def clear_queue(self) -> None:
        self.queue.clear()
        self.queued_bytes = self.planned = self.mapped = 0

    def restart_at(self, target: int) -> None:
        """Nothing queued; the next write lands at target offset ``target``."""
        self.clear_queue()
        self.next_write = self.plan_target = target


@dataclass(eq=False)
class ProducerSession:
    """The target producer writing the partition (idempotent when ``producer_id`` >= 0)."""

    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = 0  # base sequence of the next batch
    probe: bool = True  # the first write of a session goes alone
    broken: bool = False  # a write failed or is uncertain: renew the session and resume from the target's end
    end_hint: int = -1  # the target's log end offset from INVALID_PRODUCE_OFFSET

    def renew(self, producer_id: int = -1, producer_epoch: int = -1) -> None:
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.sequence, self.probe, self.broken, self.end_hint = 0, True, False, -1

    def limit(self, max_in_flight: int) -> int:
        """Writes allowed in flight: one until the session's first write is acknowledged."""
        return 1 if self.probe or self.producer_id < 0 else max_in_flight


@dataclass(eq=False)
class Acknowledged:
    """What the target confirmed."""

    source: int = -1  # every source offset below this is on the target, skipped or reported
    target: int = -1  # the target offset after the last acknowledged write
    epoch: int = UNKNOWN_EPOCH  # the source leader epoch of the last acknowledged batch
    records: int = 0  # records written by this copier
    bytes: int = 0
    first_at: float = -1.0  # when the first write was acknowledged (monotonic seconds; -1 none yet)
    last_at: float = -1.0  # when the last write was acknowledged

    def add(self, records: int, size: int, now: float) -> None:
        """A write of ``records`` records, ``size`` bytes, acknowledged at ``now``."""
        self.records += records
        self.bytes += size
        if self.first_at < 0:
            self.first_at = now
        self.last_at = now


@dataclass(eq=False)
class PartitionCopy:
    """One source partition copied to one target partition: lifecycle plus data by role."""

    source: TopicPartition
    target: TopicPartition
    cursor: ReadCursor
    outbox: Outbox = field(default_factory=Outbox)
    session: ProducerSession = field(default_factory=ProducerSession)
    acked: Acknowledged = field(default_factory=Acknowledged)
    state: CopyState = CopyState.STARTING
    generation: int = 0  # bumped when a task takes over: answers to older requests are dropped
    mode: str = ''  # how offsets are kept ('broker', 'checked', 'translated'), chosen by the start task
    offset_map: PartitionMap | None = None  # what the map says of the target partition (translated: its runs)
    source_topic_id: str | None = None  # the source topic's id when copying began (None: the source has none)
    copying_since: float = -1.0  # when the partition first began copying (monotonic seconds; -1 not yet)

    @property
    def name(self) -> str:
        return f'{self.source.topic}-{self.source.partition}'

    # -- transitions ---------------------------------------------------------------------------

    def _go(self, state: CopyState) -> None:
        if not TRANSITIONS.allows(self.state, state):
            raise InvalidTransition(self.source, self.state, state)
        self.state = state

    def take_over(self, task_state: CopyState) -> None:
        """A task takes the partition (from COPYING, BROKEN, or another task's state)."""
        if not task_state.owned:
            raise InvalidTransition(self.source, self.state, task_state)
        self._go(task_state)
        self.generation += 1

    def hand_back(self) -> None:
        """The owning task ended: copying resumes, or recovery is due if a write failed meanwhile."""
        if self.state is CopyState.STOPPED:
            return
        self._go(CopyState.BROKEN if self.session.broken else CopyState.COPYING)
        if self.copying_since < 0:
            self.copying_since = time.monotonic()

    def write_failed(self, end_hint: int) -> None:
        """A write failed or its outcome is unknown: stop writing until the session is renewed."""
        self.session.broken = True
        self.session.end_hint = max(self.session.end_hint, end_hint)
        if self.state is CopyState.COPYING:
            self._go(CopyState.BROKEN)

    def finish(self) -> bool:
        """COPYING -> DONE once the bounded range is read and acknowledged; True if done now."""
        if (self.state is CopyState.COPYING and not self.cursor.wants_more and self.outbox.empty
                and not self.session.broken):
            self._go(CopyState.DONE)
        return self.state is CopyState.DONE

    def stop(self) -> bool:
        """-> STOPPED (queued batches dropped); False if it already was."""
        if self.state is CopyState.STOPPED:
            return False
        self._go(CopyState.STOPPED)
        self.outbox.clear_queue()
        return True

    # -- views ---------------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing queued, in flight or being recovered (or stopped)."""
        return self.state.final or (self.state is CopyState.COPYING and self.outbox.empty)

    def progress(self) -> PartitionProgress:
        state = _PROGRESS.get(self.state, ProgressState.RECOVERING)
        acked = self.acked
        position = self.cursor.position
        return PartitionProgress(self.source, self.target, state, -1 if position is None else position,
                                 acked.source, acked.target, self.cursor.source_end, acked.records, acked.bytes,
                                 self.mode, self.copying_since, acked.first_at, acked.last_at)
