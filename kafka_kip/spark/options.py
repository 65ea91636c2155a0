"""Data source options: names as in Spark's built-in Kafka source, parsed once, errors naming the option.

Spark hands a data source its options as a case-insensitive dict of strings (keys lower-cased). Every
option is checked here: an unknown option, a bad value or a conflicting pair raises :class:`OptionError`
whose message names the option as the user spells it in the docs (``subscribePattern``, not
``subscribepattern``). Options that Spark accepts but that cannot change anything in the query at hand
(``maxOffsetsPerTrigger`` in a batch query, ``startingOffsets`` next to ``startingTimestamp``, ...) are
accepted with a warning saying why, as Spark does.

The options are declared in :mod:`kafka_kip.spark.settings`; ``kafka.<name>`` options go to the kafka-python
clients, see :mod:`kafka_kip.spark.client_options`.
"""
from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kafka.structs import TopicPartition

from kafka_kip.consumer import KafkaConsumer
from kafka_kip.policies import CLOSEST, STOP, TRUNCATION_SPELLINGS
from kafka_kip.producer import KafkaProducer
from kafka_kip.spark.client_options import OptionError, client_configs
from kafka_kip.spark.settings import (
    NO_MATCH_ERROR,
    NO_MATCH_LATEST,
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    SPARK_SINK_OPTIONS,
    STREAM_ONLY,
)

__all__ = ['NO_MATCH_ERROR', 'NO_MATCH_LATEST', 'OptionError', 'ReadOptions', 'WriteOptions', 'client_configs']

log = logging.getLogger(__name__)

EARLIEST, LATEST = 'earliest', 'latest'
#: Spark's sentinels for a partition's offset in a startingOffsets/endingOffsets JSON.
EARLIEST_OFFSET, LATEST_OFFSET = -2, -1

SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN = 'subscribe', 'subscribePattern', 'assign'
BOOTSTRAP = 'kafka.bootstrap.servers'
GROUP_ID = 'kafka.group.id'

_START_OPTIONS = ('startingTimestamp', 'startingOffsetsByTimestamp', 'startingOffsets')  # by precedence
_END_OPTIONS = ('endingTimestamp', 'endingOffsetsByTimestamp', 'endingOffsets')


def _canonical(names: tuple[str, ...]) -> dict[str, str]:
    return {name.lower(): name for name in names}


def _bootstrap(options: Mapping[str, str], name: str = BOOTSTRAP) -> str:
    value = str(options.get(name.lower(), '')).strip()
    if not value:
        raise OptionError(f'option {name} is required (host:port[,host:port...])')
    return value


