"""Patched message classes: kafka-python's classes plus the extension tagged fields, and the new API.

Each patched class subclasses kafka-python's class of the same name, so kafka-python's metaclass loads the
same installed JSON spec; the class's ``json_patch`` first applies the parent's own patch (if it has one)
and then appends the rows of :data:`kafka_kip.protocol.extensions.EXTENSIONS`. Encoders and decoders are
still kafka-python's compiled per-version ones. kafka-python's process-wide ``ResponseClassRegistry`` is left
as it was (:mod:`kafka_kip._patch.response_registry`): only kafka_kip's own connections decode responses with
the patched classes (:data:`EXTENDED_RESPONSES`, :class:`kafka_kip.protocol.connection.KipProtocol`).

Values of extension fields default to -1 / False / None and are then not sent at all, which makes every
patched message byte-identical to kafka-python's when no extension value is set.
"""
from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import kafka.protocol.admin as _admin
import kafka.protocol.consumer as _consumer
import kafka.protocol.metadata as _metadata
import kafka.protocol.producer as _producer
import kafka.protocol.sasl as _sasl
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas import BaseField, StructField
from kafka.protocol.schemas.fields.codecs import UnsignedVarInt32
from kafka.protocol.schemas.fields.codecs.tagged_fields import TaggedFields

from kafka_kip._patch import response_registry

from .extensions import apply_extensions, extensions_for
from .kafka_versions import apply_newer_versions

_stock_response_classes = response_registry.snapshot()


def _json_patch(stock: type[ApiMessage], extend: Callable[[dict[str, Any], str], dict[str, Any]]) -> classmethod:
    """A ``json_patch`` classmethod: ``stock``'s own json_patch, then ``extend(json, stock's name)``."""
    own_patch = vars(stock).get('json_patch')

    def json_patch(cls: type, json: dict[str, Any]) -> dict[str, Any]:
        if own_patch is not None:
            json = own_patch.__func__(cls, json)
        return extend(json, stock.__name__)

    return classmethod(json_patch)


def _extended(stock: type[ApiMessage]) -> classmethod:
    """``stock``'s spec plus its extension fields (:mod:`.extensions`)."""
    return _json_patch(stock, apply_extensions)


def _newer(stock: type[ApiMessage]) -> classmethod:
    """``stock``'s spec extended to the Kafka 4.4 version kafka-python lacks (:mod:`.kafka_versions`)."""
    return _json_patch(stock, apply_newer_versions)


class MetadataResponse(_metadata.MetadataResponse):
    """MetadataResponse + ``max_partition_epoch`` and ``topics[].partitions[].partition_epoch`` (KIP-232)."""

    json_patch = _extended(_metadata.MetadataResponse)


class FetchResponse(_consumer.FetchResponse):
    """FetchResponse + ``responses[].partitions[].partition_epoch`` (KIP-232)."""

    json_patch = _extended(_consumer.FetchResponse)


class ListOffsetsResponse(_consumer.ListOffsetsResponse):
    """ListOffsetsResponse + ``topics[].partitions[].partition_epoch`` (KIP-232)."""

    json_patch = _extended(_consumer.ListOffsetsResponse)


class OffsetCommitRequest(_consumer.OffsetCommitRequest):
    """OffsetCommitRequest + per partition ``partition_epoch`` (KIP-232), ``commit_timestamp`` (KIP-320).

    ``commit_timestamp`` reuses kafka-python's field of that name (untagged in v1), tagged from v8.
    """

    json_patch = _extended(_consumer.OffsetCommitRequest)


class OffsetFetchResponse(_consumer.OffsetFetchResponse):
    """OffsetFetchResponse + per partition ``partition_epoch`` (KIP-232) and ``commit_timestamp`` (KIP-320).

    Both partition structs carry them: ``topics[].partitions[]`` (v6-7) and
    ``groups[].topics[].partitions[]`` (v8+).
    """

    json_patch = _extended(_consumer.OffsetFetchResponse)


