"""The mirror's settings from flags and a MirrorMaker-style properties file: one flow, or several.

Two layouts, as MirrorMaker users know them:

* **one flow**: ``source.bootstrap.servers``, ``target.bootstrap.servers``, ``source.``/``target.``-prefixed
  client settings (``target.security.protocol``, ``source.sasl.jaas.config``, ...) and the flow settings
  (:data:`FLOW_SETTINGS`: ``topics``, ``groups``, ``offset.mode``, ...);
* **several flows** (MirrorMaker 2's ``connect-mirror-maker.properties``): ``clusters = a, b``,
  ``a.bootstrap.servers``, ``a.``-prefixed client settings of cluster ``a``, ``a->b.enabled = true``, and the
  flow settings at the top (every flow) or as ``a->b.<setting>`` (that flow). A flow's target topics are named
  ``a.<topic>`` by default (MirrorMaker 2's DefaultReplicationPolicy, ``replication.policy.separator``), and a
  flow never copies back what a flow in the other direction wrote: ``a->b`` skips the topics of ``a`` that start
  with ``b->a``'s prefix.

Process settings (``metrics.port``, ``metrics.host``) are top-level only. Flags win over the file and apply to
every flow. A bad value raises ValueError naming the flag or key it came from.
"""
from __future__ import annotations

import argparse
import re
from typing import Any

from kafka_kip.metadata import KipConnectionManager
from kafka_kip.mirror.client import CONNECTION_CONFIGS
from kafka_kip.mirror.offset_map import MAP_TOPIC
from kafka_kip.mirror.settings import CopySettings
from kafka_kip.policies import (
    AUTO,
    OFF,
    OFFSET_MODE_DOC,
    OFFSET_MODES,
    ON_TRUNCATION_DOC,
    READ_COMMITTED,
    STOP,
    TRUNCATION_SPELLINGS,
    IsolationLevel,
)
from kafka_kip.settings import Setting, SettingsTable, parse_properties, to_bool
from kafka_kip.settings.java_clients import client_configs
from kafka_kip.settings.table import BOOL, CHOICE, INT, REGEX, STRING, SWITCH

_CLUSTER, _FLOW, _COPIER, _PROCESS, _COMMAND = 'cluster', 'flow', 'copier', 'process', 'command'

