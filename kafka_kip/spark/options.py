"""Data source options: names as in Spark's built-in Kafka source, parsed once, errors naming the option.

Spark hands a data source its options as a case-insensitive dict of strings (keys lower-cased). Every
option is checked here: an unknown option, a bad value or a conflicting pair raises :class:`OptionError`
whose message names the option as the user spells it in the docs (``subscribePattern``, not
``subscribepattern``).

``kafka.<name>`` options go to the kafka-python clients with dots turned into underscores
(``kafka.security.protocol`` -> ``security_protocol``); only settings that take a plain value and that the
data source does not manage itself are accepted.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kafka.structs import TopicPartition

from kafka_kip.consumer import KafkaConsumer
from kafka_kip.producer import KafkaProducer

EARLIEST, LATEST = 'earliest', 'latest'
#: Spark's sentinels for a partition's offset in a startingOffsets/endingOffsets JSON.
EARLIEST_OFFSET, LATEST_OFFSET = -2, -1
FAIL, CLOSEST = 'fail', 'closest'
ON_TRUNCATION = (FAIL, CLOSEST)

SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN = 'subscribe', 'subscribePattern', 'assign'
BOOTSTRAP = 'kafka.bootstrap.servers'

#: Client settings the data source sets itself (they decide what is read or how it is decoded).
_MANAGED = {
    'auto_offset_reset': 'use startingOffsets and onTruncation',
    'enable_auto_commit': 'the data source never commits to Kafka; Spark checkpoints the offsets',
    'group_id': 'the data source assigns partitions itself and uses no consumer group',
    'key_deserializer': 'key and value are returned as binary columns',
    'value_deserializer': 'key and value are returned as binary columns',
    'key_serializer': 'the key column is written as it is (binary or string)',
    'value_serializer': 'the value column is written as it is (binary or string)',
}
_PLAIN_TYPES = (bool, int, float, str, type(None))

_READ_OPTIONS = (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN, 'startingOffsets', 'endingOffsets', 'maxOffsetsPerTrigger',
                 'maxRecordsPerPartition', 'includeHeaders', 'onTruncation', 'kafkaConsumer.pollTimeoutMs')
_WRITE_OPTIONS = ('topic', 'preserveOffsets')
#: Options Spark itself may pass along to a sink.
_SPARK_SINK_OPTIONS = ('path', 'checkpointLocation', 'queryName')


class OptionError(ValueError):
    """A data source option is unknown, malformed or conflicts with another; the message names it."""


def _canonical(names: tuple[str, ...]) -> dict[str, str]:
    return {name.lower(): name for name in names}


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ('true', 'false'):
        raise OptionError(f'option {name} must be true or false, got {raw!r}')
    return value == 'true'


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f'option {name} must be a positive integer, got {raw!r}')
    if value <= 0:
        raise OptionError(f'option {name} must be a positive integer, got {raw!r}')
    return value


def _coerce(option: str, raw: str, default: Any) -> Any:
    text = str(raw).strip()
    if isinstance(default, bool):
        if text.lower() not in ('true', 'false'):
            raise OptionError(f'option {option} must be true or false, got {raw!r}')
        return text.lower() == 'true'
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise OptionError(f'option {option} must be an integer, got {raw!r}')
    if isinstance(default, float):
        try:
            return float(text)
        except ValueError:
            raise OptionError(f'option {option} must be a number, got {raw!r}')
    return text


def client_configs(options: Mapping[str, str], prefix: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The ``<prefix><name>`` options as kafka-python configs, checked against ``defaults`` (a DEFAULT_CONFIG).

    ``bootstrap.servers`` is left out (callers take it from its own option).
    """
    configs: dict[str, Any] = {}
    for key, raw in options.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):].replace('.', '_')
        option = prefix + key[len(prefix):]
        if name == 'bootstrap_servers':
            continue
        if name in _MANAGED:
            raise OptionError(f'option {option} is not supported: {_MANAGED[name]}')
        if name not in defaults or not isinstance(defaults[name], _PLAIN_TYPES) or name == 'kafka_client':
            raise OptionError(f'option {option} is not a kafka-python client setting this data source can pass '
                              f'on (it becomes {name!r}; see kafka-python\'s KafkaConsumer/KafkaProducer docs)')
        if name == 'acks' and str(raw).strip().lower() == 'all':
            configs[name] = 'all'
            continue
        configs[name] = _coerce(option, raw, defaults[name])
    return configs


def _check_known(options: Mapping[str, str], known: dict[str, str], prefixes: tuple[str, ...], role: str) -> None:
    for key in options:
        if key in known or key.startswith(prefixes):
            continue
        listed = ', '.join(sorted(set(known.values())) + [p + '*' for p in prefixes])
        raise OptionError(f'unknown option {key!r} for the kafka-kip {role}; known options: {listed}')


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


# -- offsets ------------------------------------------------------------------------------------------


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