class ProduceRequest(_producer.ProduceRequest):
    """ProduceRequest + ``use_offset`` (KIP-391) and ``topic_data[].partition_count`` (KIP-253)."""

    json_patch = _extended(_producer.ProduceRequest)


class ProduceResponse(_producer.ProduceResponse):
    """ProduceResponse + ``responses[].partition_responses[].log_end_offset`` (KIP-391)."""

    json_patch = _extended(_producer.ProduceResponse)


class HeartbeatRequest(_consumer.HeartbeatRequest):
    """HeartbeatRequest + ``need_positions`` and ``positions`` (KIP-253).

    ``need_positions``: ``[NeedPositionTopic(topic, partitions=[int])]``;
    ``positions``: ``[PositionTopic(topic, partitions=[PartitionPosition(partition_index, offset)])]``.
    """

    json_patch = _extended(_consumer.HeartbeatRequest)


class HeartbeatResponse(_consumer.HeartbeatResponse):
    """HeartbeatResponse + ``positions`` and ``need_positions`` (KIP-253), shaped as in the request."""

    json_patch = _extended(_consumer.HeartbeatResponse)


class ApiVersionsRequest(_metadata.ApiVersionsRequest):
    """ApiVersionsRequest up to v5: ``cluster_id`` and ``node_id`` the client means to reach (KIP-1242)."""

    json_patch = _newer(_metadata.ApiVersionsRequest)


class ApiVersionsResponse(_metadata.ApiVersionsResponse):
    """ApiVersionsResponse up to v5 (as v4; REBOOTSTRAP_REQUIRED may answer a v5 request)."""

    json_patch = _newer(_metadata.ApiVersionsResponse)


class TxnOffsetCommitRequest(_producer.TxnOffsetCommitRequest):
    """TxnOffsetCommitRequest up to v6: topics by ``topic_id`` instead of name (KIP-1319)."""

    json_patch = _newer(_producer.TxnOffsetCommitRequest)


class TxnOffsetCommitResponse(_producer.TxnOffsetCommitResponse):
    """TxnOffsetCommitResponse up to v6: topics by ``topic_id`` (KIP-1319)."""

    json_patch = _newer(_producer.TxnOffsetCommitResponse)


class DeleteGroupsRequest(_admin.DeleteGroupsRequest):
    """DeleteGroupsRequest up to v3 (as v2)."""

    json_patch = _newer(_admin.DeleteGroupsRequest)


class DeleteGroupsResponse(_admin.DeleteGroupsResponse):
    """DeleteGroupsResponse up to v3: an ``error_message`` per group."""

    json_patch = _newer(_admin.DeleteGroupsResponse)


# load_json=<package> makes kafka-python read <ClassName>.json from this package instead of its own.
class LeaderEpochsForPartitionRequest(ApiMessage, load_json=__package__):
    """KIP-253: ask the group coordinator for the prior partitions of (new) partitions. API key 10000."""


class LeaderEpochsForPartitionResponse(ApiMessage, load_json=__package__):
    """KIP-253: per partition, its prior partitions and their leader epochs at the expansion."""


def _own_extensions(name: str) -> classmethod:
    """A ``json_patch`` classmethod adding the extension fields of message ``name`` (a spec of this package)."""
    return classmethod(lambda cls, json: apply_extensions(json, name))


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=__package__):
    """KIP-848: a consumer-protocol member's heartbeat (join, reconcile, leave). API key 68; kafka-python has no spec.

    + ``need_positions`` and ``positions`` (KIP-253), shaped as in :class:`HeartbeatRequest`.
    """

    json_patch = _own_extensions('ConsumerGroupHeartbeatRequest')


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=__package__):
    """KIP-848: the member's epoch, the heartbeat interval and (when it changed) its assignment.

    + ``positions`` and ``need_positions`` (KIP-253), shaped as in :class:`HeartbeatResponse`.
    """

    json_patch = _own_extensions('ConsumerGroupHeartbeatResponse')


