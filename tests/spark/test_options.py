"""Spark's Kafka options on the kafka-kip data source, without Spark: parsing, task splitting, batch limits.

These parts import neither pyspark nor a JVM; the Spark runs of the same options are in tests/spark/test_job_options.py.
"""
from __future__ import annotations

import logging

import pytest

from kafka_kip import TopicPartition
from kafka_kip.consumer import KafkaConsumer
from kafka_kip.policies import CLOSEST, STOP
from kafka_kip.spark.client_options import OptionError, client_configs
from kafka_kip.spark.limits import TriggerPacer, rate_limit
from kafka_kip.spark.options import (
    NO_MATCH_ERROR,
    NO_MATCH_LATEST,
    OffsetsSpec,
    ReadOptions,
    TimestampSpec,
    WriteOptions,
)
from kafka_kip.spark.positions import Position
from kafka_kip.spark.ranges import Range, batch_tasks, divide

A, B, C = TopicPartition('t', 0), TopicPartition('t', 1), TopicPartition('u', 0)
BASE = {'kafka.bootstrap.servers': 'h:1', 'subscribe': 't'}


def parse(**options: str) -> ReadOptions:
    """ReadOptions from Spark-style option names (Spark lower-cases the keys)."""
    return ReadOptions.parse({k.lower(): v for k, v in {**BASE, **options}.items()})


# -- minPartitions / maxRecordsPerPartition: Spark's KafkaOffsetRangeCalculator arithmetic ----------------


def spans(ranges: list[Range]) -> list[tuple[str, int, int, int]]:
    return [(f'{r.tp.topic}-{r.tp.partition}', r.start.offset, r.until, r.start.leader_epoch) for r in ranges]


def test_min_partitions_splits_large_ranges_in_proportion_and_keeps_small_ones_whole():
    ranges = [Range(A, Position(0, 5, 7, 'id'), 100), Range(B, Position(0, 2), 20), Range(C, Position(9, 1), 9)]
    # 120 offsets for 4 tasks: t-1's share rounds to 1 (whole), t-0 takes the other 3; u-0 is empty (dropped).
    assert spans(divide(ranges, 4, None)) == [('t-0', 0, 33, 5), ('t-0', 33, 66, -1), ('t-0', 66, 100, -1),
                                              ('t-1', 0, 20, 2)]
    pieces = divide(ranges, 4, None)
    assert {(p.start.partition_epoch, p.start.topic_id) for p in pieces[:3]} == {(7, 'id')}
    assert spans(divide(ranges, 2, None)) == [('t-0', 0, 100, 5), ('t-1', 0, 20, 2)]  # enough partitions already


def test_max_records_per_partition_cuts_near_equal_pieces_then_min_partitions_applies():
    assert spans(divide([Range(A, Position(0), 10)], None, 4)) == [('t-0', 0, 3, -1), ('t-0', 3, 6, -1),
                                                                    ('t-0', 6, 10, -1)]
    assert spans(divide([Range(A, Position(1, 0), 9)], None, 4)) == [('t-0', 1, 5, 0), ('t-0', 5, 9, -1)]
    # 100 offsets, at most 50 per task -> 2 pieces; minPartitions=5 cuts each into 3 ("about" 5, as Spark).
    assert [(lo, hi) for _, lo, hi, _ in spans(divide([Range(A, Position(0), 100)], 5, 50))] == [
        (0, 16), (16, 33), (33, 50), (50, 66), (66, 83), (83, 100)]


def test_batch_queries_keep_a_task_per_partition_unless_a_split_applies():
    ranges = [Range(A, Position(0, 1), 10), Range(B, Position(5, 0), 5)]  # t-1 has nothing to read
    assert spans(batch_tasks(ranges, None, None)) == spans(batch_tasks(ranges, 2, 20)) == [
        ('t-0', 0, 10, 1), ('t-1', 5, 5, 0)]  # as Spark: no split, so the empty range is a task too
    assert spans(batch_tasks(ranges, 3, None)) == [('t-0', 0, 3, 1), ('t-0', 3, 6, -1), ('t-0', 6, 10, -1)]
    assert spans(batch_tasks(ranges, None, 5)) == [('t-0', 0, 5, 1), ('t-0', 5, 10, -1)]


