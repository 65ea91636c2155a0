"""The declarative table of wire extensions: tagged fields added to kafka-python's own message specs.

Every extension field is a *tagged* field (KIP-482) on the flexible versions of an existing message, with a
tag from the reserved range starting at 10000, so a peer that does not know it skips it. The patched
message classes in :mod:`kafka_kip.protocol.messages` are built from kafka-python's installed JSON specs
plus this table; nothing here is a copied spec.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Lowest tag of the range reserved for this project's extension fields.
EXTENSION_TAG_BASE = 10000


@dataclass(frozen=True)
class ExtensionField:
    """One added tagged field, described in kafka-python's JSON spec vocabulary.

    ``path`` holds the JSON names of the struct (array) fields leading from the top level of the message
    to the struct that gains the field; ``()`` is the top level. ``fields`` describes the members of a
    struct-array field (JSON dicts without ``versions``; those are filled in from the message).
    ``reuses`` names the versions (``"a"`` or ``"a-b"``) in which kafka-python's spec already has a field
    of this name and type, untagged: the extension then extends that field to the flexible versions as a
    tagged field instead of adding a second one (see :meth:`in_versions`).
    """

    message: str
    path: tuple[str, ...]
    name: str
    type: str
    tag: int
    default: str
    proposal: str
    about: str
    fields: tuple[dict[str, Any], ...] = ()
    reuses: str = ''

    @property
    def attribute(self) -> str:
        """The Python attribute name kafka-python derives from the JSON name (snake_case)."""
        return re.sub(r'(?<!^)(?=[A-Z])', '_', self.name).lower()

    def in_versions(self, flexible_from: int) -> Callable[[int], bool]:
        """The field's version test when it reuses a field: its old versions, or any flexible version."""
        low, _, high = self.reuses.partition('-')
        old = range(int(low), int(high or low) + 1)
        return lambda version: version in old or version >= flexible_from

    def to_json(self, versions: str) -> dict[str, Any]:
        """The JSON field spec, tagged on ``versions`` (the message's flexible versions)."""
        spec: dict[str, Any] = {
            'name': self.name, 'type': self.type, 'versions': versions,
            'taggedVersions': versions, 'tag': self.tag, 'default': self.default,
            'about': f'{self.about} ({self.proposal})',
        }
        if self.default == 'null':
            spec['nullableVersions'] = versions
        if self.fields:
            spec['fields'] = [_with_versions(field, versions) for field in self.fields]
        return spec


def _with_versions(field: dict[str, Any], versions: str) -> dict[str, Any]:
    spec = dict(field, versions=versions)
    if 'fields' in spec:
        spec['fields'] = [_with_versions(member, versions) for member in spec['fields']]
    return spec


_TOPIC = {'name': 'Topic', 'type': 'string', 'about': 'The topic name.'}
_NEED_POSITIONS = (
    _TOPIC,
    {'name': 'Partitions', 'type': '[]int32', 'about': 'The partition indexes.'},
)
_POSITIONS = (
    _TOPIC,
    {'name': 'Partitions', 'type': '[]PartitionPosition', 'about': 'The partitions and their positions.',
     'fields': [
         {'name': 'PartitionIndex', 'type': 'int32', 'about': 'The partition index.'},
         {'name': 'Offset', 'type': 'int64', 'about': 'The position of the group on the partition.'},
     ]},
)

def _position_exchange(request: str, response: str, first_tag: int) -> tuple[ExtensionField, ...]:
    """KIP-253's four position-exchange fields of a heartbeat ``request`` / ``response`` pair, tags from
    ``first_tag``: the request's needs and positions, the response's positions and needs."""
    return (
        ExtensionField(request, (), 'NeedPositions', '[]NeedPositionTopic', first_tag, 'null', 'KIP-253',
                       'Partitions whose group position this member wants to learn.', _NEED_POSITIONS),
        ExtensionField(request, (), 'Positions', '[]PositionTopic', first_tag + 1, 'null', 'KIP-253',
                       "This member's positions on the partitions the coordinator asked for.", _POSITIONS),
        ExtensionField(response, (), 'Positions', '[]PositionTopic', first_tag + 2, 'null', 'KIP-253',
                       'The group positions on the partitions this member asked for.', _POSITIONS),
        ExtensionField(response, (), 'NeedPositions', '[]NeedPositionTopic', first_tag + 3, 'null', 'KIP-253',
                       'Partitions whose positions some member of the group wants to learn.', _NEED_POSITIONS),
    )