# -- subscription -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscription:
    """What to read: ``subscribe`` (topic list), ``subscribePattern`` (regex) or ``assign`` (partitions)."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str = ''
    partitions: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        """True if ``topic`` is subscribed (for ``assign``: if any of its partitions is assigned)."""
        if self.kind == SUBSCRIBE:
            return topic in self.topics
        if self.kind == SUBSCRIBE_PATTERN:
            return re.fullmatch(self.pattern, topic) is not None
        return any(tp.topic == topic for tp in self.partitions)


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN) if name.lower() in options]
    if len(given) != 1:
        what = 'none' if not given else ' and '.join(given)
        raise OptionError(f'exactly one of the options subscribe, subscribePattern, assign must be set; got {what}')
    name = given[0]
    raw = str(options[name.lower()]).strip()
    if name == SUBSCRIBE:
        topics = tuple(t.strip() for t in raw.split(',') if t.strip())
        if not topics:
            raise OptionError(f'option subscribe must list at least one topic, got {raw!r}')
        return Subscription(SUBSCRIBE, topics=topics)
    if name == SUBSCRIBE_PATTERN:
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f'option subscribePattern is not a valid regular expression ({exc}): {raw!r}')
        if not raw:
            raise OptionError('option subscribePattern must not be empty')
        return Subscription(SUBSCRIBE_PATTERN, pattern=raw)
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise OptionError(f'option assign is not valid JSON ({exc}); expected e.g. {{"topicA":[0,1]}}: {raw!r}')
    if not isinstance(value, dict) or not value or not all(
            isinstance(t, str) and isinstance(ps, list) and ps and all(type(p) is int and p >= 0 for p in ps)
            for t, ps in value.items()):
        raise OptionError(f'option assign must map topics to lists of partition numbers, e.g. {{"topicA":[0,1]}}; '
                          f'got {raw!r}')
    return Subscription(ASSIGN, partitions=tuple(sorted(TopicPartition(t, p) for t, ps in value.items() for p in ps)))


# -- positions: offsets and timestamps -----------------------------------------------------------


@dataclass(frozen=True)
class OffsetRequest:
    """One partition's offset from a startingOffsets/endingOffsets JSON: -2 earliest, -1 latest, or an offset.

    ``leader_epoch`` (-1 unknown) makes the offset validated against the log (KIP-320) before it is read.
    """

    offset: int
    leader_epoch: int = -1


@dataclass(frozen=True)
class OffsetsSpec:
    """``earliest``, ``latest``, or per-partition :class:`OffsetRequest` s (``by_partition``)."""

    name: str  # the option it came from (for messages)
    default: str | None  # EARLIEST / LATEST, or None when given per partition
    by_partition: Mapping[TopicPartition, OffsetRequest] | None = None


@dataclass(frozen=True)
class TimestampSpec:
    """Positions by record timestamp: per partition, the first offset whose timestamp is >= the given one.

    From ``startingTimestamp`` / ``endingTimestamp`` (``timestamp``: one for every partition) or
    ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (``by_partition``). ``no_match`` says what a
    partition without such a record gets: NO_MATCH_ERROR (fail) or NO_MATCH_LATEST (its latest offset).
    """

    name: str
    timestamp: int | None
    by_partition: Mapping[TopicPartition, int] | None
    no_match: str


PositionsSpec = OffsetsSpec | TimestampSpec


def _partition_json(options: Mapping[str, str], name: str, example: str) -> dict[TopicPartition, Any]:
    """``{"topic": {"0": entry, ...}, ...}`` as ``{TopicPartition: entry}``, errors naming the option."""
    text = str(options[name.lower()]).strip()
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise OptionError(f'option {name} must be JSON like {example}; it is not valid JSON ({exc}): {text!r}')
    if not isinstance(value, dict) or not value:
        raise OptionError(f'option {name} JSON must be an object of topics, e.g. {example}; got {text!r}')
    entries: dict[TopicPartition, Any] = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict) or not partitions:
            raise OptionError(f'option {name}: topic {topic!r} must map partition numbers to values, got '
                              f'{json.dumps(partitions)}')
        for partition, entry in partitions.items():
            if not str(partition).isdigit():
                raise OptionError(f'option {name}: topic {topic!r} has a partition key {partition!r} that is not a '
                                  'partition number')
            entries[TopicPartition(topic, int(partition))] = entry
    return entries


def parse_offsets(options: Mapping[str, str], name: str) -> OffsetsSpec:
    """Parse ``startingOffsets`` / ``endingOffsets``.

    ``"earliest"``, ``"latest"`` or JSON ``{"topic": {"0": 23, "1": -2, "2": {"offset": 7, "leaderEpoch": 3}}}``
    (-2 earliest, -1 latest, as in Spark; the object form adds the leader epoch of the position).
    """
    text = str(options[name.lower()]).strip()
    if text.lower() in (EARLIEST, LATEST):
        return OffsetsSpec(name, text.lower())
    if not text.startswith('{'):
        raise OptionError(f'option {name} must be "earliest", "latest" or JSON like {{"topic":{{"0":23}}}}; got '
                          f'{text!r}')
    entries = _partition_json(options, name, '{"topic":{"0":23}}')
    return OffsetsSpec(name, None, {tp: _offset_request(name, tp, entry) for tp, entry in entries.items()})


def _offset_request(name: str, tp: TopicPartition, entry: Any) -> OffsetRequest:
    where = f'option {name}: {tp.topic}-{tp.partition}'
    if isinstance(entry, dict):
        unknown = set(entry) - {'offset', 'leaderEpoch'}
        if unknown or 'offset' not in entry:
            raise OptionError(f'{where} must be an offset or {{"offset": N, "leaderEpoch": E}}, got {json.dumps(entry)}')
        offset, epoch = entry['offset'], entry.get('leaderEpoch', -1)
    else:
        offset, epoch = entry, -1
    if type(offset) is not int or offset < EARLIEST_OFFSET:
        raise OptionError(f'{where} has offset {json.dumps(offset)}; use an offset >= 0, -2 (earliest) or -1 (latest)')
    if type(epoch) is not int or epoch < -1:
        raise OptionError(f'{where} has leaderEpoch {json.dumps(epoch)}; use an epoch >= 0 (or leave it out)')
    if epoch >= 0 and offset < 0:
        raise OptionError(f'{where}: a leaderEpoch needs an explicit offset, not {offset}')
    return OffsetRequest(offset, epoch)


def _timestamp(name: str, value: Any) -> int:
    """A timestamp in ms: an option's text, or an integer in a JSON."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    if type(value) is int and value >= 0:
        return value
    raise OptionError(f'option {name}: expected a timestamp in milliseconds since the epoch (an integer >= 0), '
                      f'got {json.dumps(value)}')


