"""One vocabulary (kafka_kip.policies) across the consumer's reset policy, the mirror and Spark: every old
spelling is still accepted by each of them, and they agree on what it means. No broker needed."""
from __future__ import annotations

import argparse

import pytest

from kafka_kip.consumer.reset import parse_policy
from kafka_kip.mirror import Mirror
from kafka_kip.mirror.cli import add_arguments as add_mirror_arguments
from kafka_kip.mirror.config import settings
from kafka_kip.policies import (
    CLOSEST,
    STOP,
    TRUNCATION_SPELLINGS,
    consumer_reset_policy,
    parse_offset_mode,
    parse_truncation_policy,
)
from kafka_kip.producer import OFFSET_MODES as PRODUCER_OFFSET_MODES
from kafka_kip.spark.cli import add_arguments as add_spark_arguments
from kafka_kip.spark.options import ReadOptions

SPELLINGS = [('stop', STOP), ('fail', STOP), ('none', STOP), ('closest', CLOSEST)]


def parsed(add_arguments, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize(('spelling', 'policy'), SPELLINGS)
def test_every_spelling_names_the_same_policy_everywhere(spelling: str, policy: str) -> None:
    assert parse_truncation_policy(spelling) == policy
    # kafka-kip mirror --on-truncation, through its settings to the Mirror
    args = parsed(add_mirror_arguments, '--source', 'a:1', '--target', 'b:2', '--on-truncation', spelling)
    assert settings(args)['on_truncation'] == spelling
    with Mirror('127.0.0.1:1', '127.0.0.1:2', on_truncation=spelling) as mirror:
        assert mirror.on_truncation == policy
    # Spark: kafka-kip spark-mirror --on-truncation and the onTruncation option
    args = parsed(add_spark_arguments, '--source', 'a:1', '--target', 'b:2', '--topics', 't', '--checkpoint', 'c',
                  '--on-truncation', spelling)
    options = ReadOptions.parse({'kafka.bootstrap.servers': 'a:1', 'subscribe': 't', 'ontruncation': args.on_truncation})
    assert options.on_truncation == policy
    # the consumer's auto_offset_reset: 'none' raises (stop), 'closest' continues
    assert parse_policy(spelling) == consumer_reset_policy(policy) == ('none' if policy == STOP else 'closest')


def test_the_spellings_and_a_bad_policy_named_in_the_error() -> None:
    assert TRUNCATION_SPELLINGS == {'stop': 'stop', 'fail': 'stop', 'none': 'stop', 'closest': 'closest'}
    with pytest.raises(ValueError) as raised:
        parse_truncation_policy('rewind', 'option x')
    assert str(raised.value) == "option x must be one of ('stop', 'fail', 'none', 'closest'), got 'rewind'"
    with pytest.raises(SystemExit):  # argparse refuses it, listing the choices
        parsed(add_spark_arguments, '--source', 'a', '--target', 'b', '--topics', 't', '--checkpoint', 'c',
               '--on-truncation', 'rewind')


def test_offset_modes_old_spelling_and_the_producer_subset() -> None:
    assert [parse_offset_mode(m) for m in ('auto', 'broker', 'checked', 'translated', 'off')] == [
        'auto', 'broker', 'checked', 'translated', 'translated']
    assert PRODUCER_OFFSET_MODES == ('broker', 'checked')
    with pytest.raises(ValueError) as raised:
        parse_offset_mode('off', PRODUCER_OFFSET_MODES)
    assert str(raised.value) == "offset_mode must be one of 'broker', 'checked', got 'off'"