# -- maxOffsetsPerTrigger / minOffsetsPerTrigger / maxTriggerDelay -------------------------------------


def test_max_offsets_per_trigger_shares_by_lag_and_starves_no_partition():
    start = {A: Position(0), B: Position(10), C: Position(5)}
    latest = {A: Position(100, 3), B: Position(20, 1), C: Position(6, 0)}
    capped = rate_limit(10, start, latest)
    # shares 10*100/111 = 9.0 (floor), 10*10/111 = 0.9 and 10*1/111 = 0.09 (each rounded up to 1)
    assert {tp: (p.offset, p.leader_epoch) for tp, p in capped.items()} == {A: (9, 3), B: (11, 1), C: (6, 0)}
    assert rate_limit(1000, start, latest) == latest


def test_min_offsets_per_trigger_waits_for_records_or_max_trigger_delay():
    now = [100.0]
    pacer = TriggerPacer(min_offsets=5, max_delay_ms=2000, clock=lambda: now[0])
    start = {A: Position(10)}
    assert pacer.admit(start, {A: Position(11)})  # a query's first trigger always runs
    now[0] += 1.0
    assert not pacer.admit(start, {A: Position(14)})  # 4 new offsets < 5, 1 s < 2 s
    assert pacer.admit(start, {A: Position(15), B: Position(0)})  # 5 new offsets
    now[0] += 1.999
    assert not pacer.admit(start, {A: Position(11)})
    now[0] += 0.001
    assert pacer.admit(start, {A: Position(11)})  # maxTriggerDelay passed: runs with 1 offset


# -- option parsing ------------------------------------------------------------------------------------


def test_spark_defaults():
    options = parse()
    assert (options.include_headers, options.on_truncation, options.fetch_attempts, options.fetch_retry_interval_ms,
            options.max_trigger_delay_ms, options.min_partitions, options.poll_timeout_ms) == (
        False, STOP, 3, 1000, 15 * 60_000, None, 120_000)
    assert options.executor_group_id() is None
    assert options.for_batch().starting == OffsetsSpec('startingOffsets', 'earliest')
    assert options.for_stream().starting == OffsetsSpec('startingOffsets', 'latest')


def test_timestamp_options_and_their_precedence(caplog):
    caplog.set_level(logging.WARNING, 'kafka_kip.spark.options')
    options = parse(startingTimestamp='1000', startingOffsets='earliest', startingOffsetsByTimestamp='{"t":{"0":5}}',
                    endingOffsetsByTimestamp='{"t": {"0": 2000, "1": 3000}}',
                    startingOffsetsByTimestampStrategy='LATEST')
    assert options.starting == TimestampSpec('startingTimestamp', 1000, None, NO_MATCH_LATEST)
    assert options.ending == TimestampSpec('endingOffsetsByTimestamp', None, {A: 2000, B: 3000}, NO_MATCH_LATEST)
    assert caplog.messages == ['option startingTimestamp takes precedence over startingOffsetsByTimestamp and '
                               'startingOffsets (as in Spark); they are ignored']
    assert parse(startingOffsetsByTimestamp='{"t":{"0":5}}').starting.no_match == NO_MATCH_ERROR
    with pytest.raises(OptionError, match='option endingTimestamp only applies to batch queries'):
        parse(endingTimestamp='5').for_stream()


