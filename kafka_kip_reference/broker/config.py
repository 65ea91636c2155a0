"""Broker configs of the reference cluster: Apache Kafka's names, types and defaults.

``ReferenceCluster(broker_config={...})`` and ``kafka-kip broker --config key=value`` take them as Kafka's
``server.properties`` does (values are strings, or Python values such as ``False`` and ``4``, stored as Kafka
spells them). Every key the reference cluster acts on or reports is here with Apache Kafka 4's default; any
other key is refused with the list of accepted keys rather than silently ignored.

What the cluster acts on: auto-creation (``auto.create.topics.enable``, ``num.partitions``,
``default.replication.factor``), ``delete.topic.enable``, ``min.insync.replicas``, ``message.max.bytes``,
``log.message.timestamp.type``, ``offset.metadata.max.bytes``, the group and transaction settings, segments and
retention (``log.segment.bytes``, ``log.roll.*``, ``log.retention.*``: :mod:`kafka_kip_reference.broker.retention`)
and the connection counts (``max.connections*``: :mod:`kafka_kip_reference.broker.connection_limits`). Reported
but not acted on (a client sees them in DescribeConfigs only): compaction (``cleanup.policy=compact`` only turns
deletion off), ``compression.type`` (batches are stored as produced) and ``unclean.leader.election.enable``
(leaders change only as the test says).

Topic configs default to the broker configs they are synonyms of (``max.message.bytes`` to
``message.max.bytes``, ``retention.ms`` to ``log.retention.ms``/``.minutes``/``.hours``, ...), as in Kafka's
``LogConfig``; :meth:`BrokerConfig.topic_defaults` gives them with the broker config each one comes from.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kafka_kip_reference.broker.oauthbearer import OAUTHBEARER
from kafka_kip_reference.broker.sasl_mechanisms import MECHANISMS as SASL_MECHANISMS


class ConfigType(enum.IntEnum):
    """Kafka's ``DescribeConfigsResponse`` config types."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Kafka's ``DescribeConfigsResponse`` config sources."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True)
class ConfigDef:
    """One config: its type, Kafka's default (None: unset), the values it accepts and, for a topic config,
    the broker config it defaults to (``synonym``; None where the default is computed, as ``retention.ms``)."""

    name: str
    type: ConfigType
    default: str | None = None
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    synonym: str | None = None
    dynamic: bool = False
    """Kafka can change it at runtime (DescribeConfigs reports it as not read-only)."""
    parse: Callable[[str], object] | None = None
    """Checks a string value's format: ValueError saying what is wrong."""

    def normalize(self, value: object) -> str:
        """``value`` as Kafka stores it; ValueError naming the key, the value and what is accepted, in Apache
        Kafka's words (its ConfigException: ``Invalid value V for configuration K: reason``)."""
        text = str(value).strip()

        def invalid(reason: str) -> ValueError:
            return ValueError(f'Invalid value {text} for configuration {self.name}: {reason}')
        if self.type is ConfigType.BOOLEAN:
            lowered = text.lower()
            if lowered not in ('true', 'false'):
                raise invalid('Expected value to be either true or false')
            return lowered
        if self.type in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
            try:
                number = int(text)
            except ValueError:
                raise invalid(f'Not a number of type {self.type.name}') from None
            if self.minimum is not None and number < self.minimum:
                raise invalid(f'Value must be at least {self.minimum}')
            return str(number)
        if self.choices:
            items = [item.strip() for item in text.split(',')] if self.type is ConfigType.LIST else [text]
            bad = [item for item in items if item not in self.choices]
            if bad or not items:
                raise invalid(f'String must be one of: {", ".join(self.choices)}')
            return ','.join(items)
        if self.parse is not None:
            try:
                self.parse(text)
            except ValueError as exc:
                raise invalid(str(exc)) from None
        return text


def host_counts(text: str) -> dict[str, int]:
    """Kafka's ``host:count,host:count`` map (``max.connections.per.ip.overrides``); ValueError naming a bad entry."""
    counts = {}
    for entry in filter(None, (item.strip() for item in text.split(','))):
        host, _, count = entry.rpartition(':')
        if not host or not count.isdigit():
            raise ValueError(f'{entry!r} is not host:count (a host name or IP address, a count of at least 0)')
        counts[host] = int(count)
    return counts


