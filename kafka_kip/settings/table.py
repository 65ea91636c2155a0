"""A component's settings as one table: each declared once, everything else generated from it.

The shape of Apache Kafka's ``ConfigDef`` (``define(name, type, default, validator, importance, doc)``):
a :class:`Setting` has a name, a type, a default, a doc and the values it accepts, plus each name the user
may spell it with: the CLI flag, the properties key, the Spark option. A :class:`SettingsTable` generates
from them the argparse flags (:meth:`~SettingsTable.add_arguments`), the typed values of a properties file
(:meth:`~SettingsTable.from_properties`) or of Spark options (:meth:`~SettingsTable.option`), and the
Markdown table in the docs (:meth:`~SettingsTable.markdown`, kept current by :mod:`kafka_kip.settings.docs`).
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_kip.settings.coerce import SettingError, to_bool, to_duration_ms, to_float, to_int, to_regex

STRING, INT, BOOL, FLOAT, DURATION, REGEX, CHOICE, JSON, SWITCH = (
    'string', 'int', 'bool', 'float', 'duration', 'regex', 'choice', 'json', 'switch')
#: How each type reads text (``where`` names the setting in errors). ``switch``: a flag without a value.
_READERS: dict[str, Callable[..., Any]] = {
    STRING: lambda raw, where, setting, error: str(raw).strip(),
    JSON: lambda raw, where, setting, error: str(raw).strip(),
    INT: lambda raw, where, setting, error: to_int(raw, where, setting.minimum, error),
    BOOL: lambda raw, where, setting, error: to_bool(raw, where, error),
    SWITCH: lambda raw, where, setting, error: to_bool(raw, where, error),
    FLOAT: lambda raw, where, setting, error: to_float(raw, where, error),
    DURATION: lambda raw, where, setting, error: to_duration_ms(raw, where, error),
    REGEX: lambda raw, where, setting, error: to_regex(raw, where, error),
    CHOICE: lambda raw, where, setting, error: setting.choose(raw, where, error),
}


@dataclass(frozen=True)
class Setting:
    """One setting: ``name`` is its Python keyword (``Mirror(offset_mode=...)``); ``flag``, ``key`` and
    ``option`` are how a command line, a properties file and Spark spell it (None: not settable there).

    ``default`` is the typed default (None: unset); ``shown_default`` is what the docs (Markdown) and
    ``--help`` say when that is not the value itself (``batch `earliest`, streaming `latest```). ``choices`` are
    every accepted spelling of a ``choice``; ``minimum`` bounds an ``int``. ``scope`` groups a component's
    settings (the mirror's ``flow``, ``copier``, ``process`` and ``command`` ones).
    """

    name: str
    type: str
    doc: str
    default: Any = None
    shown_default: str | None = None
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    flag: str | None = None
    key: str | None = None
    option: str | None = None
    metavar: str | None = None
    required: bool = False
    scope: str = ''

    def __post_init__(self) -> None:
        object.__setattr__(self, 'choices', tuple(str(choice) for choice in self.choices))  # enum members as words
        if self.type not in _READERS:
            raise ValueError(f'setting {self.name}: unknown type {self.type!r}; known: {sorted(_READERS)}')
        if (self.type == CHOICE) != bool(self.choices):
            raise ValueError(f'setting {self.name}: choices go with type choice, and only with it')

    def parse(self, raw: object, where: str, error: type[ValueError] = SettingError) -> Any:
        """``raw`` (text, or a value of the type) as this setting's type; ``error`` naming ``where`` if bad."""
        return _READERS[self.type](raw, where, self, error)

    def choose(self, raw: object, where: str, error: type[ValueError] = SettingError) -> str:
        """One of :attr:`choices`, as spelt (case and blanks as given are forgiven)."""
        text = str(raw).strip()
        lowered = {choice.lower(): choice for choice in self.choices}
        if text.lower() not in lowered:
            accepted = ' or '.join(self.choices) if len(self.choices) == 2 else f'one of {", ".join(self.choices)}'
            raise error(f'{where} must be {accepted}, got {raw!r}')
        return lowered[text.lower()]

    @property
    def default_text(self) -> str:
        """The default as the docs show it ('' when there is none)."""
        if self.shown_default is not None:
            return self.shown_default
        if self.default is None or self.type == SWITCH:
            return 'required' if self.required else ''
        if isinstance(self.default, bool):
            return str(self.default).lower()
        return str(self.default)

    def help(self) -> str:
        """``--help`` text: the doc without Markdown, the default and the properties key."""
        text, default = (words.replace('`', "'").replace('%', '%%') for words in (self.doc, self.default_text))
        notes = [f'default: {default}'] * bool(default and default != 'required') + [f'key {self.key}'] * bool(self.key)
        return f'{text} ({"; ".join(notes)})' if notes else text


class SettingsTable:
    """The settings of one component (``mirror``, ``spark-source``, ...), by name, flag, key and option."""

    def __init__(self, component: str, settings: tuple[Setting, ...]) -> None:
        self.component = component
        self.settings = settings
        self._by_name = {s.name: s for s in settings}
        self.by_key = {s.key: s for s in settings if s.key}
        self.by_flag = {s.flag: s for s in settings if s.flag}
        self.by_option = {s.option.lower(): s for s in settings if s.option}
        for attribute in ('name', 'key', 'flag', 'option'):
            spelt = [str(getattr(s, attribute)).lower() for s in settings if getattr(s, attribute)]
            if len(set(spelt)) != len(spelt):
                raise ValueError(f'{component}: two settings share a {attribute}: {spelt}')

    def __getitem__(self, name: str) -> Setting:
        return self._by_name[name]

    def __iter__(self) -> Iterator[Setting]:
        return iter(self.settings)

    def defaults(self) -> dict[str, Any]:
        """Each setting's typed default, by name."""
        return {s.name: s.default for s in self.settings}

    def scoped(self, scope: str) -> tuple[Setting, ...]:
        return tuple(s for s in self.settings if s.scope == scope)

    # -- the command line --------------------------------------------------------------------------

    def add_arguments(self, parser: argparse.ArgumentParser, *, defaults: bool) -> None:
        """One flag per setting that has one. ``defaults``: flags default to the setting's default (else None,
        so that a properties file can supply what no flag gave)."""
        for s in self.settings:
            if not s.flag:
                continue
            kwargs: dict[str, Any] = {'dest': s.name, 'help': s.help()}
            if s.type == SWITCH:
                parser.add_argument(s.flag, action='store_true', **kwargs)
                continue
            if s.choices:
                kwargs['choices'] = s.choices
            elif s.type in (INT, FLOAT):
                kwargs['type'] = int if s.type == INT else float
            if s.metavar and not s.choices:
                kwargs['metavar'] = s.metavar
            if s.required:
                kwargs['required'] = True
            elif defaults:
                kwargs['default'] = s.default
            parser.add_argument(s.flag, **kwargs)

    def from_flags(self, args: argparse.Namespace, scope: str | None = None) -> dict[str, tuple[Any, str]]:
        """The settings the flags gave (not None), typed, with the flag each came from."""
        return {s.name: (s.parse(getattr(args, s.name), s.flag), s.flag) for s in self.settings
                if s.flag and (scope is None or s.scope == scope) and getattr(args, s.name, None) is not None}

    # -- properties files and Spark options ------------------------------------------------------------

    def from_properties(self, properties: Mapping[str, str], prefix: str, origin: str,
                        scope: str | None = None) -> dict[str, tuple[Any, str]]:
        """The settings found as ``<prefix><key>`` in ``properties``, typed, with where each came from
        (``<origin>: <prefix><key>``)."""
        found = {}
        for s in self.settings:
            if s.key and (scope is None or s.scope == scope) and prefix + s.key in properties:
                where = f'{origin}: {prefix}{s.key}'
                found[s.name] = (s.parse(properties[prefix + s.key], where), where)
        return found

    def option(self, options: Mapping[str, str], name: str, error: type[ValueError] = SettingError) -> Any:
        """Spark option ``name`` (of a case-insensitive, lower-cased options dict), typed; its default if absent."""
        s = self._by_name[name]
        assert s.option is not None
        raw = options.get(s.option.lower())
        return s.default if raw is None else s.parse(raw, f'option {s.option}', error)

    def check_known(self, options: Mapping[str, str], prefixes: tuple[str, ...], role: str,
                    extra: Mapping[str, str] | None = None, error: type[ValueError] = SettingError) -> None:
        """Refuse a Spark option that is neither in the table, in ``extra`` (lower -> spelt) nor under a prefix."""
        known = {**{key: s.option for key, s in self.by_option.items()}, **dict(extra or {})}
        for key in options:
            if key in known or key.startswith(prefixes):
                continue
            listed = ', '.join(sorted(set(known.values())) + [p + '*' for p in prefixes])
            raise error(f'unknown option {key!r} for the {role}; known options: {listed}')

    # -- docs ----------------------------------------------------------------------------------------

    def markdown(self) -> str:
        """The docs table: a column for each way the settings are spelt, the default, the doc."""
        columns = [(title, attribute) for title, attribute in (
            ('properties key', 'key'), ('option', 'option'), ('flag', 'flag')) if any(
                getattr(s, attribute) for s in self.settings)]
        rows = [f'| {" | ".join(title for title, _ in columns)} | default | |',
                f'|{"---|" * (len(columns) + 2)}']
        for s in self.settings:
            names = [f'`{getattr(s, attribute)}`' if getattr(s, attribute) else '' for _, attribute in columns]
            default = s.default_text if s.shown_default is not None or s.default is None else f'`{s.default_text}`'
            rows.append(f'| {" | ".join(names)} | {default} | {s.doc.replace("|", chr(92) + "|")} |')
        return '\n'.join(rows) + '\n'