#: Every setting of ``kafka-kip mirror``: its flag, its key in a properties file, its ``Mirror`` keyword.
MIRROR_SETTINGS = SettingsTable('mirror', (
    Setting('source', STRING, 'source bootstrap servers (`host:port,...`); several flows: `<alias>.bootstrap.servers`',
            flag='--source', key='source.bootstrap.servers', metavar='BOOTSTRAP', scope=_CLUSTER),
    Setting('target', STRING, 'target bootstrap servers (`host:port,...`)',
            flag='--target', key='target.bootstrap.servers', metavar='BOOTSTRAP', scope=_CLUSTER),
    Setting('topics', REGEX, 'source topics to mirror, a regex on the whole name', '.*',
            shown_default='`.*` (every non-internal topic)', flag='--topics', key='topics', metavar='REGEX',
            scope=_FLOW),
    Setting('groups', REGEX, 'regex of source consumer groups whose committed offsets are copied to the target',
            flag='--group-sync', key='groups', metavar='GROUPS', scope=_FLOW),
    Setting('offset_mode', CHOICE, OFFSET_MODE_DOC, AUTO, choices=(*OFFSET_MODES, OFF), flag='--offset-mode',
            key='offset.mode', scope=_FLOW),
    Setting('on_truncation', CHOICE, ON_TRUNCATION_DOC, STOP, choices=tuple(TRUNCATION_SPELLINGS),
            flag='--on-truncation', key='on.truncation', scope=_FLOW),
    Setting('isolation_level', CHOICE, '`read_committed`: records of aborted transactions are not copied',
            READ_COMMITTED, choices=tuple(IsolationLevel), flag='--isolation-level', key='isolation.level',
            scope=_FLOW),
    Setting('target_prefix', STRING, 'prefix of target topic names (several flows: `<source alias><separator>`)',
            '', shown_default='none (same names)', flag='--topic-prefix', key='topic.prefix', metavar='PREFIX',
            scope=_FLOW),
    Setting('offset_map_topic', STRING, 'the target topic of the offset map (translated mode)', MAP_TOPIC,
            key='offset.map.topic', scope=_FLOW),
    Setting('sync_topic_configs', BOOL, "copy the source topics' configs to the target topics", True,
            key='sync.topic.configs', scope=_FLOW),
    Setting('group_sync_interval_ms', INT, 'ms between two syncs of the groups', 5000,
            key='group.sync.interval.ms', minimum=0, scope=_FLOW),
    Setting('topic_refresh_interval_ms', INT, 'ms between two looks for new or grown source topics', 60000,
            key='refresh.topics.interval.ms', minimum=0, scope=_FLOW),
    Setting('shutdown_timeout_ms', INT, 'after SIGTERM/SIGINT, finish the writes in flight and the last group sync '
            'within this bound; a second signal exits at once', 5000, flag='--shutdown-timeout-ms',
            key='shutdown.timeout.ms', metavar='MS', minimum=0, scope=_FLOW),
    Setting('max_alignment_records', INT, 'checked mode may move an empty target partition up to the source\'s '
            'first offset by writing at most this many placeholder records, deleted at once (docs/KIP-391.md)',
            CopySettings.max_alignment_records, key='max.alignment.records', minimum=0, scope=_COPIER),
    Setting('metrics_port', INT, 'serve OpenMetrics/Prometheus metrics at `http://HOST:PORT/metrics` (0: any free '
            'port, announced on stderr)', shown_default='none (no metrics)', flag='--metrics-port', key='metrics.port',
            metavar='PORT', scope=_PROCESS),
    Setting('metrics_host', STRING, 'the address the metrics are served on', '0.0.0.0', key='metrics.host',
            scope=_PROCESS),
    Setting('stop_at_end', SWITCH, "copy up to the source's end offsets as of the start, then exit",
            flag='--stop-at-end', scope=_COMMAND),
    Setting('json', SWITCH, 'print only the summary, as JSON, on stdout; incidents and log lines go to stderr as '
            'one JSON object per line as they happen (no live progress)', flag='--json', scope=_COMMAND),
    Setting('config', STRING, 'MirrorMaker-style properties file (one flow, or several: `clusters = a, b`, '
            '`a->b.enabled = true`, ...)', flag='--config', metavar='FILE', scope=_COMMAND),
))
#: Settings of a flow: properties key -> ``Mirror`` keyword.
FLOW_SETTINGS = {s.key: s.name for s in MIRROR_SETTINGS.scoped(_FLOW)}
#: Copier settings the properties file may set (``Mirror(copier_configs=...)``).
COPIER_SETTINGS = {s.key: s.name for s in MIRROR_SETTINGS.scoped(_COPIER)}
#: Settings of the process (not of a flow).
PROCESS_SETTINGS = {s.key: s.name for s in MIRROR_SETTINGS.scoped(_PROCESS)}
_MM2_KEYS = {'clusters', 'replication.policy.separator'}
#: kafka-python's defaults of the connection settings ``source.*`` / ``target.*`` may set (typed as they are).
_CONNECTION_DEFAULTS = {k: v for k, v in KipConnectionManager.DEFAULT_CONFIG.items() if k in CONNECTION_CONFIGS}
#: The flow of a one-flow configuration.
SINGLE_FLOW = 'source->target'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of every :data:`MIRROR_SETTINGS` entry that has one (None when not given: the file may)."""
    MIRROR_SETTINGS.add_arguments(parser, defaults=False)


def _client_configs(properties: dict[str, str], prefix: str, origin: str) -> dict[str, Any]:
    """kafka-python connection configs from ``<prefix>.<java.style.key>`` properties."""
    return client_configs(properties, prefix + '.', _CONNECTION_DEFAULTS, label=f'{origin}: ')


def _flow_values(properties: dict[str, str], prefix: str, origin: str, out: dict[str, Any],
                 where: dict[str, str]) -> None:
    """The flow settings (and copier settings) found as ``<prefix><key>`` into ``out``, typed."""
    for name, (value, found_in) in MIRROR_SETTINGS.from_properties(properties, prefix, origin, _FLOW).items():
        out[name], where[name] = value, found_in
    copier = {name: value for name, (value, _) in
              MIRROR_SETTINGS.from_properties(properties, prefix, origin, _COPIER).items()}
    if copier:
        out['copier_configs'] = {**out.get('copier_configs', {}), **copier}


def _apply_flags(args: argparse.Namespace, out: dict[str, Any], where: dict[str, str], *,
                 clusters: bool = False) -> None:
    for scope in (_CLUSTER, _FLOW):
        for name, (value, flag) in MIRROR_SETTINGS.from_flags(args, scope).items():
            if clusters and scope == _CLUSTER:
                raise ValueError(f'{flag} cannot be given with a --config that lists clusters (name each '
                                 'cluster\'s bootstrap.servers there)')
            out[name] = value
            where[name] = flag


def _read(args: argparse.Namespace) -> dict[str, str]:
    if not getattr(args, 'config', None):
        return {}
    with open(args.config, encoding='utf-8') as handle:
        return parse_properties(handle.read())


def process_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The process settings (``metrics_port``, ``metrics_host``) from the file and the flags."""
    properties = _read(args)
    out: dict[str, Any] = {s.name: s.default for s in MIRROR_SETTINGS.scoped(_PROCESS)}
    out.update({name: value for name, (value, _) in
                MIRROR_SETTINGS.from_properties(properties, '', args.config, _PROCESS).items()})
    out.update({name: value for name, (value, _) in MIRROR_SETTINGS.from_flags(args, _PROCESS).items()})
    port = out['metrics_port']
    if port is not None and not 0 <= port <= 65535:
        raise ValueError(f'metrics port must be 0..65535 (0: any free port), got {port}')
    return out


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """``Mirror`` keyword arguments of a one-flow configuration (see :func:`flow_settings`)."""
    flows = flow_settings(args)
    if list(flows) != [SINGLE_FLOW]:
        raise ValueError(f'{args.config} configures several flows ({", ".join(flows)}); use flow_settings')
    return flows[SINGLE_FLOW]