_TIMESTAMP_TYPES = ('CreateTime', 'LogAppendTime')
#: ``group.consumer.migration.policy``: which online conversions between classic and consumer groups Kafka makes.
MIGRATION_POLICIES = ('disabled', 'downgrade', 'upgrade', 'bidirectional')
#: The reference cluster's own broker config bounding the decompression of one produced batch.
MAX_UNCOMPRESSED_BATCH_BYTES = 'reference.max.uncompressed.batch.bytes'
_CLEANUP_POLICIES = ('compact', 'delete')  # Kafka's order (its messages list them so)
#: The authorizer ``authorizer.class.name`` may name (Kafka 4's; the ACLs: kafka_kip_reference.broker.acl).
STANDARD_AUTHORIZER = 'org.apache.kafka.metadata.authorizer.StandardAuthorizer'
_COMPRESSION_TYPES = ('producer', 'uncompressed', 'gzip', 'snappy', 'lz4', 'zstd')

#: Broker configs the reference cluster acts on or reports, with Apache Kafka 4.0's defaults.
BROKER_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in (
    ConfigDef('auto.create.topics.enable', ConfigType.BOOLEAN, 'true'),
    ConfigDef('num.partitions', ConfigType.INT, '1', minimum=1),
    ConfigDef('default.replication.factor', ConfigType.INT, '1', minimum=1),
    ConfigDef('delete.topic.enable', ConfigType.BOOLEAN, 'true'),
    ConfigDef('min.insync.replicas', ConfigType.INT, '1', minimum=1, dynamic=True),
    ConfigDef('message.max.bytes', ConfigType.INT, '1048588', minimum=0, dynamic=True),
    ConfigDef('log.retention.hours', ConfigType.INT, '168'),
    ConfigDef('log.retention.minutes', ConfigType.INT, None),
    ConfigDef('log.retention.ms', ConfigType.LONG, None, dynamic=True),
    ConfigDef('log.retention.bytes', ConfigType.LONG, '-1', dynamic=True),
    ConfigDef('log.segment.bytes', ConfigType.INT, '1073741824', minimum=1024 * 1024, dynamic=True),
    ConfigDef('log.roll.hours', ConfigType.INT, '168', minimum=1),
    ConfigDef('log.roll.ms', ConfigType.LONG, None, minimum=1, dynamic=True),
    ConfigDef('log.retention.check.interval.ms', ConfigType.LONG, '300000', minimum=1),
    ConfigDef('log.initial.task.delay.ms', ConfigType.LONG, '30000', minimum=0),
    ConfigDef('log.cleanup.policy', ConfigType.LIST, 'delete', choices=_CLEANUP_POLICIES, dynamic=True),
    ConfigDef('log.message.timestamp.type', ConfigType.STRING, 'CreateTime', choices=_TIMESTAMP_TYPES, dynamic=True),
    ConfigDef('compression.type', ConfigType.STRING, 'producer', choices=_COMPRESSION_TYPES, dynamic=True),
    ConfigDef('unclean.leader.election.enable', ConfigType.BOOLEAN, 'false', dynamic=True),
    ConfigDef('offset.metadata.max.bytes', ConfigType.INT, '4096', minimum=0),
    ConfigDef('group.initial.rebalance.delay.ms', ConfigType.INT, '3000', minimum=0),
    ConfigDef('group.min.session.timeout.ms', ConfigType.INT, '6000', minimum=0),
    ConfigDef('group.max.session.timeout.ms', ConfigType.INT, '1800000', minimum=0),
    # KIP-848 consumer groups (kafka_kip_reference.broker.consumer_groups), Kafka 4.4's defaults
    ConfigDef('group.consumer.heartbeat.interval.ms', ConfigType.INT, '5000', minimum=1),
    ConfigDef('group.consumer.session.timeout.ms', ConfigType.INT, '45000', minimum=1),
    ConfigDef('group.consumer.assignors', ConfigType.LIST, 'uniform,range', choices=('uniform', 'range')),
    ConfigDef('group.consumer.max.size', ConfigType.INT, str(2**31 - 1), minimum=1),
    ConfigDef('group.consumer.migration.policy', ConfigType.STRING, 'bidirectional',
              choices=MIGRATION_POLICIES),

    ConfigDef('offsets.topic.num.partitions', ConfigType.INT, '50', minimum=1),
    ConfigDef('offsets.topic.replication.factor', ConfigType.SHORT, '3', minimum=1),
    ConfigDef('transaction.state.log.num.partitions', ConfigType.INT, '50', minimum=1),
    ConfigDef('transaction.state.log.replication.factor', ConfigType.SHORT, '3', minimum=1),
    ConfigDef('transaction.state.log.min.isr', ConfigType.INT, '2', minimum=1),
    ConfigDef('transaction.max.timeout.ms', ConfigType.INT, '900000', minimum=1),
    ConfigDef('transaction.abort.timed.out.transaction.cleanup.interval.ms', ConfigType.INT, '10000', minimum=1),
    # KIP-1243 (no Apache Kafka config yet): how long a broker whose metadata is older than a request's
    # consistency token waits for it before answering STALE_METADATA.
    ConfigDef('metadata.consistency.wait.max.ms', ConfigType.INT, '500', minimum=0),
    ConfigDef('log.message.timestamp.before.max.ms', ConfigType.LONG, str(2**63 - 1), minimum=0),
    ConfigDef('log.message.timestamp.after.max.ms', ConfigType.LONG, '3600000', minimum=0),
    ConfigDef('fetch.max.bytes', ConfigType.INT, str(55 * 1024 * 1024), minimum=1024),
    ConfigDef('socket.request.max.bytes', ConfigType.INT, str(100 * 1024 * 1024), minimum=1),
    ConfigDef('connections.max.idle.ms', ConfigType.LONG, '600000'),
    ConfigDef('max.connections', ConfigType.INT, str(2**31 - 1), minimum=0, dynamic=True),
    ConfigDef('max.connections.per.ip', ConfigType.INT, str(2**31 - 1), minimum=0, dynamic=True),
    ConfigDef('max.connections.per.ip.overrides', ConfigType.STRING, '', dynamic=True, parse=host_counts),
    # security: the same as ReferenceCluster(authorizer=True, super_users=...) (super.users: 'User:a;User:b')
    ConfigDef('authorizer.class.name', ConfigType.STRING, '', choices=('', STANDARD_AUTHORIZER)),
    ConfigDef('allow.everyone.if.no.acl.found', ConfigType.BOOLEAN, 'false'),
    ConfigDef('super.users', ConfigType.STRING, None),
    ConfigDef('sasl.enabled.mechanisms', ConfigType.LIST, 'GSSAPI', choices=(*SASL_MECHANISMS, OAUTHBEARER)),
    ConfigDef('connection.failed.authentication.delay.ms', ConfigType.INT, '100', minimum=0),
    ConfigDef('sasl.server.max.receive.size', ConfigType.INT, '524288', minimum=1),
    # The reference cluster's own (not Apache Kafka's, which decompresses without a bound): the most bytes the
    # records of one produced batch may inflate to.
    ConfigDef(MAX_UNCOMPRESSED_BATCH_BYTES, ConfigType.INT, str(64 * 1024 * 1024), minimum=1024),
)}