#: Every extension field, one row each. Tags are unique within the struct that holds them.
EXTENSIONS: tuple[ExtensionField, ...] = (
    ExtensionField('MetadataResponse', (), 'MaxPartitionEpoch', 'int32', 10000, '-1', 'KIP-232',
                   'The largest partition epoch the broker knows for the cluster, or -1.'),
    ExtensionField('MetadataResponse', ('Topics', 'Partitions'), 'PartitionEpoch', 'int32', 10001, '-1',
                   'KIP-232', 'The epoch of the partition (changes when the topic is recreated), or -1.'),
    ExtensionField('FetchResponse', ('Responses', 'Partitions'), 'PartitionEpoch', 'int32', 10010, '-1',
                   'KIP-232', 'The epoch of the fetched partition, or -1.'),
    ExtensionField('ListOffsetsResponse', ('Topics', 'Partitions'), 'PartitionEpoch', 'int32', 10020, '-1',
                   'KIP-232', 'The epoch of the partition the offset belongs to, or -1.'),
    ExtensionField('OffsetCommitRequest', ('Topics', 'Partitions'), 'PartitionEpoch', 'int32', 10030, '-1',
                   'KIP-232', 'The epoch of the partition the committed offset belongs to, or -1.'),
    ExtensionField('OffsetCommitRequest', ('Topics', 'Partitions'), 'CommitTimestamp', 'int64', 10031, '-1',
                   'KIP-320', 'The timestamp of the committed record (for reset by timestamp), or -1.',
                   reuses='1'),
    ExtensionField('OffsetFetchResponse', ('Topics', 'Partitions'), 'PartitionEpoch', 'int32', 10040, '-1',
                   'KIP-232', 'The epoch of the partition the committed offset belongs to, or -1.'),
    ExtensionField('OffsetFetchResponse', ('Topics', 'Partitions'), 'CommitTimestamp', 'int64', 10041, '-1',
                   'KIP-320', 'The committed record timestamp, or -1.'),
    ExtensionField('OffsetFetchResponse', ('Groups', 'Topics', 'Partitions'), 'PartitionEpoch', 'int32',
                   10040, '-1', 'KIP-232', 'The epoch of the partition of the committed offset, or -1.'),
    ExtensionField('OffsetFetchResponse', ('Groups', 'Topics', 'Partitions'), 'CommitTimestamp', 'int64',
                   10041, '-1', 'KIP-320', 'The committed record timestamp, or -1.'),
    ExtensionField('ProduceRequest', (), 'UseOffset', 'bool', 10050, 'false', 'KIP-391',
                   'True if the broker must write the records at the offsets they carry.'),
    ExtensionField('ProduceRequest', ('TopicData',), 'PartitionCount', 'int32', 10051, '-1', 'KIP-253',
                   'The partition count of the topic the producer partitioned with, or -1.'),
    ExtensionField('ProduceResponse', ('Responses', 'PartitionResponses'), 'LogEndOffset', 'int64', 10052,
                   '-1', 'KIP-391', 'The log end offset of the partition after the produce, or -1.'),
    # KIP-253's position exchange, for classic members and for KIP-848 members (docs/PROTOCOL.md).
    *_position_exchange('HeartbeatRequest', 'HeartbeatResponse', 10060),
    *_position_exchange('ConsumerGroupHeartbeatRequest', 'ConsumerGroupHeartbeatResponse', 10064),
)


def extensions_for(message: str) -> tuple[ExtensionField, ...]:
    """The extension fields of ``message`` (a JSON spec / class name), in table order."""
    return tuple(ext for ext in EXTENSIONS if ext.message == message)


def apply_extensions(json: dict[str, Any], message: str) -> dict[str, Any]:
    """Add ``message``'s extension fields to its (already loaded) JSON spec, in place; return it.

    A reused field keeps its place and gets ``versions`` "<first old version>+"; the caller must then
    install :meth:`ExtensionField.in_versions` on the built field to exclude the versions in between.
    """
    versions = json['flexibleVersions']
    for ext in extensions_for(message):
        fields = json['fields']
        for step in ext.path:
            fields = next(field for field in fields if field['name'] == step)['fields']
        same_name = [field for field in fields if field['name'] == ext.name]
        if any(field.get('tag') == ext.tag for field in fields) or bool(same_name) != bool(ext.reuses):
            raise ValueError(f"{message}: {'/'.join(ext.path)}/{ext.name} collides with an existing field")
        if same_name:
            old = same_name[0]
            if (old['versions'], old['type']) != (ext.reuses, ext.type):
                raise ValueError(f'{message}: {ext.name} is not {ext.type} in versions {ext.reuses}')
            old.update(ext.to_json(versions), versions=ext.reuses.partition('-')[0] + '+')
        else:
            fields.append(ext.to_json(versions))
    return json