def parse_offsets(options: Mapping[str, str], name: str) -> OffsetsSpec:
    """Parse ``startingOffsets`` / ``endingOffsets``.

    ``"earliest"``, ``"latest"`` or JSON ``{"topic": {"0": 23, "1": -2, "2": {"offset": 7, "leaderEpoch": 3}}}``
    (-2 earliest, -1 latest, as in Spark; the object form adds the leader epoch of the position).
    """
    text = str(options[name.lower()]).strip()
    if text.lower() in (EARLIEST, LATEST):
        return OffsetsSpec(name, text.lower())
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise OptionError(f'option {name} must be "earliest", "latest" or JSON like {{"topic":{{"0":23}}}}; '
                          f'it is not valid JSON ({exc}): {text!r}')
    if not isinstance(value, dict) or not value:
        raise OptionError(f'option {name} JSON must be an object of topics, e.g. {{"topic":{{"0":23}}}}; got {text!r}')
    by_partition: dict[TopicPartition, OffsetRequest] = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict) or not partitions:
            raise OptionError(f'option {name}: topic {topic!r} must map partition numbers to offsets, got '
                              f'{json.dumps(partitions)}')
        for partition, entry in partitions.items():
            if not str(partition).isdigit():
                raise OptionError(f'option {name}: topic {topic!r} has a partition key {partition!r} that is not a '
                                  'partition number')
            by_partition[TopicPartition(topic, int(partition))] = _offset_request(name, topic, partition, entry)
    return OffsetsSpec(name, None, by_partition)


def _offset_request(name: str, topic: str, partition: str, entry: Any) -> OffsetRequest:
    where = f'option {name}: {topic}-{partition}'
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


# -- the option sets ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    """Options of ``spark.read`` / ``spark.readStream`` ``.format("kafka-kip")``."""

    bootstrap_servers: str
    consumer_configs: Mapping[str, Any]
    subscription: Subscription
    starting: OffsetsSpec | None  # None: not given (the batch / streaming default applies)
    ending: OffsetsSpec | None
    max_offsets_per_trigger: int | None
    max_records_per_partition: int | None
    include_headers: bool
    on_truncation: str
    poll_timeout_ms: int

    @classmethod
    def parse(cls, options: Mapping[str, str], extra: tuple[str, ...] = (),
              extra_prefixes: tuple[str, ...] = ()) -> ReadOptions:
        """Check and parse; ``extra`` / ``extra_prefixes`` are options a caller handles itself."""
        _check_known(options, _canonical(_READ_OPTIONS + extra), ('kafka.',) + extra_prefixes, 'source')
        on_truncation = str(options.get('ontruncation', FAIL)).strip().lower()
        if on_truncation not in ON_TRUNCATION:
            raise OptionError(f'option onTruncation must be fail or closest, got {options["ontruncation"]!r}')
        ending = parse_offsets(options, 'endingOffsets') if 'endingoffsets' in options else None
        if ending is not None and ending.default == EARLIEST:
            raise OptionError('option endingOffsets cannot be "earliest"')
        if ending is not None and ending.by_partition and any(
                r.offset == EARLIEST_OFFSET for r in ending.by_partition.values()):
            raise OptionError('option endingOffsets cannot use -2 (earliest) for a partition')
        return cls(
            bootstrap_servers=_bootstrap(options),
            consumer_configs=client_configs(options, 'kafka.', KafkaConsumer.DEFAULT_CONFIG),
            subscription=parse_subscription(options),
            starting=parse_offsets(options, 'startingOffsets') if 'startingoffsets' in options else None,
            ending=ending,
            max_offsets_per_trigger=_positive_int(options, 'maxOffsetsPerTrigger'),
            max_records_per_partition=_positive_int(options, 'maxRecordsPerPartition'),
            include_headers=_flag(options, 'includeHeaders', True),
            on_truncation=on_truncation,
            poll_timeout_ms=_positive_int(options, 'kafkaConsumer.pollTimeoutMs') or 120_000,
        )

    def for_batch(self) -> ReadOptions:
        """Batch rules (Spark's): start defaults to earliest and may not be latest; end defaults to latest."""
        if self.max_offsets_per_trigger is not None:
            raise OptionError('option maxOffsetsPerTrigger only applies to streaming queries (readStream)')
        starting = self.starting or OffsetsSpec('startingOffsets', EARLIEST)
        if starting.default == LATEST:
            raise OptionError('option startingOffsets cannot be "latest" for a batch query')
        if starting.by_partition and any(r.offset == LATEST_OFFSET for r in starting.by_partition.values()):
            raise OptionError('option startingOffsets cannot use -1 (latest) for a partition in a batch query')
        return replace(self, starting=starting, ending=self.ending or OffsetsSpec('endingOffsets', LATEST))

    def for_stream(self) -> ReadOptions:
        """Streaming rules (Spark's): start defaults to latest; no endingOffsets."""
        if self.ending is not None:
            raise OptionError('option endingOffsets only applies to batch queries (spark.read)')
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
        _check_known(options, _canonical(_WRITE_OPTIONS + _SPARK_SINK_OPTIONS), ('kafka.',), 'sink')
        topic = options.get('topic')
        if topic is not None and not str(topic).strip():
            raise OptionError('option topic must not be empty')
        return cls(
            bootstrap_servers=_bootstrap(options),
            producer_configs=client_configs(options, 'kafka.', KafkaProducer.DEFAULT_CONFIG),
            topic=None if topic is None else str(topic).strip(),
            preserve_offsets=_flag(options, 'preserveOffsets', False),
        )