#: Where the reference cluster's own default differs from Kafka's, and why (DescribeConfigs reports
#: these with source DEFAULT_CONFIG as well: they are this broker's defaults).
REFERENCE_DEFAULTS: dict[str, str] = {
    # Kafka's shipped config/server.properties (and testcontainers) set 0 "for development and testing";
    # 100 ms lets members started together join the first generation.
    'group.initial.rebalance.delay.ms': '100',
    # Kafka's default is GSSAPI (Kerberos), which the reference cluster does not implement: the password mechanisms
    # (OAUTHBEARER, which accepts any unsecured token's subject, only when named).
    'sasl.enabled.mechanisms': ','.join(SASL_MECHANISMS),
    # Kafka's 30 s: a cluster started for a test would delete records with historical timestamps (older than
    # retention.ms, 7 days) half a minute in; the first retention check comes one check interval (5 min) after start.
    'log.initial.task.delay.ms': '300000',
}

_MS_PER_MINUTE = 60_000
_MS_PER_HOUR = 3_600_000


#: Topic configs every topic reports, with the broker config each defaults to.
TOPIC_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in (
    ConfigDef('cleanup.policy', ConfigType.LIST, choices=_CLEANUP_POLICIES, synonym='log.cleanup.policy'),
    ConfigDef('compression.type', ConfigType.STRING, choices=_COMPRESSION_TYPES, synonym='compression.type'),
    ConfigDef('max.message.bytes', ConfigType.INT, minimum=0, synonym='message.max.bytes'),
    ConfigDef('message.timestamp.type', ConfigType.STRING, choices=_TIMESTAMP_TYPES,
              synonym='log.message.timestamp.type'),
    ConfigDef('message.timestamp.before.max.ms', ConfigType.LONG, minimum=0,
              synonym='log.message.timestamp.before.max.ms'),
    ConfigDef('message.timestamp.after.max.ms', ConfigType.LONG, minimum=0,
              synonym='log.message.timestamp.after.max.ms'),
    ConfigDef('min.insync.replicas', ConfigType.INT, minimum=1, synonym='min.insync.replicas'),
    ConfigDef('retention.bytes', ConfigType.LONG, synonym='log.retention.bytes'),
    ConfigDef('retention.ms', ConfigType.LONG, minimum=-1),
    ConfigDef('segment.bytes', ConfigType.INT, minimum=1024 * 1024, synonym='log.segment.bytes'),
    ConfigDef('segment.ms', ConfigType.LONG, minimum=1),
    ConfigDef('unclean.leader.election.enable', ConfigType.BOOLEAN, synonym='unclean.leader.election.enable'),
)}