class ConsumerGroupDescribeRequest(ApiMessage, load_json=__package__):
    """KIP-848: describe consumer-protocol groups. API key 69."""


class ConsumerGroupDescribeResponse(ApiMessage, load_json=__package__):
    """KIP-848: per group its epochs, assignor and members with current and target assignments."""


#: API key of LeaderEpochsForPartition (from a range no Apache Kafka API uses).
LEADER_EPOCHS_FOR_PARTITION_API_KEY: int = LeaderEpochsForPartitionRequest.API_KEY

PATCHED_MESSAGES: tuple[type[ApiMessage], ...] = (
    MetadataResponse, FetchResponse, ListOffsetsResponse, OffsetCommitRequest, OffsetFetchResponse,
    ProduceRequest, ProduceResponse, HeartbeatRequest, HeartbeatResponse,
)
NEW_MESSAGES: tuple[type[ApiMessage], ...] = (
    LeaderEpochsForPartitionRequest, LeaderEpochsForPartitionResponse,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
)
#: kafka-python's messages extended to the versions Apache Kafka 4.4 serves (:mod:`.kafka_versions`); only the
#: reference brokers use them.
NEWER_MESSAGES: tuple[type[ApiMessage], ...] = (
    ApiVersionsRequest, ApiVersionsResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    DeleteGroupsRequest, DeleteGroupsResponse,
)
response_registry.install(_stock_response_classes, PATCHED_MESSAGES + NEW_MESSAGES + NEWER_MESSAGES)
del _stock_response_classes


def _fit_reused_fields(cls: type[ApiMessage]) -> None:
    """Give every reused field (see ExtensionField.reuses) its exact versions and keep tags ascending.

    Both are instance attributes on kafka-python's field objects, which it consults when it builds a
    version's codec, so the compiled encoders and decoders pick them up.
    """
    for ext in extensions_for(cls.__name__):
        if ext.reuses:
            struct = cls._struct
            for step in ext.path:
                struct = struct.fields[BaseField.underscore_name(step)].array_of
            struct.fields[ext.attribute].for_version_q = ext.in_versions(cls._flexible_versions[0])
            struct.tagged_fields = _tags_ascending(struct)


def _tags_ascending(struct: StructField) -> Callable[[int], TaggedFields]:
    # The reused field sits before the appended ones in the spec; tagged fields go out in tag order.
    by_version: dict[int, TaggedFields] = {}
    unsorted = type(struct).tagged_fields

    def tagged_fields(version: int) -> TaggedFields:
        if version not in by_version:
            by_version[version] = TaggedFields(sorted(unsorted(struct, version)._fields, key=lambda f: f.tag))
        return by_version[version]

    return tagged_fields


def _inline_tagged_decode(struct: StructField) -> Callable[..., None]:
    """A ``_emit_tagged_decode`` for ``struct`` that decodes tagged fields inline, without buffer copies.

    kafka-python's compiled decoder handles an empty tag section inline but hands any non-empty one to a
    generic decoder that first copies the rest of the whole message. The extension fields make non-empty
    tag sections the common case (e.g. a partition epoch on every fetched partition), so the patched
    structs emit this instead: fixed-size fields are unpacked in place, other known fields decode from
    a copy of just their own bytes, unknown tags land in ``unknown_tags`` as kafka-python stores them.
    """
    def emit(ctx: Any, var_name: str, indent: str, version: int) -> None:
        count, tag, size = ctx.next_var('ntags'), ctx.next_var('tag'), ctx.next_var('tsize')
        ctx.globs['_BytesIO'] = io.BytesIO
        UnsignedVarInt32.emit_decode_from(ctx, count, indent)
        ctx.emit(indent, f'for _ in range({count}):')
        body = indent + '    '
        UnsignedVarInt32.emit_decode_from(ctx, tag, body)
        UnsignedVarInt32.emit_decode_from(ctx, size, body)
        known = struct.tagged_fields(version)._fields
        for i, field in enumerate(known):
            ctx.emit(body, f"{'elif' if i else 'if'} {tag} == {field.tag}:")
            if field.is_batchable():
                value = f"unpack_from('{field._type._be_fmt}', data, pos)[0]"
            else:
                field_var = ctx.next_var('tfield')
                ctx.globs[field_var] = field
                value = (f'{field_var}.decode(_BytesIO(bytes(data[pos:pos + {size}])), version={version},'
                         ' compact=True, tagged=None)')
            ctx.emit(body, f'    {var_name}.{field.name} = {value}')
            ctx.emit(body, f'    if {var_name}.tags is None: {var_name}.tags = set()')
            ctx.emit(body, f"    {var_name}.tags.add('{field.name}')")
        unknown = body
        if known:
            ctx.emit(body, 'else:')
            unknown += '    '
        ctx.emit(unknown, f'if {var_name}.unknown_tags is None: {var_name}.unknown_tags = {{}}')
        ctx.emit(unknown, f"{var_name}.unknown_tags['_%d' % {tag}] = bytes(data[pos:pos + {size}])")
        ctx.emit(body, f'pos += {size}')

    return emit


