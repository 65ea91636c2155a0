"""Reference cluster storage: record batch bytes (batches.py) and one replica's log (log.py)."""
from __future__ import annotations

import pytest
from crc32c import crc32c

from kafka_kip.protocol.constants import (
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
)
from kafka_kip_reference.broker.batches import (
    InvalidBatch,
    build_batch,
    iter_records,
    parse_header,
    rewrite,
)
from kafka_kip_reference.broker.log import EpochEntry, LogRecord, PartitionLog, TimestampAndOffset
from kafka_kip_reference.broker.record_validation import ValidationRules, validate_batch
from kafka_kip_reference.broker.state import truncate_by_epoch


def values(*names: str) -> list[tuple[bytes | None, bytes]]:
    return [(None, name.encode()) for name in names]


def append(log: PartitionLog, epoch: int, *names: str, timestamps=None, producer=(-1, -1, -1)) -> int:
    """Leader-style append at the log end; returns the base offset."""
    pid, pepoch, seq = producer
    raw = build_batch(values(*names), timestamps=timestamps, producer_id=pid, producer_epoch=pepoch,
                      base_sequence=seq)
    base = log.log_end_offset
    stored = rewrite(raw, base, epoch)
    log.append(stored, parse_header(stored))
    log.high_watermark = log.log_end_offset
    return base


def read_offsets(data: bytes) -> list[int]:
    """Record offsets of concatenated batches (what a fetch returns)."""
    found, pos = [], 0
    while pos < len(data):
        size = parse_header(data, pos).size
        found.extend(r.offset for r in iter_records(data[pos:pos + size]))
        pos += size
    return found


def offsets(log: PartitionLog) -> list[tuple[int, int, bytes]]:
    return [(r.offset, r.leader_epoch, r.value) for r in log.records()]


# -- batches -----------------------------------------------------------------------------------------


def test_rewrite_assigns_offset_and_epoch_outside_the_crc():
    raw = build_batch(values('a', 'b', 'c'))
    stored = rewrite(raw, base_offset=100, leader_epoch=7)
    header = parse_header(stored)
    assert (header.base_offset, header.partition_leader_epoch, header.last_offset) == (100, 7, 102)
    assert header.crc == parse_header(raw).crc == crc32c(stored[21:])
    assert stored[16:] == raw[16:]
    assert [(r.offset, r.value) for r in iter_records(stored)] == [(100, b'a'), (101, b'b'), (102, b'c')]


def test_log_append_time_rewrite_sets_type_max_timestamp_and_a_new_crc():
    raw = build_batch(values('a', 'b'), timestamps=[5, 9])
    stored = rewrite(raw, base_offset=3, leader_epoch=1, log_append_time=123456)
    header = parse_header(stored)
    assert header.attributes & 0x08 == 0x08
    assert header.max_timestamp == 123456
    assert header.crc == crc32c(stored[21:]) != parse_header(raw).crc
    assert [(r.offset, r.timestamp) for r in iter_records(stored)] == [(3, 123456), (4, 123456)]


@pytest.mark.parametrize('compression', [1, 3, 4])
def test_compressed_batches_pass_through_and_decode(compression):
    raw = build_batch(values(*(f'value-{i}' * 10 for i in range(20))), compression=compression)
    rules = ValidationRules(partition='t-0', max_message_bytes=1 << 20, max_uncompressed_bytes=1 << 20, now_ms=10_000)
    header = validate_batch(raw, rules).header
    assert header.attributes & 0x07 == compression
    stored = rewrite(raw, 50, 2)
    assert [r.offset for r in iter_records(stored)] == list(range(50, 70))
    assert next(iter_records(stored)).value == b'value-0' * 10


# -- log: append, read, gaps -----------------------------------------------------------------------


def test_append_assigns_consecutive_offsets_and_records_report_epochs():
    log = PartitionLog()
    log.assign_epoch(0, 0)
    assert append(log, 0, 'a', 'b') == 0
    assert append(log, 0, 'c') == 2
    log.assign_epoch(3, 3)
    assert append(log, 3, 'd') == 3
    assert log.log_end_offset == 4
    assert log.records() == [LogRecord(0, 0, None, b'a'), LogRecord(1, 0, None, b'b'),
                             LogRecord(2, 0, None, b'c'), LogRecord(3, 3, None, b'd')]


def test_read_returns_whole_batches_within_max_bytes_and_below_the_upper_bound():
    log = PartitionLog()
    for i in range(5):
        append(log, 0, f'v{i}a', f'v{i}b')
    size = len(log.read(0, 10**6, 2, min_one=False))  # exactly one batch: offsets 0-1
    assert read_offsets(log.read(0, 10**6, 2, min_one=False)) == [0, 1]
    assert read_offsets(log.read(0, size * 3 - 1, 10, min_one=False)) == [0, 1, 2, 3]
    assert read_offsets(log.read(3, size * 3, 10, min_one=False)) == [2, 3, 4, 5, 6, 7]  # from the batch of 3
    assert log.read(0, 10, 10, min_one=False) == b''
    assert len(log.read(0, 10, 10, min_one=True)) == size  # KIP-74: first batch even if too large
    assert log.read(10, 10**6, 10, min_one=True) == b''
    assert log.read(4, 10**6, 4, min_one=True) == b''  # nothing below the upper bound