#: Apache Kafka 4's other topic configs: accepted and reported as set, not acted on (no default is reported).
OTHER_TOPIC_CONFIGS = frozenset((
    'compression.gzip.level', 'compression.lz4.level', 'compression.zstd.level', 'delete.retention.ms',
    'file.delete.delay.ms', 'flush.messages', 'flush.ms', 'follower.replication.throttled.replicas',
    'index.interval.bytes', 'leader.replication.throttled.replicas', 'local.retention.bytes', 'local.retention.ms',
    'max.compaction.lag.ms', 'min.cleanable.dirty.ratio', 'min.compaction.lag.ms', 'preallocate',
    'remote.log.copy.disable', 'remote.log.delete.on.disable', 'remote.storage.enable', 'segment.index.bytes',
    'segment.jitter.ms',
))


class ConfigEntry(NamedTuple):
    """One config as DescribeConfigs reports it; ``synonyms`` are ``(name, value, source)``, most specific first."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    read_only: bool
    synonyms: list[tuple[str, str, ConfigSource]]


#: Topic configs whose default is a time the broker configs give in one of several units: ``(broker config,
#: milliseconds per unit)``, the one that takes precedence first (Kafka's LogConfig: ms > minutes > hours).
_TIME_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    'retention.ms': (('log.retention.ms', 1), ('log.retention.minutes', _MS_PER_MINUTE),
                     ('log.retention.hours', _MS_PER_HOUR)),
    'segment.ms': (('log.roll.ms', 1), ('log.roll.hours', _MS_PER_HOUR)),
}


def _time_source(topic_config: str, values: Mapping[str, str | None]) -> tuple[str, int]:
    """The broker config that sets ``topic_config``'s default and its milliseconds per unit."""
    *finer, coarsest = _TIME_SYNONYMS[topic_config]
    return next(((name, factor) for name, factor in finer if values.get(name) is not None), coarsest)