@pytest.mark.parametrize('options, message', [
    ({'startingTimestamp': '-1'}, "option startingTimestamp: expected a timestamp in milliseconds since the epoch "
                                  "(an integer >= 0), got \"-1\""),
    ({'startingOffsetsByTimestamp': '{"t": {"0": "x"}}'}, 'option startingOffsetsByTimestamp t-0: expected a '
                                                          'timestamp'),
    ({'startingOffsetsByTimestampStrategy': 'earliest'}, 'option startingOffsetsByTimestampStrategy must be error '
                                                         "or latest, got 'earliest'"),
    ({'failOnDataLoss': 'no'}, "option failOnDataLoss must be true or false, got 'no'"),
    ({'failOnDataLoss': 'false', 'onTruncation': 'fail'}, 'options failOnDataLoss=false and onTruncation=fail '
                                                          'disagree'),
    ({'minOffsetsPerTrigger': '10', 'maxOffsetsPerTrigger': '5'}, 'option minOffsetsPerTrigger (10) is higher '
                                                                  'than maxOffsetsPerTrigger (5)'),
    ({'maxTriggerDelay': 'soon'}, "option maxTriggerDelay must be a duration like 15m, 30s or 500ms"),
    ({'minPartitions': '0'}, "option minPartitions must be a positive integer, got '0'"),
    ({'fetchOffset.numRetries': 'three'}, "option fetchOffset.numRetries must be a positive integer, got 'three'"),
    ({'fetchOffset.retryIntervalMs': '-5'}, "option fetchOffset.retryIntervalMs must be an integer >= 0, got '-5'"),
    ({'kafka.group.id': ' '}, 'option kafka.group.id must not be empty'),
    ({'kafka.ssl.truststore.location': '/x.jks'}, 'option kafka.ssl.truststore.location is a Java client setting: '
                                                  'use kafka.ssl.cafile (the CA certificates as a PEM file)'),
    ({'kafka.interceptor.classes': 'a.B'}, 'option kafka.interceptor.classes is a Java client setting: interceptors'),
    ({'kafka.sasl.jaas.config': 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;'},
     'option kafka.sasl.jaas.config: only the PlainLoginModule and ScramLoginModule login modules can be mapped'),
    ({'kafka.auto.offset.reset': 'earliest'}, 'use startingOffsets and failOnDataLoss'),
])
def test_bad_options_are_refused_naming_them(options, message):
    with pytest.raises(OptionError) as caught:
        parse(**options)
    assert message in str(caught.value)


@pytest.mark.parametrize(('spelling', 'policy'), [
    ('fail', STOP), ('stop', STOP), ('none', STOP), (' Fail ', STOP), ('closest', CLOSEST), ('CLOSEST', CLOSEST)])
def test_on_truncation_takes_every_spelling_of_the_policies(spelling, policy):
    # Spark's own 'fail', the mirror's 'stop' and the consumer's 'none' name the same policy
    assert parse(onTruncation=spelling).on_truncation == policy


def test_fail_on_data_loss_maps_onto_on_truncation_and_durations_parse_like_spark():
    assert [parse(failOnDataLoss=v).on_truncation for v in ('true', 'false', 'FALSE')] == [STOP, CLOSEST, CLOSEST]
    assert parse(failOnDataLoss='false', onTruncation='closest').on_truncation == CLOSEST
    assert [parse(maxTriggerDelay=v).max_trigger_delay_ms for v in ('250', '30s', '2 min', '1h')] == [
        250, 30_000, 120_000, 3_600_000]
    assert (parse(**{'fetchOffset.numRetries': '1', 'fetchOffset.retryIntervalMs': '0'}).fetch_attempts,
            parse(**{'fetchOffset.retryIntervalMs': '0'}).fetch_retry_interval_ms) == (1, 0)


def test_group_options_name_the_executors_group(caplog):
    caplog.set_level(logging.WARNING, 'kafka_kip.spark.options')
    assert parse(**{'kafka.group.id': 'acl-readers'}).executor_group_id() == 'acl-readers'
    assert 'group_id' not in parse(**{'kafka.group.id': 'acl-readers'}).consumer_configs
    first, second = (parse(groupIdPrefix='etl').executor_group_id() for _ in range(2))
    assert first.startswith('etl-') and first.endswith('-executor') and len(first) == len('etl--executor') + 36
    assert first != second  # one group per query, as Spark's generated ids
    assert parse(groupIdPrefix='etl', **{'kafka.group.id': 'g'}).executor_group_id() == 'g'
    assert caplog.messages == ['option groupIdPrefix is ignored: option kafka.group.id is set (as in Spark)']


def test_stream_only_options_in_a_batch_query_are_accepted_with_a_warning(caplog):
    caplog.set_level(logging.WARNING, 'kafka_kip.spark.options')
    parse(maxOffsetsPerTrigger='5', minOffsetsPerTrigger='2', maxTriggerDelay='1s').for_batch()
    assert caplog.messages == [f'option {name} is ignored in batch queries (as in Spark)'
                               for name in ('maxOffsetsPerTrigger', 'minOffsetsPerTrigger', 'maxTriggerDelay')]


def test_jaas_config_of_plain_or_scram_maps_onto_kafka_python_credentials():
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p\\"w d";'
    assert client_configs({'kafka.sasl.jaas.config': jaas, 'kafka.sasl.mechanism': 'SCRAM-SHA-256'}, 'kafka.',
                          KafkaConsumer.DEFAULT_CONFIG) == {
        'sasl_plain_username': 'alice', 'sasl_plain_password': 'p"w d', 'sasl_mechanism': 'SCRAM-SHA-256'}
    with pytest.raises(OptionError, match='options kafka.sasl.jaas.config and kafka.sasl.plain.username both set'):
        client_configs({'kafka.sasl.jaas.config': jaas, 'kafka.sasl.plain.username': 'bob'}, 'kafka.',
                       KafkaConsumer.DEFAULT_CONFIG)


def test_sink_options(caplog):
    caplog.set_level(logging.WARNING, 'kafka_kip.spark.options')
    options = WriteOptions.parse({'kafka.bootstrap.servers': 'h:1', 'topic': 't', 'includeheaders': 'true'})
    assert (options.topic, options.preserve_offsets) == ('t', False)
    assert caplog.messages == ['option includeHeaders has no effect on writes: a headers column is written whenever '
                               'the DataFrame has one (as in Spark)']
    with pytest.raises(OptionError, match='option kafka.partitioner.class is a Java client setting: Java partitioners '
                                          'cannot run here; give the DataFrame a partition column'):
        WriteOptions.parse({'kafka.bootstrap.servers': 'h:1', 'kafka.partitioner.class': 'a.B'})


# -- fetchOffset.numRetries / fetchOffset.retryIntervalMs: the driver's metadata and offset requests ------


def test_fetch_offset_retries_a_failed_metadata_request_and_gives_up_after_num_retries_attempts(reference_cluster_factory, caplog):
    from kafka.errors import KafkaTimeoutError

    from kafka_kip.spark.options import Subscription
    from kafka_kip.spark.planner import SourcePlanner

    cluster = reference_cluster_factory(1)
    cluster.create_topic('t', partitions=2, replication_factor=1)
    cluster.stop_broker(0)

    class RestartOnFirstRetry(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if 'attempt 1 of 3' in record.getMessage():
                cluster.start_broker(0)  # the fault ends before the second attempt

    handler = RestartOnFirstRetry()
    logging.getLogger('kafka_kip.spark.planner').addHandler(handler)
    caplog.set_level(logging.WARNING, 'kafka_kip.spark.planner')
    planner = SourcePlanner(cluster.bootstrap_servers, {'bootstrap_timeout_ms': 300}, Subscription('subscribe',
                            topics=('t',)), STOP, fetch_attempts=3, retry_interval_ms=0)
    try:
        assert sorted(planner.describe()) == [TopicPartition('t', 0), TopicPartition('t', 1)]
    finally:
        planner.close()
        logging.getLogger('kafka_kip.spark.planner').removeHandler(handler)
    assert [r.getMessage() for r in caplog.records if r.name == 'kafka_kip.spark.planner'] == [
        "describing the source topics failed (attempt 1 of 3, option fetchOffset.numRetries): "
        f"KafkaTimeoutError('Unable to bootstrap from {cluster.bootstrap_servers}'); retrying in 0 ms"]

    caplog.clear()
    cluster.stop_broker(0)
    planner = SourcePlanner(cluster.bootstrap_servers, {'bootstrap_timeout_ms': 300}, Subscription('subscribe',
                            topics=('t',)), STOP, fetch_attempts=1)
    with pytest.raises(KafkaTimeoutError, match='Unable to bootstrap'):
        planner.describe()
    planner.close()
    assert [r for r in caplog.records if r.name == 'kafka_kip.spark.planner'] == []  # one attempt, no retry