def test_offset_gaps_from_produce_with_offsets_are_skipped_by_reads():
    log = PartitionLog()
    for base, names in ((0, ('a', 'b')), (10, ('c',)), (20, ('d', 'e'))):
        raw = build_batch(values(*names), base_offset=base)
        stored = rewrite(raw, base, 0)
        log.append(stored, parse_header(stored))
    assert log.log_end_offset == 22
    assert read_offsets(log.read(5, 10**6, 22, min_one=True)) == [10, 20, 21]
    assert read_offsets(log.read(12, 10**6, 20, min_one=True)) == []
    assert [r.offset for r in log.records()] == [0, 1, 10, 20, 21]
    log.truncate_to(15)
    assert (log.log_end_offset, [r.offset for r in log.records()]) == (15, [0, 1, 10])


# -- log: leader epoch cache ---------------------------------------------------------------------


def test_epoch_cache_assign_follows_kafkas_rules():
    log = PartitionLog()
    log.assign_epoch(0, 0)
    log.assign_epoch(0, 5)  # same epoch, later offset: no change
    assert log.epochs == [EpochEntry(0, 0)]
    log.assign_epoch(1, 5)
    log.assign_epoch(2, 5)  # an epoch without records is replaced by the next one at the same offset
    assert log.epochs == [EpochEntry(0, 0), EpochEntry(2, 5)]
    log.assign_epoch(1, 3)  # a lower epoch/offset truncates the conflicting entries
    assert log.epochs == [EpochEntry(0, 0), EpochEntry(1, 3)]


def test_end_offset_for_epoch_answers_like_offset_for_leader_epoch():
    log = PartitionLog()
    log.assign_epoch(0, 0)
    append(log, 0, 'a', 'b', 'c')
    log.assign_epoch(2, 3)
    append(log, 2, 'd', 'e')
    log.assign_epoch(5, 5)
    append(log, 5, 'f')
    assert log.end_offset_for_epoch(0) == (0, 3)
    assert log.end_offset_for_epoch(1) == (0, 3)  # unknown, between: largest below, next start
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(4) == (2, 5)
    assert log.end_offset_for_epoch(5) == (5, 6)  # current epoch: the log end offset
    assert log.end_offset_for_epoch(6) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert log.epoch_for_offset(4) == 2
    log.advance_log_start(4)
    assert log.epochs == [EpochEntry(2, 4), EpochEntry(5, 5)]
    assert log.end_offset_for_epoch(1) == (1, 4)  # below every known epoch: the first start


def test_append_of_a_newer_epoch_batch_adds_a_cache_entry_on_followers():
    follower = PartitionLog()
    leader = PartitionLog()
    leader.assign_epoch(0, 0)
    append(leader, 0, 'a')
    leader.assign_epoch(4, 1)
    append(leader, 4, 'b')
    for batch, header in leader.batches_from(0):
        follower.append(batch, header)
    assert follower.epochs == [EpochEntry(0, 0), EpochEntry(4, 1)]


# -- log: truncation ----------------------------------------------------------------------------------


def test_truncate_to_drops_whole_batches_and_clamps_epochs_and_high_watermark():
    log = PartitionLog()
    log.assign_epoch(0, 0)
    append(log, 0, 'a', 'b')
    log.assign_epoch(1, 2)
    append(log, 1, 'c', 'd', 'e')
    log.truncate_to(3)  # inside the batch 2-4: the whole batch goes
    assert (log.log_end_offset, log.high_watermark) == (2, 2)
    assert log.epochs == [EpochEntry(0, 0)]
    assert offsets(log) == [(0, 0, b'a'), (1, 0, b'b')]
    assert append(log, 0, 'x') == 2


def test_truncate_by_epoch_removes_a_divergent_suffix():
    leader, follower = PartitionLog(), PartitionLog()
    for log in (leader, follower):
        log.assign_epoch(0, 0)
        append(log, 0, 'a', 'b')
    follower.assign_epoch(1, 2)
    append(follower, 1, 'zombie-1', 'zombie-2')  # written by an old leader at epoch 1
    leader.assign_epoch(2, 2)  # the new leader never saw epoch 1
    append(leader, 2, 'c')
    truncate_by_epoch(follower, leader)
    assert offsets(follower) == [(0, 0, b'a'), (1, 0, b'b')]
    assert follower.epochs == [EpochEntry(0, 0)]