def parse_positions(options: Mapping[str, str], names: tuple[str, str, str], no_match: str) -> PositionsSpec | None:
    """The start (or end) of a query from the first given of ``names`` (Spark's precedence order).

    ``names`` is (timestamp, offsets-by-timestamp, offsets); options after the first given one are ignored
    with a warning, as Spark ignores them.
    """
    given = [name for name in names if name.lower() in options]
    if not given:
        return None
    if len(given) > 1:
        log.warning('option %s takes precedence over %s (as in Spark); %s ignored', given[0], ' and '.join(given[1:]),
                    'it is' if len(given) == 2 else 'they are')
    name = given[0]
    if name == names[0]:
        return TimestampSpec(name, _timestamp(name, options[name.lower()]), None, no_match)
    if name == names[1]:
        entries = _partition_json(options, name, '{"topic":{"0":1700000000000}}')
        return TimestampSpec(name, None, {tp: _timestamp(f'{name} {tp.topic}-{tp.partition}', ts)
                                          for tp, ts in entries.items()}, no_match)
    return parse_offsets(options, name)


# -- the option sets ----------------------------------------------------------------------------------


def _on_truncation(options: Mapping[str, str]) -> str:
    """``onTruncation`` as a truncation policy (:mod:`kafka_kip.policies`: 'fail' is 'stop'), or Spark's
    ``failOnDataLoss`` mapped onto it (true: stop, false: closest)."""
    given = str(options.get('ontruncation', STOP)).strip().lower()
    if given not in TRUNCATION_SPELLINGS:
        raise OptionError(f'option onTruncation must be one of {", ".join(TRUNCATION_SPELLINGS)} (fail, none: '
                          f'stop), got {options["ontruncation"]!r}')
    on_truncation = TRUNCATION_SPELLINGS[given]
    if 'failondataloss' not in options:
        return on_truncation
    mapped = STOP if SOURCE_OPTIONS.option(options, 'fail_on_data_loss', OptionError) else CLOSEST
    if 'ontruncation' in options and mapped != on_truncation:
        raise OptionError(f'options failOnDataLoss={options["failondataloss"]} and onTruncation={given} '
                          f'disagree (failOnDataLoss=false means onTruncation=closest); set one of them')
    return mapped