def flow_settings(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``Mirror`` keyword arguments of every enabled flow, by flow name (``a->b``; one flow: ``source->target``)."""
    properties = _read(args)
    if 'clusters' in properties:
        return _several_flows(args, properties)
    unknown = [key for key in properties if key not in FLOW_SETTINGS and key not in COPIER_SETTINGS
               and key not in PROCESS_SETTINGS and not key.startswith(('source.', 'target.'))]
    if unknown:
        raise ValueError(f'{args.config}: unknown setting(s) {unknown}; expected source.*, target.*, '
                         f'{sorted([*FLOW_SETTINGS, *COPIER_SETTINGS, *PROCESS_SETTINGS])} or (several flows) '
                         'clusters = a, b with a.bootstrap.servers, a->b.enabled, ...')
    out: dict[str, Any] = {
        **{name: value for name, (value, _) in MIRROR_SETTINGS.from_properties(properties, '', args.config,
                                                                                _CLUSTER).items()},
        'source_configs': _client_configs(properties, 'source', args.config),
        'target_configs': _client_configs(properties, 'target', args.config),
    }
    where: dict[str, str] = {}
    _flow_values(properties, '', args.config, out, where)
    _apply_flags(args, out, where)
    for name in ('source', 'target'):
        if not out.get(name):
            raise ValueError(f'no {name} cluster: give --{name} or {name}.bootstrap.servers in --config')
    return {SINGLE_FLOW: out}


def _several_flows(args: argparse.Namespace, properties: dict[str, str]) -> dict[str, dict[str, Any]]:
    origin = args.config
    aliases = [alias.strip() for alias in properties['clusters'].split(',') if alias.strip()]
    bad = [alias for alias in aliases if not re.fullmatch(r'[A-Za-z0-9_]+', alias)]
    if len(aliases) < 2 or bad:
        raise ValueError(f'{origin}: clusters: expected two or more aliases of letters, digits and _, separated by '
                         f'commas, got {properties["clusters"]!r}')
    separator = properties.get('replication.policy.separator', '.')
    flows = {f'{a}->{b}': (a, b) for a in aliases for b in aliases if a != b}
    flow_keys = {f'{flow}.{key}' for flow in flows for key in (*FLOW_SETTINGS, *COPIER_SETTINGS, 'enabled')}
    unknown = [key for key in properties if key not in _MM2_KEYS and key not in FLOW_SETTINGS and key not in
               COPIER_SETTINGS and key not in PROCESS_SETTINGS and key not in flow_keys
               and not (key.split('.', 1)[0] in aliases and '->' not in key.split('.', 1)[0])]
    if unknown:
        raise ValueError(f'{origin}: unknown setting(s) {unknown}; with clusters = {", ".join(aliases)} expected '
                         f'<alias>.bootstrap.servers and other <alias>.* client settings, <a>-><b>.enabled, '
                         f'<a>-><b>.<setting> or <setting> for {sorted([*FLOW_SETTINGS, *COPIER_SETTINGS])}, '
                         f'or {sorted([*PROCESS_SETTINGS, *_MM2_KEYS])}')
    for alias in aliases:
        if not properties.get(f'{alias}.bootstrap.servers'):
            raise ValueError(f'{origin}: no {alias}.bootstrap.servers for cluster {alias}')
    enabled = [flow for flow in flows if to_bool(properties.get(f'{flow}.enabled', 'false'), f'{origin}: {flow}.enabled')]
    if not enabled:
        raise ValueError(f'{origin}: no flow is enabled; set e.g. {aliases[0]}->{aliases[1]}.enabled = true')
    out: dict[str, dict[str, Any]] = {}
    for flow in enabled:
        source, target = flows[flow]
        kwargs: dict[str, Any] = {
            'source': properties[f'{source}.bootstrap.servers'], 'target': properties[f'{target}.bootstrap.servers'],
            'source_configs': _client_configs(properties, source, origin),
            'target_configs': _client_configs(properties, target, origin),
            'target_prefix': source + separator,
        }
        where: dict[str, str] = {}
        _flow_values(properties, '', origin, kwargs, where)
        _flow_values(properties, f'{flow}.', origin, kwargs, where)
        _apply_flags(args, kwargs, where, clusters=True)
        out[flow] = kwargs
    for flow in enabled:  # never copy back what the other direction wrote (MirrorMaker 2's cycle rule)
        source, target = flows[flow]
        back = f'{target}->{source}'
        if back in out:
            prefix = out[back]['target_prefix']
            if not prefix:
                raise ValueError(f'{origin}: {flow} and {back} both run, and {back} writes its topics under their own '
                                 f'names: {flow} would copy them back; give {back}.topic.prefix (default '
                                 f'{target}{separator})')
            out[flow]['exclude_prefixes'] = (*out[flow].get('exclude_prefixes', ()), prefix)
    return out