def test_truncate_by_epoch_keeps_a_prefix_of_the_same_epoch():
    leader, follower = PartitionLog(), PartitionLog()
    leader.assign_epoch(0, 0)
    append(leader, 0, 'a', 'b')
    for batch, header in leader.batches_from(0):
        follower.append(batch, header)
    append(follower, 0, 'only-on-follower')
    leader.assign_epoch(1, 2)  # unclean: the leader's epoch 0 ends at 2
    append(leader, 1, 'c')
    truncate_by_epoch(follower, leader)
    assert follower.log_end_offset == 2


def test_the_broker_truncates_a_follower_to_the_cache_divergence_point() -> None:
    leader, follower = PartitionLog(), PartitionLog()
    for log in (leader, follower):
        log.assign_epoch(0, 0)
        append(log, 0, 'a', 'b')
        append(log, 0, 'c')
    follower.assign_epoch(1, 3)
    append(follower, 1, 'zombie')  # offset 3, at epoch 1, which the new leader never had
    leader.assign_epoch(2, 2)  # unclean: the new leader's epoch 0 ends at 2
    append(leader, 2, 'x')
    leader_epoch, leader_end = leader.end_offset_for_epoch(follower.latest_epoch())
    assert (leader_epoch, leader_end) == (0, 2)
    point = follower.epoch_cache.divergence_point(follower.log_end_offset, leader_epoch, leader_end)
    truncate_by_epoch(follower, leader)
    assert point == follower.log_end_offset == 2
    assert offsets(follower) == [(0, 0, b'a'), (1, 0, b'b')]


# -- log: idempotent producers --------------------------------------------------------------------


def test_sequence_checks_duplicates_gaps_and_epochs():
    log = PartitionLog()
    log.assign_epoch(0, 0)
    first = build_batch(values('a', 'b'), producer_id=7, producer_epoch=0, base_sequence=0)
    assert log.check_sequence(parse_header(first)) is None
    append(log, 0, 'a', 'b', producer=(7, 0, 0))
    append(log, 0, 'c', producer=(7, 0, 2))
    assert log.check_sequence(parse_header(first)) == 0  # duplicate: the original offset
    again = build_batch(values('c'), producer_id=7, producer_epoch=0, base_sequence=2)
    assert log.check_sequence(parse_header(again)) == 2
    gap = build_batch(values('e'), producer_id=7, producer_epoch=0, base_sequence=5)
    with pytest.raises(InvalidBatch) as exc:
        log.check_sequence(parse_header(gap))
    assert (exc.value.error_code, str(exc.value)) == (OUT_OF_ORDER_SEQUENCE_NUMBER,
                                                      'expected sequence 3, got 5')
    old = build_batch(values('x'), producer_id=7, producer_epoch=0, base_sequence=3)
    bumped = build_batch(values('x'), producer_id=7, producer_epoch=1, base_sequence=3)
    with pytest.raises(InvalidBatch) as exc:
        log.check_sequence(parse_header(bumped))
    assert exc.value.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    append(log, 0, 'y', producer=(7, 1, 0))
    with pytest.raises(InvalidBatch) as exc:
        log.check_sequence(parse_header(old))
    assert exc.value.error_code == INVALID_PRODUCER_EPOCH


def test_truncation_rebuilds_producer_state():
    log = PartitionLog()
    log.assign_epoch(0, 0)
    append(log, 0, 'a', producer=(9, 0, 0))
    append(log, 0, 'b', producer=(9, 0, 1))
    log.truncate_to(1)
    retry = build_batch(values('b'), producer_id=9, producer_epoch=0, base_sequence=1)
    assert log.check_sequence(parse_header(retry)) is None  # no longer a duplicate: it was truncated


# -- log: time index and log start -----------------------------------------------------------------


def test_offset_for_timestamp_uses_the_running_max_and_decodes_one_batch():
    log = PartitionLog()
    append(log, 0, 'a', 'b', timestamps=[100, 300])
    append(log, 0, 'c', 'd', timestamps=[200, 250])
    append(log, 0, 'e', timestamps=[400])
    assert log.offset_for_timestamp(50) == TimestampAndOffset(100, 0, 0)
    assert log.offset_for_timestamp(150) == TimestampAndOffset(300, 1, 0)
    assert log.offset_for_timestamp(350) == TimestampAndOffset(400, 4, 0)
    assert log.offset_for_timestamp(401) is None
    assert log.max_timestamp_offset() == TimestampAndOffset(400, 4, 0)


def test_advance_log_start_hides_records_below_it():
    log = PartitionLog()
    append(log, 0, 'a', 'b', timestamps=[10, 20])
    append(log, 0, 'c', timestamps=[30])
    log.advance_log_start(1)
    assert (log.log_start_offset, [r.offset for r in log.records()]) == (1, [1, 2])
    assert log.offset_for_timestamp(5) == TimestampAndOffset(20, 1, 0)
    log.advance_log_start(2)
    assert log.batch_count() == 1
    log.truncate_fully_and_start_at(7)
    assert (log.log_start_offset, log.log_end_offset, log.records()) == (7, 7, [])