def _structs(struct: StructField) -> Iterator[StructField]:
    yield struct
    for field in struct.fields.values():
        if field.is_struct():
            yield from _structs(field)
        elif field.is_struct_array():
            yield from _structs(field.array_of)


for _cls in PATCHED_MESSAGES:
    _fit_reused_fields(_cls)
    for _struct in _structs(_cls._struct):
        # Instance attribute: StructField.emit_decode_from calls self._emit_tagged_decode(...).
        _struct._emit_tagged_decode = _inline_tagged_decode(_struct)
del _cls, _struct


def _lookup(is_request: Callable[[type[ApiMessage]], bool]) -> dict[int, type[ApiMessage]]:
    table: dict[int, type[ApiMessage]] = {}
    for module in (_admin, _consumer, _metadata, _producer, _sasl):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, ApiMessage) and is_request(obj):
                table[obj.API_KEY] = obj
    for cls in PATCHED_MESSAGES + NEW_MESSAGES + NEWER_MESSAGES:
        if is_request(cls):
            table[cls.API_KEY] = cls
    return dict(sorted(table.items()))


#: api_key -> request class for every API kafka-python knows plus LeaderEpochsForPartition and KIP-848's
#: (patched or newer-versioned class where one exists, kafka-python's class otherwise).
REQUESTS: dict[int, type[ApiMessage]] = _lookup(lambda cls: cls.is_request())
#: api_key -> response class, built the same way as :data:`REQUESTS`.
RESPONSES: dict[int, type[ApiMessage]] = _lookup(lambda cls: not cls.is_request())
#: api_key -> response class for the APIs whose responses kafka_kip decodes with its own class.
EXTENDED_RESPONSES: dict[int, type[ApiMessage]] = {
    cls.API_KEY: cls for cls in PATCHED_MESSAGES + NEW_MESSAGES if not cls.is_request()}

__all__ = [
    'MetadataResponse', 'FetchResponse', 'ListOffsetsResponse', 'OffsetCommitRequest', 'OffsetFetchResponse',
    'ProduceRequest', 'ProduceResponse', 'HeartbeatRequest', 'HeartbeatResponse',
    'LeaderEpochsForPartitionRequest', 'LeaderEpochsForPartitionResponse',
    'ConsumerGroupHeartbeatRequest', 'ConsumerGroupHeartbeatResponse',
    'ConsumerGroupDescribeRequest', 'ConsumerGroupDescribeResponse',
    'ApiVersionsRequest', 'ApiVersionsResponse', 'TxnOffsetCommitRequest', 'TxnOffsetCommitResponse',
    'DeleteGroupsRequest', 'DeleteGroupsResponse', 'NEWER_MESSAGES',
    'LEADER_EPOCHS_FOR_PARTITION_API_KEY', 'PATCHED_MESSAGES', 'NEW_MESSAGES', 'REQUESTS', 'RESPONSES',
    'EXTENDED_RESPONSES',
]