class BrokerConfig:
    """The broker configs of a cluster: Kafka's defaults overridden by the given ``server.properties`` values and the
    cluster-wide dynamic configs; :meth:`for_broker` is one broker's view, with that broker's own dynamic configs on
    top (Kafka's per-broker dynamic configs: only that broker acts on them)."""

    def __init__(self, overrides: Mapping[str, object] | None = None) -> None:
        self._overrides: dict[str, str] = {}
        for name, value in (overrides or {}).items():
            definition = BROKER_CONFIGS.get(name)
            if definition is None:
                raise ValueError(f'unknown broker config {name!r}; the reference cluster accepts: '
                                 f'{", ".join(sorted(BROKER_CONFIGS))}')
            self._overrides[name] = definition.normalize(value)
        #: dynamic configs (AlterConfigs / IncrementalAlterConfigs): the cluster-wide default ('') and per broker
        self._dynamic_default: dict[str, str] = {}
        self._dynamic_per_broker: dict[int, dict[str, str]] = {}
        self._values: dict[str, str | None] = {}
        #: None for the cluster's view; a broker's id for :meth:`for_broker`'s
        self._broker_id: int | None = None
        self._root = self
        self._views: dict[int, BrokerConfig] = {}
        #: every topic config's default, shared by the topics (kept current as dynamic configs change)
        self.shared_topic_defaults = TopicDefaults()
        self._recompute()
        minimum, maximum = self.int('group.min.session.timeout.ms'), self.int('group.max.session.timeout.ms')
        if minimum > maximum:
            raise ValueError(f'group.min.session.timeout.ms {minimum} exceeds group.max.session.timeout.ms {maximum}')
        if self.int('max.connections.per.ip') == 0 and not self['max.connections.per.ip.overrides']:
            raise ValueError('max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides '
                             'property is set.')

    def _computed(self, broker_id: int | None) -> dict[str, str | None]:
        dynamic = {**self._dynamic_default, **({} if broker_id is None else self._dynamic_per_broker.get(broker_id, {}))}
        return {name: dynamic.get(name, self._overrides.get(name, REFERENCE_DEFAULTS.get(name, d.default)))
                for name, d in BROKER_CONFIGS.items()}

    def _recompute(self) -> None:
        root = self._root
        root._values = root._computed(None)
        for broker_id, view in root._views.items():
            view._values = root._computed(broker_id)
        root.shared_topic_defaults.cluster = root.topic_defaults()
        root.shared_topic_defaults.brokers = {broker_id: root.for_broker(broker_id).topic_defaults()
                                              for broker_id, values in root._dynamic_per_broker.items() if values}

    def for_broker(self, broker_id: int) -> BrokerConfig:
        """Broker ``broker_id``'s view: these configs with its own dynamic configs on top (kept current)."""
        root = self._root
        view = root._views.get(broker_id)
        if view is None:
            view = object.__new__(BrokerConfig)
            view.__dict__.update(root.__dict__)  # the same stores; its own values
            view._broker_id = broker_id
            view._values = root._computed(broker_id)
            root._views[broker_id] = view
        return view

    def dynamic(self, broker_id: int | None) -> dict[str, str]:
        """The dynamic configs of broker ``broker_id`` (None: the cluster-wide default)."""
        return dict(self._dynamic_default if broker_id is None else self._dynamic_per_broker.get(broker_id, {}))

    def set_dynamic(self, broker_id: int | None, values: Mapping[str, str]) -> None:
        """Replace the dynamic configs of broker ``broker_id`` (None: the cluster-wide default) by ``values``
        (checked by the caller: dynamic broker configs, normalized). They take effect at once: the cluster-wide
        ones on every broker without its own value, a broker's on that broker only."""
        if broker_id is None:
            self._dynamic_default.clear()
            self._dynamic_default.update(values)
        else:
            self._dynamic_per_broker[broker_id] = dict(values)
        self._recompute()

    def __getitem__(self, name: str) -> str | None:
        return self._values[name]

    def int(self, name: str) -> int:
        return int(self._values[name])

    def bool(self, name: str) -> bool:
        return self._values[name] == 'true'

    def is_set(self, name: str) -> bool:
        """True if ``name`` was given (a static broker config), False if it has its default."""
        return name in self._overrides

    def entries(self, broker_id: int | None = None) -> list[tuple[str, str | None, ConfigSource]]:
        """``(name, value, source)`` of every broker config as broker ``broker_id`` reports it, by name."""
        entries = []
        for name, value in sorted(self._values.items()):
            synonyms = self.synonyms(name, broker_id)
            entries.append((name, *synonyms[0][1:]) if synonyms else (name, value, ConfigSource.DEFAULT_CONFIG))
        return entries

    def synonyms(self, name: str, broker_id: int | None = None) -> list[tuple[str, str, ConfigSource]]:
        """Where broker config ``name``'s value comes from, most specific first (Kafka's DescribeConfigs
        synonyms): broker ``broker_id``'s dynamic value, the cluster-wide dynamic one, the ``server.properties``
        value if set, then the default (if it has one)."""
        found = []
        broker_id = self._broker_id if broker_id is None else broker_id
        if broker_id is not None and name in self._dynamic_per_broker.get(broker_id, {}):
            found.append((name, self._dynamic_per_broker[broker_id][name], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in self._dynamic_default:
            found.append((name, self._dynamic_default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        if name in self._overrides:
            found.append((name, self._overrides[name], ConfigSource.STATIC_BROKER_CONFIG))
        default = REFERENCE_DEFAULTS.get(name, BROKER_CONFIGS[name].default)
        if default is not None:
            found.append((name, default, ConfigSource.DEFAULT_CONFIG))
        return found

    @property
    def retention_ms(self) -> int:
        return self.time_ms('retention.ms')

    def time_ms(self, topic_config: str) -> int:
        """The default of time topic config ``topic_config`` (``retention.ms``, ``segment.ms``) in ms (-1: none)."""
        source, factor = _time_source(topic_config, self._values)
        value = self.int(source) * factor
        return -1 if value < 0 else value

    def topic_default(self, name: str) -> tuple[str, str, ConfigSource]:
        """``(value, broker config it comes from, source)`` of topic config ``name`` without an override."""
        definition = TOPIC_CONFIGS[name]
        broker = definition.synonym or _time_source(name, self._values)[0]
        value = str(self.time_ms(name)) if definition.synonym is None else self._values[broker]
        synonyms = self.synonyms(broker)
        return value, broker, synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG

    def topic_defaults(self) -> dict[str, str]:
        """Every topic config's default value."""
        return {name: self.topic_default(name)[0] for name in TOPIC_CONFIGS}

    def topic_entries(self, overrides: Mapping[str, str]) -> list[ConfigEntry]:
        """Every config of a topic with ``overrides``, by name, with the synonyms Kafka reports: the override,
        then the broker config it defaults to (``retention.ms``: ``log.retention.ms``, or the retention setting
        given)."""
        entries = []
        for name in sorted({*TOPIC_CONFIGS, *overrides}):
            definition = TOPIC_CONFIGS.get(name)
            config_type = definition.type if definition else ConfigType.STRING
            own = [(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG)] if name in overrides else []
            broker = None
            if definition is not None:
                source = _time_source(name, self._values)[0] if definition.synonym is None else None
                broker = definition.synonym or (source if source in self._overrides else _TIME_SYNONYMS[name][0][0])
            synonyms = own + (self.synonyms(broker) if broker else [])
            if own:
                entries.append(ConfigEntry(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG, config_type,
                                           False, synonyms))
            else:
                value, _, source = self.topic_default(name)
                entries.append(ConfigEntry(name, value, source, config_type, False, synonyms))
        return entries

    def broker_entries(self, broker_id: int | None = None) -> list[ConfigEntry]:
        """Every broker config as broker ``broker_id`` reports it, by name, with its synonyms (read-only unless
        Kafka can change it at runtime)."""
        known = [ConfigEntry(name, value, source, BROKER_CONFIGS[name].type, not BROKER_CONFIGS[name].dynamic,
                             self.synonyms(name, broker_id)) for name, value, source in self.entries(broker_id)]
        # configs Kafka does not know, set dynamically (a plugin's, say): described without their value, as Kafka
        broker_id = self._broker_id if broker_id is None else broker_id
        custom = {name: ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG for name in self._dynamic_default
                  if name not in BROKER_CONFIGS}
        custom.update({name: ConfigSource.DYNAMIC_BROKER_CONFIG
                       for name in self._dynamic_per_broker.get(broker_id, {}) if name not in BROKER_CONFIGS}
                      if broker_id is not None else {})
        return sorted(known + [ConfigEntry(name, None, source, ConfigType.STRING, False, [(name, None, source)])
                               for name, source in custom.items()])


class TopicDefaults:
    """Every topic config's default from the broker configs, shared by all topics: the cluster's, and a broker's
    own where its dynamic configs make them differ (:meth:`BrokerConfig.set_dynamic` keeps it current)."""

    def __init__(self) -> None:
        self.cluster: dict[str, str] = {}
        self.brokers: dict[int, dict[str, str]] = {}

    def get(self, name: str, broker_id: int | None = None) -> str:
        """``name``'s default as broker ``broker_id`` applies it (None: the cluster-wide default)."""
        values = self.cluster if broker_id is None else self.brokers.get(broker_id, self.cluster)
        return values.get(name, '')


def validate_topic_configs(configs: Mapping[str, str], error: Callable[[str], Exception]) -> dict[str, str]:
    """Topic config overrides as Kafka stores them; ``error(message)`` is raised for a bad value or, with Kafka's
    message, for a name that is no Kafka topic config."""
    normalized = {}
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None and name not in OTHER_TOPIC_CONFIGS:
            raise error(f'Unknown topic config name: {name}')
        try:
            normalized[name] = definition.normalize(value) if definition else value
        except ValueError as exc:
            raise error(str(exc)) from None
    return normalized
