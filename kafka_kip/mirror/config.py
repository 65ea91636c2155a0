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

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
#: Settings of a flow: properties key -> ``Mirror`` keyword.
FLOW_SETTINGS = {
    'topics': 'topics', 'groups': 'groups', 'offset.mode': 'offset_mode', 'on.truncation': 'on_truncation',
    'isolation.level': 'isolation_level', 'topic.prefix': 'target_prefix', 'offset.map.topic': 'offset_map_topic',
    'sync.topic.configs': 'sync_topic_configs', 'group.sync.interval.ms': 'group_sync_interval_ms',
    'refresh.topics.interval.ms': 'topic_refresh_interval_ms', 'shutdown.timeout.ms': 'shutdown_timeout_ms',
}
_INTEGER_SETTINGS = {'group_sync_interval_ms', 'topic_refresh_interval_ms', 'shutdown_timeout_ms'}
#: Copier settings the properties file may set (``Mirror(copier_configs=...)``).
COPIER_SETTINGS = {'max.alignment.records': 'max_alignment_records'}
#: Settings of the process (not of a flow).
PROCESS_SETTINGS = {'metrics.port': 'metrics_port', 'metrics.host': 'metrics_host'}
_MM2_KEYS = {'clusters', 'replication.policy.separator'}
_INTEGER_CLIENT_CONFIGS = {
    'request_timeout_ms', 'reconnect_backoff_ms', 'reconnect_backoff_max_ms', 'metadata_max_age_ms',
    'connections_max_idle_ms', 'max_in_flight_requests_per_connection', 'receive_message_max_bytes',
    'socket_connection_setup_timeout_ms', 'socket_connection_setup_timeout_max_ms',
}
#: The flag of each setting that has one (bad values are reported naming it).
_FLAGS = {'source': '--source', 'target': '--target', 'topics': '--topics', 'groups': '--group-sync',
          'on_truncation': '--on-truncation', 'offset_mode': '--offset-mode', 'isolation_level': '--isolation-level',
          'target_prefix': '--topic-prefix', 'shutdown_timeout_ms': '--shutdown-timeout-ms'}
_REGEX_SETTINGS = ('topics', 'groups')
#: The flow of a one-flow configuration.
SINGLE_FLOW = 'source->target'


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` text: ``key=value`` / ``key: value`` lines, ``#``/``!`` comments, ``\\`` joins."""
    out: dict[str, str] = {}
    pending = ''
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ''
        if not line or line[0] in '#!':
            continue
        if line.endswith('\\'):
            pending = line[:-1]
            continue
        match = re.match(r'([^=:\s]+)\s*[=:\s]\s*(.*)', line)
        if match is None:
            out[line] = ''
        else:
            out[match.group(1)] = match.group(2)
    return out


def _integer(value: str, where: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f'{where}: expected an integer, got {value!r}') from None


def _boolean(value: str, where: str) -> bool:
    text = value.strip().lower()
    if text not in ('true', 'false'):
        raise ValueError(f"{where}: expected 'true' or 'false', got {value!r}")
    return text == 'true'


def _regex(value: str, where: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f'{where}: invalid regular expression {value!r}: {exc}') from None
    return value


def _client_configs(properties: dict[str, str], prefix: str, origin: str) -> dict[str, Any]:
    """kafka-python connection configs from ``<prefix>.<java.style.key>`` properties."""
    configs: dict[str, Any] = {}
    for key, value in properties.items():
        if not key.startswith(prefix + '.') or key == prefix + '.bootstrap.servers':
            continue
        name = key[len(prefix) + 1:]
        if name == 'sasl.jaas.config':
            options = dict(_JAAS_OPTION.findall(value))
            configs['sasl_plain_username'] = options.get('username')
            configs['sasl_plain_password'] = options.get('password')
            continue
        name = name.replace('.', '_')
        configs[name] = _integer(value, f'{origin}: {key}') if name in _INTEGER_CLIENT_CONFIGS else value
    return configs


def _flow_values(properties: dict[str, str], prefix: str, origin: str, out: dict[str, Any],
                 where: dict[str, str]) -> None:
    """The flow settings (and copier settings) found as ``<prefix><key>`` into ``out``, typed."""
    for key, name in FLOW_SETTINGS.items():
        if prefix + key in properties:
            value: Any = properties[prefix + key]
            where[name] = f'{origin}: {prefix}{key}'
            if name in _INTEGER_SETTINGS:
                value = _integer(value, where[name])
            elif name == 'sync_topic_configs':
                value = _boolean(value, where[name])
            out[name] = value
    copier = {name: _integer(properties[prefix + key], f'{origin}: {prefix}{key}')
              for key, name in COPIER_SETTINGS.items() if prefix + key in properties}
    if copier:
        out['copier_configs'] = {**out.get('copier_configs', {}), **copier}


def _apply_flags(args: argparse.Namespace, out: dict[str, Any], where: dict[str, str], *,
                 clusters: bool = False) -> None:
    for name, flag in _FLAGS.items():
        if getattr(args, name, None) is not None:
            if clusters and name in ('source', 'target'):
                raise ValueError(f'{flag} cannot be given with a --config that lists clusters (name each '
                                 'cluster\'s bootstrap.servers there)')
            out[name] = getattr(args, name)
            where[name] = flag
    for name in _REGEX_SETTINGS:
        if out.get(name) is not None:
            _regex(out[name], where[name])


def _read(args: argparse.Namespace) -> dict[str, str]:
    if not getattr(args, 'config', None):
        return {}
    with open(args.config, encoding='utf-8') as handle:
        return parse_properties(handle.read())


def process_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The process settings (``metrics_port``, ``metrics_host``) from the file and the flags."""
    properties = _read(args)
    out: dict[str, Any] = {'metrics_port': None, 'metrics_host': '0.0.0.0'}
    if 'metrics.port' in properties:
        out['metrics_port'] = _integer(properties['metrics.port'], f'{args.config}: metrics.port')
    if 'metrics.host' in properties:
        out['metrics_host'] = properties['metrics.host'].strip()
    if getattr(args, 'metrics_port', None) is not None:
        out['metrics_port'] = args.metrics_port
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
        'source': properties.get('source.bootstrap.servers'),
        'target': properties.get('target.bootstrap.servers'),
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
    enabled = [flow for flow in flows if _boolean(properties.get(f'{flow}.enabled', 'false'), f'{origin}: {flow}.enabled')]
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
