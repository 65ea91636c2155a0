"""The declarative table of Apache Kafka 4.4 message versions kafka-python's installed specs do not have yet.

Each row names a message, the first version kafka-python lacks and what that version changes (fields added
from it, fields it drops). The classes in :mod:`kafka_kip.protocol.messages` apply the rows to kafka-python's
own JSON specs, so nothing here is a copied spec; the reference brokers then serve the versions. When a
kafka-python release ships a version itself, :func:`apply_newer_versions` raises so that the row is removed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_kip._patch.rebind import KAFKA_PYTHON_VERSION, KafkaPythonChanged


@dataclass(frozen=True)
class AddedField:
    """A field (JSON spec; ``versions`` filled in) of the struct ``path`` leads to, placed after the field named
    ``after`` (None: last), as Kafka's spec orders it: the wire order is the order of the fields."""

    path: tuple[str, ...]
    spec: dict[str, Any]
    after: str | None = None


@dataclass(frozen=True)
class NewerVersion:
    """Version ``version`` of ``message``: ``added`` fields (from this version on) and ``dropped`` field names at
    their struct's path (their versions end before it)."""

    message: str
    version: int
    proposal: str
    added: tuple[AddedField, ...] = ()
    dropped: tuple[tuple[tuple[str, ...], str], ...] = ()


def _nullable_string(name: str, about: str) -> dict[str, Any]:
    return {'name': name, 'type': 'string', 'nullableVersions': '+', 'default': 'null', 'ignorable': True,
            'about': about}


_TOPIC_ID = {'name': 'TopicId', 'type': 'uuid', 'ignorable': True, 'about': 'The topic id.'}

#: Every newer version, one row each, in API key order.
NEWER_VERSIONS: tuple[NewerVersion, ...] = (
    NewerVersion('ApiVersionsRequest', 5, 'KIP-1242', added=(
        AddedField((), _nullable_string('ClusterId', 'The cluster the client means to reach (with NodeId), or null.')),
        AddedField((), {'name': 'NodeId', 'type': 'int32', 'default': -1, 'ignorable': True,
                        'about': 'The node the client means to reach (with ClusterId), or -1.'}),
    )),
    NewerVersion('ApiVersionsResponse', 5, 'KIP-1242'),
    NewerVersion('TxnOffsetCommitRequest', 6, 'KIP-1319', added=(AddedField(('Topics',), _TOPIC_ID, after='Name'),),
                 dropped=((('Topics',), 'Name'),)),
    NewerVersion('TxnOffsetCommitResponse', 6, 'KIP-1319', added=(AddedField(('Topics',), _TOPIC_ID, after='Name'),),
                 dropped=((('Topics',), 'Name'),)),
    NewerVersion('DeleteGroupsRequest', 3, 'Kafka 4.4'),
    NewerVersion('DeleteGroupsResponse', 3, 'Kafka 4.4', added=(
        AddedField(('Results',), _nullable_string('ErrorMessage', 'Why the group was not deleted, or null.')),)),
)


def newer_version(message: str) -> NewerVersion | None:
    """The row of ``message`` (a JSON spec / class name), if it has one."""
    return next((row for row in NEWER_VERSIONS if row.message == message), None)


def apply_newer_versions(json: dict[str, Any], message: str) -> dict[str, Any]:
    """Extend ``message``'s loaded JSON spec by its row's version, in place; return it."""
    row = newer_version(message)
    if row is None:
        return json
    low, _, high = json['validVersions'].partition('-')
    if int(high or low) != row.version - 1:
        raise KafkaPythonChanged(f'kafka-python {KAFKA_PYTHON_VERSION} ships {message} versions '
                                 f"{json['validVersions']}; kafka_kip declares v{row.version} itself: drop its row")
    json['validVersions'] = f'{low}-{row.version}'
    since = f'{row.version}+'
    for added in row.added:
        fields = _struct_fields(json, added.path)
        spec = dict(added.spec, versions=since, **({'nullableVersions': since} if 'nullableVersions' in added.spec
                                                  else {}))
        at = len(fields) if added.after is None else 1 + [f['name'] for f in fields].index(added.after)
        fields.insert(at, spec)
    for path, name in row.dropped:
        [old] = [f for f in _struct_fields(json, path) if f['name'] == name]
        first = old['versions'].rstrip('+').partition('-')[0]
        old['versions'] = f'{first}-{row.version - 1}'
        old['ignorable'] = True
    return json


def _struct_fields(json: dict[str, Any], path: tuple[str, ...]) -> list[dict[str, Any]]:
    fields = json['fields']
    for step in path:
        fields = next(f for f in fields if f['name'] == step)['fields']
    return fields


__all__ = ['AddedField', 'NewerVersion', 'NEWER_VERSIONS', 'newer_version', 'apply_newer_versions']
