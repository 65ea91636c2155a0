"""Every setting declared once (kafka_kip.settings): the flags, properties keys, Spark options and docs
tables all come from one table per component; one properties grammar, one set of coercers, one
Java-client-settings translator, and the policies' enums with every spelling in use. No broker needed."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from kafka_kip.consumer import KafkaConsumer
from kafka_kip.mirror.cli import add_arguments as add_mirror_arguments
from kafka_kip.mirror.config import (
    COPIER_SETTINGS,
    FLOW_SETTINGS,
    MIRROR_SETTINGS,
    PROCESS_SETTINGS,
    settings,
)
from kafka_kip.policies import IsolationLevel, OffsetMode, TruncationPolicy
from kafka_kip.settings import SettingError, parse_properties, to_bool, to_duration_ms, to_int
from kafka_kip.settings.docs import DOCS, render, tables
from kafka_kip.settings.java_clients import JAVA_ONLY, client_configs
from kafka_kip.spark.cli import add_arguments as add_spark_mirror_arguments
from kafka_kip.spark.client_options import OptionError
from kafka_kip.spark.options import ReadOptions, WriteOptions
from kafka_kip.spark.settings import MIRROR_OPTIONS, SINK_OPTIONS, SOURCE_OPTIONS

ROOT = Path(__file__).resolve().parents[2]


def flags_of(add_arguments) -> set[str]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return {flag for action in parser._actions for flag in action.option_strings} - {'-h', '--help'}


# -- the tables are the only declarations -------------------------------------------------------------


def test_the_mirror_flags_and_properties_keys_are_the_tables():
    assert flags_of(add_mirror_arguments) == set(MIRROR_SETTINGS.by_flag) == {
        '--source', '--target', '--topics', '--group-sync', '--offset-mode', '--on-truncation', '--isolation-level',
        '--topic-prefix', '--shutdown-timeout-ms', '--metrics-port', '--stop-at-end', '--json', '--config'}
    keys = {*FLOW_SETTINGS, *COPIER_SETTINGS, *PROCESS_SETTINGS, 'source.bootstrap.servers', 'target.bootstrap.servers'}
    assert keys == set(MIRROR_SETTINGS.by_key)
    assert len(MIRROR_SETTINGS.by_key) == 16


def test_every_mirror_key_is_read_from_a_file_typed_and_flags_win(tmp_path: Path):
    values = {'topics': 'orders|audit', 'groups': 'app.*', 'offset.mode': 'off', 'on.truncation': 'fail',
              'isolation.level': 'read_uncommitted', 'topic.prefix': 'dr.', 'offset.map.topic': 'map',
              'sync.topic.configs': 'FALSE', 'group.sync.interval.ms': '2500', 'refresh.topics.interval.ms': ' 7 ',
              'shutdown.timeout.ms': '900', 'max.alignment.records': '5'}
    path = tmp_path / 'mm.properties'
    path.write_text('source.bootstrap.servers=a:1\ntarget.bootstrap.servers=b:2\n'
                    + ''.join(f'{key}={value}\n' for key, value in values.items()))
    args = argparse.ArgumentParser()
    add_mirror_arguments(args)
    assert settings(args.parse_args(['--config', str(path), '--offset-mode', 'checked'])) == {
        'source': 'a:1', 'target': 'b:2', 'topics': 'orders|audit', 'groups': 'app.*', 'offset_mode': 'checked',
        'on_truncation': 'fail', 'isolation_level': 'read_uncommitted', 'target_prefix': 'dr.',
        'offset_map_topic': 'map', 'sync_topic_configs': False, 'group_sync_interval_ms': 2500,
        'topic_refresh_interval_ms': 7, 'shutdown_timeout_ms': 900, 'copier_configs': {'max_alignment_records': 5},
        'source_configs': {}, 'target_configs': {}}


def test_bad_values_in_a_file_are_refused_naming_the_key_the_value_and_what_is_accepted(tmp_path: Path):
    path = tmp_path / 'mm.properties'
    args = argparse.ArgumentParser()
    add_mirror_arguments(args)
    for line, message in [
        ('isolation.level=committed', "isolation.level must be read_committed or read_uncommitted, got 'committed'"),
        ('offset.mode=exact', "offset.mode must be one of auto, broker, checked, translated, off, got 'exact'"),
        ('shutdown.timeout.ms=-1', "shutdown.timeout.ms must be an integer >= 0, got '-1'"),
        ('source.ssl.truststore.location=/x.jks', 'source.ssl.truststore.location is a Java client setting: use '
                                                  'source.ssl.cafile (the CA certificates as a PEM file)'),
        ('target.colour=blue', "target.colour is not a kafka-python client setting that can be passed on (it "
                               "becomes 'colour'"),
        ('source.sasl.jaas.config=com.example.Login required;', 'source.sasl.jaas.config: only the PlainLoginModule '
                                                                'and ScramLoginModule login modules can be mapped '
                                                                '(onto source.sasl.plain.username'),
    ]:
        path.write_text(f'source.bootstrap.servers=a:1\ntarget.bootstrap.servers=b:2\n{line}\n')
        with pytest.raises(ValueError) as raised:
            settings(args.parse_args(['--config', str(path)]))
        assert str(raised.value).startswith(f'{path}: {message}')


def test_the_spark_mirror_flags_and_options_are_its_table():
    assert flags_of(add_spark_mirror_arguments) == set(MIRROR_OPTIONS.by_flag)
    options = {s.option for s in MIRROR_OPTIONS if s.option}
    assert options == {'kafka.bootstrap.servers', 'target.bootstrap.servers', 'subscribePattern', 'startingOffsets',
                       'onTruncation', 'offsetMode', 'topicPrefix', 'offsetMapTopic', 'maxOffsetsPerTrigger'}
    # every option of the kafka-kip-mirror source that is not a read option is one of its own
    assert {o for o in options if o.lower() not in SOURCE_OPTIONS.by_option} == {
        'target.bootstrap.servers', 'offsetMode', 'topicPrefix', 'offsetMapTopic'}
    # settings it shares with kafka-kip mirror keep the mirror's doc and default
    for name in ('groups', 'group_sync_interval_ms', 'offset_map_topic', 'metrics_port', 'metrics_host'):
        assert (MIRROR_OPTIONS[name].doc, MIRROR_OPTIONS[name].default) == (
            MIRROR_SETTINGS[name].doc, MIRROR_SETTINGS[name].default)


@pytest.mark.parametrize(('table', 'parse', 'role'), [
    (SOURCE_OPTIONS, lambda options: ReadOptions.parse(options), 'kafka-kip source'),
    (SINK_OPTIONS, lambda options: WriteOptions.parse(options), 'kafka-kip sink'),
])
def test_the_spark_options_known_are_the_tables(table, parse, role):
    with pytest.raises(OptionError) as raised:
        parse({'kafka.bootstrap.servers': 'h:1', 'colour': 'blue'})
    listed = str(raised.value).split('known options: ')[1].split(', ')
    spark_own = {'path', 'checkpointLocation', 'queryName'} if table is SINK_OPTIONS else set()
    assert str(raised.value).startswith(f"unknown option 'colour' for the {role}")
    assert set(listed) == {s.option for s in table} | spark_own | {'kafka.*'}


def test_the_docs_tables_are_generated_from_the_tables():
    by_component = tables()
    found = set()
    for name in DOCS:
        text = (ROOT / name).read_text(encoding='utf-8')
        assert render(text, by_component) == text, f'{name} is stale: run python -m kafka_kip.settings.docs'
        found |= {c for c in by_component if f'<!-- settings:{c} -->' in text}
    assert found == set(by_component) == {'mirror', 'spark-source', 'spark-sink', 'spark-mirror'}
    # each row names what the table declares, nothing else
    mirror_rows = MIRROR_SETTINGS.markdown().splitlines()[2:]
    assert [row.split(' | ')[0].strip('| `') or row.split(' | ')[1].strip('`') for row in mirror_rows] == [
        s.key or s.flag for s in MIRROR_SETTINGS]
    with pytest.raises(ValueError, match=r"<!-- settings:colour -->: no such settings table; known: \['mirror'"):
        render('<!-- settings:colour -->\n<!-- /settings -->', by_component)


# -- one properties grammar, one set of coercers, one translator -----------------------------------------


def test_one_properties_grammar_for_the_mirror_and_the_broker():
    text = ('# c\n! c\n\nsource.bootstrap.servers = a:9092\ntarget.bootstrap.servers:b:9092\ntopics=orders\\\n'
            '    |audit\nlog.dirs=/tmp/a=b\nnum.partitions 3\ntrailing=a\\\\\n')
    assert parse_properties(text) == parse_properties(text.splitlines(keepends=True)) == {
        'source.bootstrap.servers': 'a:9092', 'target.bootstrap.servers': 'b:9092', 'topics': 'orders|audit',
        'log.dirs': '/tmp/a=b', 'num.partitions': '3', 'trailing': 'a\\\\'}
    with pytest.raises(ValueError, match=r"^line 3: expected key=value, got 'just-a-key'$"):
        parse_properties('a=1\n# comment\njust-a-key\n')


def test_the_coercers_name_the_setting_the_value_and_what_is_accepted():
    assert [to_bool(v, 'x') for v in ('true', ' FALSE ', True)] == [True, False, True]
    assert [to_int(v, 'x') for v in ('5', ' -3 ', 7)] == [5, -3, 7]
    assert [to_duration_ms(v, 'x') for v in ('250', '30s', '2 min', '1h')] == [250, 30_000, 120_000, 3_600_000]
    for call, message in [
        (lambda: to_bool('yes', 'f: sync.topic.configs'), "f: sync.topic.configs must be true or false, got 'yes'"),
        (lambda: to_int('1.5', '--metrics-port'), "--metrics-port must be an integer, got '1.5'"),
        (lambda: to_int('0', 'option minPartitions', 1), "option minPartitions must be a positive integer, got '0'"),
        (lambda: to_int('-1', 'k', 0), "k must be an integer >= 0, got '-1'"),
        (lambda: to_duration_ms('soon', 'option d'), "option d must be a duration like 15m, 30s or 500ms (a number "
                                                     "alone is ms), got 'soon'"),
    ]:
        with pytest.raises(SettingError) as raised:
            call()
        assert str(raised.value) == message


def test_one_translator_refuses_every_java_only_setting_for_the_mirror_and_spark():
    for name in JAVA_ONLY:
        key = name.replace('_', '.')
        with pytest.raises(SettingError, match=f'^mm.properties: source.{key} is a Java client setting: '):
            client_configs({f'source.{key}': 'x'}, 'source.', KafkaConsumer.DEFAULT_CONFIG, label='mm.properties: ')
        with pytest.raises(OptionError, match=f'^option kafka.{key} is a Java client setting: '):
            ReadOptions.parse({'kafka.bootstrap.servers': 'h:1', 'subscribe': 't', f'kafka.{key}': 'x'})
    assert client_configs({'source.ssl.check.hostname': 'false', 'source.request.timeout.ms': '20000',
                           'source.security.protocol': 'SSL'}, 'source.', KafkaConsumer.DEFAULT_CONFIG) == {
        'ssl_check_hostname': False, 'request_timeout_ms': 20000, 'security_protocol': 'SSL'}


# -- the policies' enums ------------------------------------------------------------------------------


@pytest.mark.parametrize(('enum', 'spellings'), [
    (TruncationPolicy, {'stop': 'stop', 'fail': 'stop', 'none': 'stop', 'closest': 'closest', ' Fail ': 'stop',
                        'CLOSEST': 'closest'}),
    (OffsetMode, {'auto': 'auto', 'broker': 'broker', 'checked': 'checked', 'translated': 'translated',
                  'off': 'translated', 'OFF': 'translated', 'Broker': 'broker'}),
    (IsolationLevel, {'read_committed': 'read_committed', 'READ_COMMITTED': 'read_committed', '1': 'read_committed',
                      1: 'read_committed', 'read_uncommitted': 'read_uncommitted', 'READ_UNCOMMITTED':
                      'read_uncommitted', '0': 'read_uncommitted', 0: 'read_uncommitted'}),
])
def test_every_spelling_in_use_parses_to_its_member(enum, spellings):
    parsed = {spelling: enum.parse(spelling) for spelling in spellings}
    assert parsed == spellings
    assert all(type(member) is enum for member in parsed.values())
    word = enum.parse(next(iter(spellings)))
    assert (f'{word}', repr(word), json.dumps([word])) == (word.value, repr(word.value), f'["{word.value}"]')


def test_a_bad_spelling_is_refused_naming_the_setting_and_the_accepted_words():
    with pytest.raises(ValueError) as raised:
        OffsetMode.parse('exact')
    assert str(raised.value) == "offset_mode must be one of 'auto', 'broker', 'checked', 'translated', got 'exact'"
    with pytest.raises(ValueError) as raised:
        IsolationLevel.parse('committed', 'option isolation')
    assert str(raised.value) == ("option isolation must be one of 'read_committed', 'read_uncommitted', got "
                                 "'committed'")
    with pytest.raises(ValueError) as raised:
        TruncationPolicy.parse(None)
    assert str(raised.value) == "on_truncation must be one of ('stop', 'fail', 'none', 'closest'), got None"
    assert (IsolationLevel.READ_COMMITTED.wire, IsolationLevel.READ_UNCOMMITTED.wire) == (1, 0)
