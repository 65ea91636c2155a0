"""kafka_kip.state_machine: transitions as data, and the machines built on it (no network)."""
from __future__ import annotations

import enum

import pytest

from kafka_kip.mirror.state import TRANSITIONS as COPY_TRANSITIONS
from kafka_kip.mirror.state import CopyState
from kafka_kip.state_machine import InvalidTransition, Transitions
from kafka_kip_reference.broker.groups import TRANSITIONS as GROUP_TRANSITIONS
from kafka_kip_reference.broker.groups import Group, GroupState
from kafka_kip_reference.broker.transactions import TRANSITIONS as TXN_TRANSITIONS
from kafka_kip_reference.broker.transactions import TxnState


class Light(enum.Enum):
    RED = 'red'
    GREEN = 'green'
    OFF = 'off'


class Other(enum.Enum):
    X = 'x'


LIGHT = Transitions({Light.RED: {Light.GREEN, Light.OFF}, Light.GREEN: {Light.RED, Light.OFF}, Light.OFF: ()})


def test_check_returns_the_allowed_state_and_refuses_the_others() -> None:
    assert LIGHT.check('light 1', Light.RED, Light.GREEN) is Light.GREEN
    assert (LIGHT.allows(Light.GREEN, Light.OFF), LIGHT.allows(Light.OFF, Light.RED)) == (True, False)
    assert LIGHT[Light.RED] == frozenset({Light.GREEN, Light.OFF})
    with pytest.raises(InvalidTransition) as raised:
        LIGHT.check('light 1', Light.OFF, Light.RED)
    assert str(raised.value) == 'light 1: no transition from off to red'
    assert (raised.value.subject, raised.value.current, raised.value.wanted) == ('light 1', Light.OFF, Light.RED)


def test_a_table_needs_a_row_for_every_state_and_only_its_own_states() -> None:
    with pytest.raises(ValueError, match=r"missing rows: \['OFF'\], others: \[\]"):
        Transitions({Light.RED: {Light.GREEN}, Light.GREEN: {Light.RED}})
    with pytest.raises(ValueError, match=r"missing rows: \[\], others: \['Other.X'\]"):
        Transitions({Light.RED: {Other.X}, Light.GREEN: (), Light.OFF: ()})


def _forwards(previous: dict[enum.Enum, set[enum.Enum]]) -> dict[enum.Enum, frozenset[enum.Enum]]:
    """Apache Kafka declares each state's valid previous states; the tables read them forwards."""
    return {state: frozenset(s for s, before in previous.items() if state in before) for state in previous}


def test_the_group_states_move_as_kafkas_classic_group_states() -> None:
    e, p, c, s, d = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                     GroupState.STABLE, GroupState.DEAD)
    kafka_previous = {d: {s, p, c, e, d}, c: {p}, s: {c}, p: {s, c, e}, e: {p}}  # ClassicGroupState
    assert {state: GROUP_TRANSITIONS[state] for state in GroupState} == _forwards(kafka_previous)


def test_the_transaction_states_move_as_kafkas_transaction_states() -> None:
    e, o, pc, pa, cc, ca = (TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                            TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    # TransactionState's previous states; PrepareAbort also from Empty and Complete* (transaction.version 2: an
    # EndTxn abort with no transaction ongoing bumps the epoch)
    kafka_previous = {e: {e, cc, ca}, o: {o, e, cc, ca}, pc: {o}, pa: {o, e, cc, ca}, cc: {pc}, ca: {pa}}
    assert {state: TXN_TRANSITIONS[state] for state in TxnState} == _forwards(kafka_previous)


def test_a_group_changes_state_only_through_its_transitions() -> None:
    group = Group('g', cluster=None, initial_rebalance_delay_ms=0)  # type: ignore[arg-type]  # no timers here
    assert group.state is GroupState.EMPTY
    with pytest.raises(AttributeError):
        group.state = GroupState.STABLE  # type: ignore[misc]
    with pytest.raises(InvalidTransition) as raised:
        group._go(GroupState.STABLE)  # a group is stable only after a rebalance completed
    assert str(raised.value) == "group 'g': no transition from Empty to Stable"
    assert group.state is GroupState.EMPTY
    group.close(dead=True)
    assert group.state is GroupState.DEAD
    with pytest.raises(InvalidTransition, match="group 'g': no transition from Dead to PreparingRebalance"):
        group._go(GroupState.PREPARING_REBALANCE)


def test_the_mirror_copy_states_use_the_same_helper() -> None:
    assert isinstance(COPY_TRANSITIONS, Transitions)
    assert COPY_TRANSITIONS[CopyState.DONE] == frozenset() and COPY_TRANSITIONS[CopyState.STOPPED] == frozenset()