@dataclass(frozen=True)
class ReadOptions:
    """Options of ``spark.read`` / ``spark.readStream`` ``.format("kafka-kip")``."""

    bootstrap_servers: str
    consumer_configs: Mapping[str, Any]
    subscription: Subscription
    starting: PositionsSpec | None  # None: not given (the batch / streaming default applies)
    ending: PositionsSpec | None
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    max_records_per_partition: int | None
    min_partitions: int | None
    include_headers: bool
    on_truncation: str
    poll_timeout_ms: int
    group_id: str | None  # kafka.group.id: the executors' consumer group
    group_id_prefix: str | None  # groupIdPrefix: executors use <prefix>-<uuid>-executor
    fetch_attempts: int  # fetchOffset.numRetries: attempts of a driver-side metadata/offset request
    fetch_retry_interval_ms: int
    given: frozenset[str]  # the option names as given (lower case)

    @classmethod
    def parse(cls, options: Mapping[str, str], extra: tuple[str, ...] = (),
              extra_prefixes: tuple[str, ...] = ()) -> ReadOptions:
        """Check and parse; ``extra`` / ``extra_prefixes`` are options a caller handles itself."""
        SOURCE_OPTIONS.check_known(options, ('kafka.',) + extra_prefixes, 'kafka-kip source', _canonical(extra),
                                   OptionError)

        def option(name: str) -> Any:
            return SOURCE_OPTIONS.option(options, name, OptionError)

        strategy = option('starting_offsets_by_timestamp_strategy')
        starting = parse_positions(options, _START_OPTIONS, strategy)
        if 'startingoffsetsbytimestampstrategy' in options and not isinstance(starting, TimestampSpec):
            log.warning('option startingOffsetsByTimestampStrategy has no effect without startingTimestamp or '
                        'startingOffsetsByTimestamp')
        ending = parse_positions(options, _END_OPTIONS, NO_MATCH_LATEST)
        if isinstance(ending, OffsetsSpec) and (ending.default == EARLIEST or any(
                r.offset == EARLIEST_OFFSET for r in (ending.by_partition or {}).values())):
            raise OptionError('option endingOffsets cannot be "earliest" (or -2 for a partition)')
        min_offsets, max_offsets = option('min_offsets_per_trigger'), option('max_offsets_per_trigger')
        if min_offsets and max_offsets and min_offsets > max_offsets:
            raise OptionError(f'option minOffsetsPerTrigger ({min_offsets}) is higher than maxOffsetsPerTrigger '
                              f'({max_offsets})')
        if 'maxtriggerdelay' in options and min_offsets is None:
            log.warning('option maxTriggerDelay has no effect without minOffsetsPerTrigger')
        group_id = str(options[GROUP_ID]).strip() if GROUP_ID in options else None
        if group_id == '':
            raise OptionError(f'option {GROUP_ID} must not be empty')
        prefix = str(options['groupidprefix']).strip() if 'groupidprefix' in options else None
        if group_id is not None and prefix is not None:
            log.warning('option groupIdPrefix is ignored: option %s is set (as in Spark)', GROUP_ID)
        return cls(
            bootstrap_servers=_bootstrap(options),
            consumer_configs=client_configs(options, 'kafka.', KafkaConsumer.DEFAULT_CONFIG, handled=('group_id',)),
            subscription=parse_subscription(options),
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=max_offsets,
            min_offsets_per_trigger=min_offsets,
            max_trigger_delay_ms=option('max_trigger_delay_ms'),
            max_records_per_partition=option('max_records_per_partition'),
            min_partitions=option('min_partitions'),
            include_headers=option('include_headers'),
            on_truncation=_on_truncation(options),
            poll_timeout_ms=option('poll_timeout_ms'),
            group_id=group_id,
            group_id_prefix=None if group_id is not None else prefix,
            fetch_attempts=option('fetch_attempts'),
            fetch_retry_interval_ms=option('fetch_retry_interval_ms'),
            given=frozenset(options),
        )

    def executor_group_id(self) -> str | None:
        """The group the executors' consumers name: kafka.group.id, ``<groupIdPrefix>-<uuid>-executor``, or none.

        Called once per query. The consumers only look the group's coordinator up (assigned partitions, no
        commits); with neither option they use no group.
        """
        if self.group_id is not None:
            return self.group_id
        if self.group_id_prefix is not None:
            return f'{self.group_id_prefix}-{uuid.uuid4()}-executor'
        return None

    def for_batch(self) -> ReadOptions:
        """Batch rules (Spark's): start defaults to earliest and may not be latest; end defaults to latest."""
        for name in STREAM_ONLY:
            if name.lower() in self.given:
                log.warning('option %s is ignored in batch queries (as in Spark)', name)
        starting = self.starting or OffsetsSpec('startingOffsets', EARLIEST)
        if isinstance(starting, OffsetsSpec) and starting.default == LATEST:
            raise OptionError('option startingOffsets cannot be "latest" for a batch query')
        if isinstance(starting, OffsetsSpec) and any(
                r.offset == LATEST_OFFSET for r in (starting.by_partition or {}).values()):
            raise OptionError('option startingOffsets cannot use -1 (latest) for a partition in a batch query')
        return replace(self, starting=starting, ending=self.ending or OffsetsSpec('endingOffsets', LATEST))

    def for_stream(self) -> ReadOptions:
        """Streaming rules (Spark's): start defaults to latest; no end."""
        if self.ending is not None:
            raise OptionError(f'option {self.ending.name} only applies to batch queries (spark.read)')
        return replace(self, starting=self.starting or OffsetsSpec('startingOffsets', LATEST))


@dataclass(frozen=True)
class WriteOptions:
    """Options of ``df.write`` / ``df.writeStream`` ``.format("kafka-kip")``."""

    bootstrap_servers: str
    producer_configs: Mapping[str, Any]
    topic: str | None
    preserve_offsets: bool

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        SINK_OPTIONS.check_known(options, ('kafka.',), 'kafka-kip sink', _canonical(SPARK_SINK_OPTIONS), OptionError)
        topic = options.get('topic')
        if topic is not None and not str(topic).strip():
            raise OptionError('option topic must not be empty')
        if 'includeheaders' in options:
            SINK_OPTIONS.option(options, 'include_headers', OptionError)
            log.warning('option includeHeaders has no effect on writes: a headers column is written whenever the '
                        'DataFrame has one (as in Spark)')
        return cls(
            bootstrap_servers=_bootstrap(options),
            producer_configs=client_configs(options, 'kafka.', KafkaProducer.DEFAULT_CONFIG),
            topic=None if topic is None else str(topic).strip(),
            preserve_offsets=SINK_OPTIONS.option(options, 'preserve_offsets', OptionError),
        )
