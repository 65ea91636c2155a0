"""``kafka-kip mirror``: the command line of the replicator.

Settings come from flags or from a properties file (``--config``) laid out as MirrorMaker users expect:
``source.``/``target.``-prefixed client settings (``source.bootstrap.servers``,
``target.security.protocol``, ``source.sasl.jaas.config``, ...) plus ``topics``, ``groups``,
``offset.mode``, ``on.truncation``, ``isolation.level``, ``topic.prefix``, ``offset.map.topic``,
``sync.topic.configs``, ``group.sync.interval.ms``, ``refresh.topics.interval.ms`` and ``max.alignment.records``
(checked mode's placeholder budget). Flags win over the file.

The exit code is 0 when every matching source partition was copied (and every group synced), 2 when
some were not (see the reported incidents) and 1 when the mirror could not run.
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from typing import Any

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
_TOP_LEVEL = {
    'topics': 'topics', 'groups': 'groups', 'offset.mode': 'offset_mode', 'on.truncation': 'on_truncation',
    'isolation.level': 'isolation_level', 'topic.prefix': 'target_prefix', 'offset.map.topic': 'offset_map_topic',
    'sync.topic.configs': 'sync_topic_configs',
    'group.sync.interval.ms': 'group_sync_interval_ms', 'refresh.topics.interval.ms': 'topic_refresh_interval_ms',
}
_INTEGER_SETTINGS = {'group_sync_interval_ms', 'topic_refresh_interval_ms'}
#: Copier settings the properties file may set (``Mirror(copier_configs=...)``).
_COPIER_SETTINGS = {'max.alignment.records': 'max_alignment_records'}
_INTEGER_CLIENT_CONFIGS = {
    'request_timeout_ms', 'reconnect_backoff_ms', 'reconnect_backoff_max_ms', 'metadata_max_age_ms',
    'connections_max_idle_ms', 'max_in_flight_requests_per_connection', 'receive_message_max_bytes',
    'socket_connection_setup_timeout_ms', 'socket_connection_setup_timeout_max_ms',
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``mirror`` subcommand's options (and its description: this module's docstring)."""
    parser.description = __doc__.split('\n', 1)[1].strip().replace('``', "'")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument('--source', metavar='BOOTSTRAP', help='source bootstrap servers (host:port,...)')
    parser.add_argument('--target', metavar='BOOTSTRAP', help='target bootstrap servers (host:port,...)')
    parser.add_argument('--topics', metavar='REGEX', help='source topics to mirror, a regex on the whole name '
                                                          '(default: every non-internal topic)')
    parser.add_argument('--group-sync', metavar='GROUPS', dest='groups',
                        help='regex of source consumer groups whose committed offsets are copied to the target')
    parser.add_argument('--on-truncation', choices=('stop', 'closest', 'fail', 'none'),
                        help='when the source truncates below what was copied: stop the partition (default; also '
                             "spelt fail or none, as Spark's onTruncation and the consumer's reset policy) or "
                             'continue from the truncation point')
    parser.add_argument('--offset-mode', choices=('auto', 'broker', 'checked', 'translated', 'off'),
                        help='per partition; auto (default): broker (produce with offsets, kip.391) where the target '
                             'supports it, else checked (the same offsets on a stock target) while the source '
                             'allows it, else translated (target offsets mapped exactly, the map kept on the '
                             "target); 'off' is the old name of translated")
    parser.add_argument('--isolation-level', choices=('read_committed', 'read_uncommitted'),
                        help='read_committed (default): records of aborted transactions are not copied')
    parser.add_argument('--topic-prefix', dest='target_prefix', metavar='PREFIX',
                        help='prefix of target topic names (default: none, same names)')
    parser.add_argument('--stop-at-end', action='store_true',
                        help="copy up to the source's end offsets as of the start, then exit")
    parser.add_argument('--json', action='store_true', help='print the summary as JSON (no live progress)')
    parser.add_argument('--config', metavar='FILE', help='MirrorMaker-style properties file')


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


#: The flag of each setting that has one (bad values are reported naming it).
_FLAGS = {'source': '--source', 'target': '--target', 'topics': '--topics', 'groups': '--group-sync',
          'on_truncation': '--on-truncation', 'offset_mode': '--offset-mode', 'isolation_level': '--isolation-level',
          'target_prefix': '--topic-prefix'}
_REGEX_SETTINGS = ('topics', 'groups')


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """``Mirror`` keyword arguments from the properties file and the flags (flags win).

    A bad value raises ValueError naming the flag or the ``--config`` key it came from.
    """
    properties: dict[str, str] = {}
    if args.config:
        with open(args.config, encoding='utf-8') as handle:
            properties = parse_properties(handle.read())
    unknown = [key for key in properties if key not in _TOP_LEVEL and key not in _COPIER_SETTINGS
               and not key.startswith(('source.', 'target.'))]
    if unknown:
        raise ValueError(f'{args.config}: unknown setting(s) {unknown}; expected source.*, target.* or '
                         f'{sorted([*_TOP_LEVEL, *_COPIER_SETTINGS])}')
    out: dict[str, Any] = {
        'source': properties.get('source.bootstrap.servers'),
        'target': properties.get('target.bootstrap.servers'),
        'source_configs': _client_configs(properties, 'source', args.config),
        'target_configs': _client_configs(properties, 'target', args.config),
    }
    copier = {name: _integer(properties[key], f'{args.config}: {key}') for key, name in _COPIER_SETTINGS.items()
              if key in properties}
    if copier:
        out['copier_configs'] = copier
    origin: dict[str, str] = {}
    for key, name in _TOP_LEVEL.items():
        if key in properties:
            value: Any = properties[key]
            where = origin[name] = f'{args.config}: {key}'
            if name in _INTEGER_SETTINGS:
                value = _integer(value, where)
            elif name == 'sync_topic_configs':
                value = _boolean(value, where)
            out[name] = value
    for name, flag in _FLAGS.items():
        if getattr(args, name) is not None:
            out[name] = getattr(args, name)
            origin[name] = flag
    for name in _REGEX_SETTINGS:
        if out.get(name) is not None:
            _regex(out[name], origin[name])
    for name in ('source', 'target'):
        if not out.get(name):
            raise ValueError(f'no {name} cluster: give --{name} or {name}.bootstrap.servers in --config')
    return out


def run_mirror(args: argparse.Namespace) -> int:
    """Run the mirror as the flags say; returns the exit code."""
    from kafka.errors import KafkaError

    from kafka_kip.mirror.mirror import Mirror
    from kafka_kip.mirror.progress import LiveProgress, render_summary

    try:
        options = settings(args)
    except (OSError, ValueError) as exc:
        print(f'kafka-kip mirror: {exc}', file=sys.stderr)
        return 1
    progress = LiveProgress(sys.stdout, enabled=False if args.json else None)
    mirror = Mirror(on_incident=progress.incident, **options)

    def stop(signum: int, frame: Any) -> None:
        # a second signal abandons the writes in progress
        mirror.stop(flush=not mirror.stopping)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        summary = mirror.run(stop_at_end=args.stop_at_end, on_progress=progress)
    except (KafkaError, OSError, ValueError) as exc:
        progress.close()
        print(f'kafka-kip mirror: {type(exc).__name__}: {exc}', file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        mirror.close()
    progress.close()
    print(json.dumps(summary.to_dict(), indent=2) if args.json else render_summary(summary))
    if args.stop_at_end and not summary.partitions:
        print(f'kafka-kip mirror: no source topic matches {options.get("topics", ".*")!r} (--topics); nothing '
              'was copied', file=sys.stderr)
        return 1
    return summary.exit_code
