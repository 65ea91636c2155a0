"""KIP-320 reset policies as pure rules: the accepted values and the table (no broker needed)."""
from __future__ import annotations

from collections import namedtuple

import pytest
from kafka.errors import KafkaConfigurationError
from kafka.protocol.consumer import OffsetResetStrategy
from kafka.structs import OffsetAndMetadata, TopicPartition

from kafka_kip import KafkaConsumer
from kafka_kip.consumer.reset import ResetCause, is_timestamp, parse_policy, reset_strategy
from kafka_kip.consumer.subscription import PartitionState, SubscriptionState
from kafka_kip_reference.fixtures.conditions import Listener

pytestmark = pytest.mark.kip320

EARLIEST, LATEST = OffsetResetStrategy.EARLIEST, OffsetResetStrategy.LATEST
INIT, TOO_LOW, UNKNOWN = ResetCause.INITIALIZATION, ResetCause.OUT_OF_RANGE_TOO_LOW, ResetCause.UNKNOWN_TRUNCATION
Record = namedtuple('Record', 'offset timestamp')


@pytest.mark.parametrize(('value', 'policy'), [
    ('earliest', 'earliest'), ('latest', 'latest'), ('closest', 'closest'), ('none', 'none'),
    ('CLOSEST', 'closest'), ('smallest', 'earliest'), ('largest', 'latest'),
    # the other spellings of the stop truncation policy (kafka_kip.policies): the mirror's and Spark's
    ('stop', 'none'), ('fail', 'none'),
])
def test_accepted_policies(value: str, policy: str) -> None:
    assert parse_policy(value) == policy


@pytest.mark.parametrize('value', ['nearest', '', None, 5, 'earliest '])
def test_a_bad_policy_is_refused_naming_it_and_the_accepted_ones(value: object) -> None:
    with pytest.raises(KafkaConfigurationError) as raised:
        parse_policy(value)
    assert str(raised.value) == (f"KafkaConfigurationError: auto_offset_reset={value!r} is not a reset policy; "
                                 "accepted values: 'earliest', 'latest', 'closest', 'none'")


def test_the_consumer_refuses_a_bad_policy_before_connecting() -> None:
    with Listener() as broker:
        with pytest.raises(KafkaConfigurationError, match="auto_offset_reset='nearest' is not a reset policy"):
            KafkaConsumer(bootstrap_servers=broker.address, auto_offset_reset='nearest')
        assert broker.connections() == 0   # no bootstrap attempt


# The proposal's table itself is tested cell by cell on real situations: tests/consumer/test_kip320.py::test_reset_table.


@pytest.mark.parametrize(('timestamp', 'strategy'), [(-1, LATEST), (0, EARLIEST), (1, 1)])
def test_closest_without_a_usable_timestamp(timestamp: int, strategy: int) -> None:
    # No timestamp: the log end offset. Timestamp 0: every record qualifies, i.e. the log start offset.
    assert reset_strategy('closest', UNKNOWN, timestamp) == strategy


def test_none_has_no_reset_strategy() -> None:
    with pytest.raises(ValueError, match="policy 'none' does not reset offsets"):
        reset_strategy('none', INIT)


def test_timestamps_are_told_from_the_special_strategies() -> None:
    assert [is_timestamp(s) for s in (EARLIEST, LATEST, OffsetResetStrategy.NONE, 1, 1_700_000_000_000)] == \
        [False, False, False, True, True]


def test_subscription_state_picks_the_reset_by_cause() -> None:
    tp = TopicPartition('t', 0)
    subscription = SubscriptionState('closest')
    subscription.assign_from_user([tp])
    state = subscription.assignment[tp]
    assert isinstance(state, PartitionState)
    assert subscription.has_default_offset_reset_policy()
    subscription.reset_missing_positions()
    assert state.reset_strategy == EARLIEST                                  # initialization

    subscription.seek(tp, 10)
    state.remember_consumed([Record(8, 1_000), Record(9, 2_000)])
    state.reset_cause = TOO_LOW
    subscription.request_offset_reset(tp)
    assert state.reset_strategy == EARLIEST and state.reset_cause is None    # out of range, too low

    subscription.seek(tp, OffsetAndMetadata(10, '', 3))
    state.remember_consumed([Record(8, 1_000), Record(9, 2_000)])
    state.request_position_validation()                                      # as kafka-python does ...
    subscription.request_offset_reset(tp)                                    # ... for an undefined epoch
    assert state.reset_strategy == 2_000                                     # unknown truncation


@pytest.mark.parametrize(('records', 'position', 'timestamp'), [
    ([Record(9, 900)], 10, 900),                                    # poll(): the last record
    ([Record(5, 500), Record(6, 600), Record(7, 700)], 7, 600),     # iterator: record below the position
    ([Record(5, 500), Record(6, 600), Record(7, 700)], 5, -1),      # nothing consumed below it
])
def test_consumed_timestamp_is_that_of_the_last_record_below_the_position(
        records: list, position: int, timestamp: int) -> None:
    state = PartitionState()
    state.seek(5)
    state.remember_consumed(records)
    state.position = OffsetAndMetadata(position, '', 0)
    assert state.consumed_timestamp() == timestamp


def test_a_seek_forgets_consumed_records_but_keeps_a_given_timestamp() -> None:
    state = PartitionState()
    state.seek(5)
    state.remember_consumed([Record(9, 900)])
    state.seek(3)
    assert state.consumed_timestamp() == -1
    state.seek_with_epochs(OffsetAndMetadata(4, '', 2), timestamp=777)
    assert state.consumed_timestamp() == 777
    assert (state.held_for_leader_epoch, state.is_fetchable()) == (2, False)   # held until metadata caught up


def test_continuing_after_truncation_ends_a_validation_requested_meanwhile() -> None:
    """A leader change seen while a truncation waits to be raised marks the position for validation; once the
    application was told, the position (now without an epoch) is fetchable again, not held forever."""
    state = PartitionState()
    state.seek(OffsetAndMetadata(10, '', 0))
    state.truncation_pending = True
    assert state.maybe_validate_position(3)
    state.continue_after_truncation()
    assert (state.position, state.awaiting_validation, state.is_fetchable()) == \
        (OffsetAndMetadata(10, '', -1), False, True)
