"""The copy loop's partition lifecycle, on the object alone (no network)."""
from __future__ import annotations

import json

import pytest
from kafka.structs import TopicPartition

from kafka_kip.mirror.batches import Piece
from kafka_kip.mirror.state import (
    CopyState,
    InvalidTransition,
    PartitionCopy,
    ProgressState,
    ReadCursor,
)
from kafka_kip.protocol.epoch_cache import EpochCache

TP = TopicPartition('t', 0)


def partition(start: int | None = 0, end: int | None = None) -> PartitionCopy:
    return PartitionCopy(TP, TopicPartition('dr.t', 0), ReadCursor(start, end))


def copying(start: int | None = 0, end: int | None = None) -> PartitionCopy:
    p = partition(start, end)
    p.hand_back()  # the start task ended
    return p


def piece(base: int, count: int) -> Piece:
    return Piece(base, base + count - 1, count, b'x' * count, 0)


def test_a_partition_starts_owned_by_its_start_task_then_copies() -> None:
    p = partition(None)
    assert (p.state, p.state.owned, p.progress().state, p.progress().position) == \
        (CopyState.STARTING, True, ProgressState.STARTING, -1)
    p.hand_back()
    assert (p.state, p.state.owned, p.progress().state) == (CopyState.COPYING, False, 'copying')


def test_a_failed_write_breaks_the_session_then_recovery_takes_over() -> None:
    p = copying()
    p.outbox.in_flight.append(piece(0, 5))
    p.write_failed(end_hint=3)
    assert (p.state, p.session.broken, p.session.end_hint) == (CopyState.BROKEN, True, 3)
    p.write_failed(end_hint=-1)  # a second answer of the same round keeps the highest hint
    assert (p.state, p.session.end_hint, p.progress().state) == (CopyState.BROKEN, 3, 'recovering')
    generation = p.generation
    p.take_over(CopyState.RECOVERING)
    assert (p.state, p.generation) == (CopyState.RECOVERING, generation + 1)
    p.session.renew(producer_id=7, producer_epoch=0)
    p.hand_back()
    assert (p.state, p.session.broken, p.session.end_hint, p.session.probe) == (CopyState.COPYING, False, -1, True)


def test_a_write_failing_while_a_task_owns_the_partition_sends_it_to_recovery_afterwards() -> None:
    p = copying()
    p.take_over(CopyState.VALIDATING)
    p.write_failed(end_hint=-1)
    assert p.state is CopyState.VALIDATING  # the task keeps the partition
    p.hand_back()
    assert p.state is CopyState.BROKEN


def test_tasks_hand_over_to_the_truncation_task_and_an_investigation_can_validate() -> None:
    p = copying()
    p.take_over(CopyState.INVESTIGATING)
    p.take_over(CopyState.VALIDATING)
    p.take_over(CopyState.TRUNCATING)
    assert p.stop() is True
    assert p.stop() is False  # already stopped
    p.hand_back()  # the task ending leaves a stopped partition stopped
    assert (p.state, p.progress().state) == (CopyState.STOPPED, ProgressState.STOPPED)


def test_the_truncation_task_hands_over_to_remapping_and_the_partition_copies_on() -> None:
    p = copying()
    p.take_over(CopyState.TRUNCATING)
    generation = p.generation
    p.take_over(CopyState.REMAPPING)  # closest: the new history follows the target's end, translated
    assert (p.state, p.generation, p.progress().state) == (CopyState.REMAPPING, generation + 1, 'recovering')
    p.hand_back()
    assert p.state is CopyState.COPYING
    p.take_over(CopyState.REMAPPING)  # a checked gap
    with pytest.raises(InvalidTransition):  # remapping ends a truncation, it never leads into one
        p.take_over(CopyState.TRUNCATING)


@pytest.mark.parametrize(('setup', 'wanted'), [
    (lambda p: None, CopyState.RECOVERING),  # recovery only after a failed write
    (lambda p: p.write_failed(-1), CopyState.VALIDATING),  # a broken partition recovers first
    (lambda p: p.take_over(CopyState.TRUNCATING), CopyState.INVESTIGATING),
    (lambda p: p.stop(), CopyState.RECOVERING),  # stopped is final
    (lambda p: None, CopyState.COPYING),  # not a task state
])
def test_transitions_the_lifecycle_does_not_allow_raise(setup, wanted: CopyState) -> None:
    p = copying()
    setup(p)
    before = p.state
    with pytest.raises(InvalidTransition) as raised:
        p.take_over(wanted)
    assert (raised.value.current, raised.value.wanted, p.state) == (before, wanted, before)
    assert str(raised.value) == f't-0: no transition from {before} to {wanted}'


def test_a_bounded_partition_is_done_once_everything_read_is_acknowledged() -> None:
    p = copying(0, 10)
    assert p.finish() is False  # nothing read yet
    p.cursor.position = 10
    p.outbox.in_flight.append(piece(0, 10))
    assert p.finish() is False and not p.idle
    p.outbox.in_flight.clear()
    assert p.finish() is True and p.state is CopyState.DONE and p.idle
    with pytest.raises(InvalidTransition):
        p.stop()
    unbounded = copying(0, None)
    unbounded.cursor.position = 10**9
    assert unbounded.finish() is False and unbounded.idle


def test_a_broken_partition_is_never_done_nor_idle() -> None:
    p = copying(0, 10)
    p.cursor.position = 10
    p.write_failed(-1)
    assert (p.finish(), p.idle, p.state) == (False, False, CopyState.BROKEN)


def test_progress_reports_acknowledged_offsets_and_states_as_strings() -> None:
    p = copying(40)
    p.acked.source, p.acked.target, p.acked.records, p.acked.bytes = 50, 50, 10, 1000
    p.cursor.source_end = 70
    p.cursor.position = 60
    progress = p.progress()
    assert progress[:10] == (TP, TopicPartition('dr.t', 0), 'copying', 60, 50, 50, 70, 10, 1000, '')
    # when it began copying is known; no write of this copier was acknowledged (acked set by hand above)
    assert progress.copying_since > 0 and (progress.first_copied_at, progress.last_copied_at) == (-1.0, -1.0)
    assert progress.lag == 20
    assert json.dumps(progress.state) == '"copying"' and f'{progress.state:<8}|' == 'copying |'


def test_the_epoch_cache_gives_kafkas_divergence_point() -> None:
    cache = EpochCache()
    for epoch, offset in [(0, 0), (0, 50), (2, 100), (1, 120), (5, 150)]:
        cache.note(epoch, offset)
    assert cache.entries == [(0, 0), (2, 100), (5, 150)] and cache.latest_epoch == 5
    # the leader's epoch 2 ends at 130: our epoch 5 (from 150) is not on it, so we part at 130
    assert cache.divergence_point(200, 2, 130) == 130
    # the leader knows epoch 2 up to 170 but we have epoch 5 from 150: part at 150
    assert cache.divergence_point(200, 2, 170) == 150
    # the leader has epoch 5 up to 300: nothing we read is gone
    assert cache.divergence_point(200, 5, 300) == 200
    cache.truncate_from_end(100)
    assert cache.entries == [(0, 0)]
