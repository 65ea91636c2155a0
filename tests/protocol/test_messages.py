"""Patched message classes: byte-level round trips and compatibility with kafka-python's own classes."""
from __future__ import annotations

import io
import uuid
from typing import Any

import kafka.protocol.consumer as stock_consumer
import kafka.protocol.metadata as stock_metadata
import kafka.protocol.producer as stock_producer
import pytest
from kafka.protocol import api_header as stock_header
from kafka.protocol.api_header import ResponseClassRegistry
from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas import ArrayField, StructField

from kafka_kip._patch.rebind import KafkaPythonChanged
from kafka_kip.protocol import extensions, headers, messages
from kafka_kip.protocol.extensions import EXTENSIONS, ExtensionField, apply_extensions, extensions_for
from kafka_kip.protocol.kafka_versions import apply_newer_versions

SIMPLE_VALUES = {
    'int8': 1, 'int16': 2, 'uint16': 5, 'int32': 3, 'int64': 4, 'float64': 1.5, 'bool': True,
    'string': 's', 'bytes': b'b', 'records': b'r', 'uuid': uuid.UUID(int=1), 'bitfield': {3},
}


def _ext_names(cls: type[ApiMessage]) -> dict[tuple[str, ...], set[str]]:
    """JSON names of the extension fields of a patched class, per struct path (none for kafka-python's)."""
    names: dict[tuple[str, ...], set[str]] = {}
    for ext in extensions_for(cls.__name__) if cls in messages.PATCHED_MESSAGES else ():
        names.setdefault(ext.path, set()).add(ext.name)
    return names


def _build_fields(struct: StructField, version: int, path: tuple[str, ...], ext: dict,
                  with_ext: bool) -> dict:
    """A value for every in-version field of ``struct`` (extension fields only if ``with_ext``)."""
    vals = {}
    for field in struct._fields:
        if not field.for_version_q(version):
            continue
        if field._name in ext.get(path, ()) and not with_ext:
            continue
        vals[field.name] = _build_value(field, version, path + (field._name,), ext, with_ext)
    return vals


def _build_value(field: Any, version: int, path: tuple[str, ...], ext: dict, with_ext: bool) -> Any:
    if field.is_struct_array():
        return [field.data_class(version=version,
                                 **_build_fields(field.array_of, version, path, ext, with_ext))]
    if field.is_struct():
        return field.data_class(version=version, **_build_fields(field, version, path, ext, with_ext))
    if isinstance(field, ArrayField):
        return [SIMPLE_VALUES[field.array_of.type_str]]
    return SIMPLE_VALUES[field.type_str]


def build(cls: type[ApiMessage], version: int, with_ext: bool) -> Any:
    """A message of ``cls`` at ``version`` with every field set (non-default), extension fields optional."""
    return cls(version=version, **_build_fields(cls._struct, version, (), _ext_names(cls), with_ext))


def ext_values(msg: Any, ext: ExtensionField) -> list:
    """The values of ``ext`` on every struct instance that carries it in ``msg``."""
    objs = [msg]
    for step in ext.path:
        attribute = StructField.underscore_name(step)
        objs = [child for obj in objs for child in (getattr(obj, attribute) or [])]
    return [getattr(obj, ext.attribute) for obj in objs]


def strip_ext(value: Any, names: dict[tuple[str, ...], set[str]], path: tuple[str, ...] = ()) -> Any:
    """``to_dict()`` output without the extension fields."""
    if isinstance(value, list):
        return [strip_ext(item, names, path) for item in value]
    if not isinstance(value, dict):
        return value
    drop = {StructField.underscore_name(name) for name in names.get(path, ())}
    return {key: strip_ext(val, names, path + (_json_name(key),))
            for key, val in value.items() if key not in drop}


def _json_name(attribute: str) -> str:
    return ''.join(part.capitalize() for part in attribute.split('_'))


def flexible_versions(cls: type[ApiMessage]) -> range:
    return range(cls._flexible_versions[0], cls.max_version + 1)


CASES = [(cls, version) for cls in messages.PATCHED_MESSAGES for version in flexible_versions(cls)]
CASE_IDS = [f'{cls.__name__}-v{version}' for cls, version in CASES]
DEFAULTS = {'int32': -1, 'int64': -1, 'bool': False}


def test_patched_classes_subclass_kafka_python_and_cover_every_extension_row():
    stock = {cls.__name__: cls.__mro__[1] for cls in messages.PATCHED_MESSAGES}
    assert stock == {
        'MetadataResponse': stock_metadata.MetadataResponse, 'FetchResponse': stock_consumer.FetchResponse,
        'ListOffsetsResponse': stock_consumer.ListOffsetsResponse,
        'OffsetCommitRequest': stock_consumer.OffsetCommitRequest,
        'OffsetFetchResponse': stock_consumer.OffsetFetchResponse,
        'ProduceRequest': stock_producer.ProduceRequest, 'ProduceResponse': stock_producer.ProduceResponse,
        'HeartbeatRequest': stock_consumer.HeartbeatRequest,
        'HeartbeatResponse': stock_consumer.HeartbeatResponse,
    }
    own_specs = {'ConsumerGroupHeartbeatRequest', 'ConsumerGroupHeartbeatResponse'}  # KIP-848, specs of kafka_kip
    assert {ext.message for ext in EXTENSIONS} == set(stock) | own_specs
    assert len(EXTENSIONS) == 21
    assert all(ext.tag >= extensions.EXTENSION_TAG_BASE for ext in EXTENSIONS)


def test_extension_table_matches_the_shared_wire_names():
    rows = {(ext.message, '.'.join(StructField.underscore_name(p) for p in ext.path), ext.attribute): ext.tag
            for ext in EXTENSIONS}
    assert rows == {
        ('MetadataResponse', '', 'max_partition_epoch'): 10000,
        ('MetadataResponse', 'topics.partitions', 'partition_epoch'): 10001,
        ('FetchResponse', 'responses.partitions', 'partition_epoch'): 10010,
        ('ListOffsetsResponse', 'topics.partitions', 'partition_epoch'): 10020,
        ('OffsetCommitRequest', 'topics.partitions', 'partition_epoch'): 10030,
        ('OffsetCommitRequest', 'topics.partitions', 'commit_timestamp'): 10031,
        ('OffsetFetchResponse', 'topics.partitions', 'partition_epoch'): 10040,
        ('OffsetFetchResponse', 'topics.partitions', 'commit_timestamp'): 10041,
        ('OffsetFetchResponse', 'groups.topics.partitions', 'partition_epoch'): 10040,
        ('OffsetFetchResponse', 'groups.topics.partitions', 'commit_timestamp'): 10041,
        ('ProduceRequest', '', 'use_offset'): 10050,
        ('ProduceRequest', 'topic_data', 'partition_count'): 10051,
        ('ProduceResponse', 'responses.partition_responses', 'log_end_offset'): 10052,
        ('HeartbeatRequest', '', 'need_positions'): 10060,
        ('HeartbeatRequest', '', 'positions'): 10061,
        ('HeartbeatResponse', '', 'positions'): 10062,
        ('HeartbeatResponse', '', 'need_positions'): 10063,
        ('ConsumerGroupHeartbeatRequest', '', 'need_positions'): 10064,
        ('ConsumerGroupHeartbeatRequest', '', 'positions'): 10065,
        ('ConsumerGroupHeartbeatResponse', '', 'positions'): 10066,
        ('ConsumerGroupHeartbeatResponse', '', 'need_positions'): 10067,
    }


@pytest.mark.parametrize('cls', messages.PATCHED_MESSAGES + (
    messages.ConsumerGroupHeartbeatRequest, messages.ConsumerGroupHeartbeatResponse), ids=lambda cls: cls.__name__)
def test_extension_fields_are_tagged_exactly_on_the_flexible_versions(cls):
    flexible_from = cls._flexible_versions[0]
    for ext in extensions_for(cls.__name__):
        struct = cls._struct
        for step in ext.path:
            struct = struct.fields[StructField.underscore_name(step)].array_of
        field = struct.fields[ext.attribute]
        assert field.tag == ext.tag
        for version in range(flexible_from, cls.max_version + 1):
            if struct.for_version_q(version):
                assert field in struct.tagged_fields(version)._fields
                assert field not in struct.untagged_fields(version)
        for version in range(0, flexible_from):
            assert field not in struct.tagged_fields(version)._fields
        assert field.default == {'-1': -1, 'false': False, 'null': None}[ext.default]


@pytest.mark.parametrize('cls', messages.PATCHED_MESSAGES, ids=lambda cls: cls.__name__)
def test_tagged_fields_go_out_in_ascending_tag_order(cls):
    for version in flexible_versions(cls):
        structs = [cls._struct]
        while structs:
            struct = structs.pop()
            tags = [field.tag for field in struct.tagged_fields(version)._fields]
            assert tags == sorted(tags) and len(tags) == len(set(tags))
            structs.extend(f.array_of if f.is_struct_array() else f for f in struct.fields.values()
                           if f.is_struct() or f.is_struct_array())


@pytest.mark.parametrize('cls,version', CASES, ids=CASE_IDS)
def test_round_trip_with_and_without_extension_values(cls, version):
    for with_ext in (False, True):
        msg = build(cls, version, with_ext)
        encoded = bytes(msg.encode())
        decoded = cls.decode(encoded, version=version)
        assert bytes(decoded.encode()) == encoded
        assert decoded.to_dict() == msg.to_dict()
        for ext in extensions_for(cls.__name__):
            values = ext_values(decoded, ext)
            assert values == ext_values(msg, ext)
            if not with_ext:
                assert set(map(repr, values)) <= {repr(field_default(ext))}


def field_default(ext: ExtensionField) -> Any:
    return {'-1': -1, 'false': False, 'null': None}[ext.default]


@pytest.mark.parametrize('cls,version', CASES, ids=CASE_IDS)
def test_stock_bytes_decode_with_patched_class_to_extension_defaults(cls, version):
    stock_cls = cls.__mro__[1]
    stock_msg = build(stock_cls, version, with_ext=False)
    stock_bytes = bytes(stock_msg.encode())
    # the same values through the patched class (extension fields left unset) give the same bytes
    assert bytes(build(cls, version, with_ext=False).encode()) == stock_bytes

    decoded = cls.decode(stock_bytes, version=version)
    assert type(decoded) is cls
    assert strip_ext(decoded.to_dict(), _ext_names(cls)) == stock_msg.to_dict()
    carriers = 0
    for ext in extensions_for(cls.__name__):
        values = ext_values(decoded, ext)
        carriers += len(values)
        assert values == [field_default(ext)] * len(values)
    assert carriers > 0
    assert bytes(decoded.encode()) == stock_bytes


@pytest.mark.parametrize('cls,version', CASES, ids=CASE_IDS)
def test_extended_bytes_decode_with_stock_class_as_unknown_tags(cls, version):
    stock_cls = cls.__mro__[1]
    extended = build(cls, version, with_ext=True)
    extended_bytes = bytes(extended.encode())
    plain_bytes = bytes(build(cls, version, with_ext=False).encode())
    assert extended_bytes != plain_bytes

    decoded = stock_cls.decode(extended_bytes, version=version)
    assert type(decoded) is stock_cls
    assert decoded.to_dict() == strip_ext(extended.to_dict(), _ext_names(cls))
    # kafka-python keeps what it does not know in unknown_tags, as the raw value bytes
    for ext in extensions_for(cls.__name__):
        patched_holders = _holders(extended, ext.path)
        stock_holders = _holders(decoded, ext.path)
        assert len(patched_holders) == len(stock_holders)
        for ours, theirs in zip(patched_holders, stock_holders, strict=True):
            field = ours._struct.fields[ext.attribute]
            raw = field.encode(getattr(ours, ext.attribute), version=version, compact=True, tagged=None)
            assert theirs.unknown_tags[f'_{ext.tag}'] == raw
    # re-encoding with kafka-python drops the unknown tags: exactly the bytes without extensions
    assert bytes(decoded.encode()) == plain_bytes


def _holders(msg: Any, path: tuple[str, ...]) -> list:
    objs = [msg]
    for step in path:
        objs = [child for obj in objs for child in (getattr(obj, StructField.underscore_name(step)) or [])]
    return objs


def _fetch_response_with_partition_epoch_7() -> messages.FetchResponse:
    """A FetchResponse v12 with one empty partition whose extension partition_epoch is 7."""
    topic_cls = messages.FetchResponse.FetchableTopicResponse
    partition = topic_cls.PartitionData(
        version=12, partition_index=0, error_code=0, high_watermark=5, last_stable_offset=5,
        log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1, records=None,
        partition_epoch=7)
    return messages.FetchResponse(version=12, throttle_time_ms=0, error_code=0, session_id=0,
                                   responses=[topic_cls(version=12, topic='t', partitions=[partition])])


def test_fetch_partition_epoch_golden_bytes():
    msg = _fetch_response_with_partition_epoch_7()
    body = bytes(msg.encode())
    # partition: ..., records null (0), then 1 tagged field: tag 10010 (varint 9a 4e), size 4, int32 7
    assert body.endswith(b'\x00' + b'\x01\x9a\x4e\x04\x00\x00\x00\x07' + b'\x00' + b'\x00')
    msg.responses[0].partitions[0].partition_epoch = -1
    assert bytes(msg.encode()).endswith(b'\x00' + b'\x00' + b'\x00' + b'\x00')


def test_produce_request_use_offset_and_partition_count_golden_bytes():
    topic_cls = messages.ProduceRequest.TopicProduceData
    msg = messages.ProduceRequest(
        version=9, transactional_id=None, acks=-1, timeout_ms=1000, use_offset=True,
        topic_data=[topic_cls(version=9, name='t', partition_count=3, partition_data=[
            topic_cls.PartitionProduceData(version=9, index=0, records=None)])])
    assert bytes(msg.encode()) == (
        b'\x00' b'\xff\xff' b'\x00\x00\x03\xe8'        # transactional_id null, acks -1, timeout 1000
        b'\x02' b'\x02t'                                 # 1 topic, name 't'
        b'\x02' b'\x00\x00\x00\x00' b'\x00' b'\x00'      # 1 partition: index 0, records null, no tags
        b'\x01' b'\xc3\x4e' b'\x04' b'\x00\x00\x00\x03'  # topic tags: 10051 partition_count = 3
        b'\x01' b'\xc2\x4e' b'\x01' b'\x01')             # top-level tags: 10050 use_offset = true
    assert messages.ProduceRequest.decode(msg.encode(), version=9).use_offset is True


def test_heartbeat_positions_round_trip_and_shape():
    req_cls = messages.HeartbeatRequest
    position_topic = req_cls.PositionTopic
    msg = req_cls(version=4, group_id='g', generation_id=1, member_id='m', group_instance_id=None,
                  need_positions=[req_cls.NeedPositionTopic(version=4, topic='t', partitions=[0, 1])],
                  positions=[position_topic(version=4, topic='t', partitions=[
                      position_topic.PartitionPosition(version=4, partition_index=2, offset=42)])])
    decoded = req_cls.decode(msg.encode(), version=4)
    assert [(t.topic, t.partitions) for t in decoded.need_positions] == [('t', [0, 1])]
    assert [(t.topic, [(p.partition_index, p.offset) for p in t.partitions]) for t in decoded.positions] == \
        [('t', [(2, 42)])]
    empty = req_cls.decode(req_cls(version=4, group_id='g', generation_id=1, member_id='m',
                                   group_instance_id=None).encode(), version=4)
    assert empty.need_positions is None and empty.positions is None


def test_offset_commit_request_commit_timestamp_reuses_the_v1_field():
    cls = messages.OffsetCommitRequest
    partition_struct = cls._struct.fields['topics'].array_of.fields['partitions'].array_of
    names = {v: [f.name for f in partition_struct.untagged_fields(v)] for v in (1, 2, 7, 8)}
    assert names[1] == ['partition_index', 'committed_offset', 'commit_timestamp', 'committed_metadata']
    assert 'commit_timestamp' not in names[2] + names[7] + names[8]
    tagged = [f.name for f in partition_struct.tagged_fields(8)._fields]
    assert tagged == ['partition_epoch', 'commit_timestamp']
    stock_v1 = build(stock_consumer.OffsetCommitRequest, 1, with_ext=False)
    assert bytes(build(cls, 1, with_ext=True).encode()) == bytes(stock_v1.encode())


@pytest.mark.parametrize('version', [0, 5, 8])
def test_non_flexible_versions_are_unchanged(version):
    stock_msg = build(stock_metadata.MetadataResponse, version, with_ext=False)
    patched_msg = build(messages.MetadataResponse, version, with_ext=False)
    assert bytes(patched_msg.encode()) == bytes(stock_msg.encode())


def test_kafka_pythons_response_registry_keeps_its_own_classes():
    # kafka-python registers a response class when it is defined and each versioned class when first built
    registry = ResponseClassRegistry._response_class_registry
    for cls in messages.PATCHED_MESSAGES:
        if not cls.is_request():
            stock = cls.__mro__[1]
            assert registry[cls.API_KEY][None] is stock
            assert messages.EXTENDED_RESPONSES[cls.API_KEY] is cls
            assert cls[cls.max_version].__mro__[1] is cls
            assert registry[cls.API_KEY][None] is stock
    assert messages.LEADER_EPOCHS_FOR_PARTITION_API_KEY not in registry
    assert sorted(messages.EXTENDED_RESPONSES) == [0, 1, 2, 3, 9, 12, 68, 69, 10000]


def test_lookups_cover_every_kafka_python_api_plus_leader_epochs_for_partition():
    assert set(messages.REQUESTS) == set(messages.RESPONSES)
    assert len(messages.REQUESTS) == 55  # kafka-python's 52, LeaderEpochsForPartition, KIP-848's 68 and 69
    assert messages.REQUESTS[ApiKey.ConsumerGroupHeartbeat] is messages.ConsumerGroupHeartbeatRequest
    assert messages.RESPONSES[ApiKey.ConsumerGroupDescribe] is messages.ConsumerGroupDescribeResponse
    assert messages.LEADER_EPOCHS_FOR_PARTITION_API_KEY == 10000
    assert messages.REQUESTS[messages.LEADER_EPOCHS_FOR_PARTITION_API_KEY] is messages.LeaderEpochsForPartitionRequest
    assert messages.RESPONSES[messages.LEADER_EPOCHS_FOR_PARTITION_API_KEY] is messages.LeaderEpochsForPartitionResponse
    assert messages.REQUESTS[ApiKey.Produce] is messages.ProduceRequest
    assert messages.RESPONSES[ApiKey.Metadata] is messages.MetadataResponse
    assert messages.RESPONSES[ApiKey.ApiVersions] is messages.ApiVersionsResponse
    assert messages.ApiVersionsResponse.__mro__[1] is stock_metadata.ApiVersionsResponse
    for table, kind in ((messages.REQUESTS, 'request'), (messages.RESPONSES, 'response')):
        for api_key, cls in table.items():
            assert cls.API_KEY == api_key and cls.type == kind


@pytest.mark.parametrize('version', [0, 1])
def test_consumer_group_heartbeat_round_trip(version):
    topic_id = uuid.UUID(int=7)
    request = messages.ConsumerGroupHeartbeatRequest(
        version=version, group_id='g', member_id='m', member_epoch=3, instance_id=None, rack_id='r',
        rebalance_timeout_ms=-1, subscribed_topic_names=['t'], subscribed_topic_regex='t.*' if version else None,
        server_assignor='range', topic_partitions=[
            messages.ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=topic_id, partitions=[0, 2])])
    decoded = messages.ConsumerGroupHeartbeatRequest.decode(bytes(request.encode()), version=version)
    assert (decoded.group_id, decoded.member_id, decoded.member_epoch, decoded.instance_id, decoded.rack_id,
            decoded.subscribed_topic_names, decoded.server_assignor) == ('g', 'm', 3, None, 'r', ['t'], 'range')
    assert [(tp.topic_id, tp.partitions) for tp in decoded.topic_partitions] == [(topic_id, [0, 2])]
    assert decoded.subscribed_topic_regex == ('t.*' if version else None)
    response_class = messages.ConsumerGroupHeartbeatResponse
    assignment = response_class.Assignment(topic_partitions=[
        response_class.Assignment.TopicPartitions(topic_id=topic_id, partitions=[1])])
    response = response_class(version=version, throttle_time_ms=0, error_code=0, error_message=None, member_id='m',
                              member_epoch=4, heartbeat_interval_ms=5000, assignment=assignment)
    back = response_class.decode(bytes(response.encode()), version=version)
    assert (back.member_epoch, back.heartbeat_interval_ms) == (4, 5000)
    assert [(tp.topic_id, tp.partitions) for tp in back.assignment.topic_partitions] == [(topic_id, [1])]


def test_leader_epochs_for_partition_wire_format():
    req_cls, resp_cls = messages.LeaderEpochsForPartitionRequest, messages.LeaderEpochsForPartitionResponse
    assert (req_cls.max_version, req_cls.flexible_version_q(0)) == (0, True)
    request = req_cls(version=0, group_id='g', topics=[
        req_cls.LeaderEpochsForPartitionTopic(version=0, name='t', partitions=[3, 4])])
    # group 'g', 1 topic 't', partitions [3, 4], topic tags, top-level tags
    assert bytes(request.encode()) == \
        b'\x02g' b'\x02' b'\x02t' b'\x03\x00\x00\x00\x03\x00\x00\x00\x04' b'\x00' b'\x00'
    topic_cls = resp_cls.LeaderEpochsForPartitionTopicResult
    result_cls = topic_cls.LeaderEpochsForPartitionResult
    prior_cls = result_cls.PriorPartitionEpoch
    result = result_cls(version=0, partition_index=3, error_code=0, prior_partitions=[
        prior_cls(version=0, partition_index=0, leader_epoch=5),
        prior_cls(version=0, partition_index=1, leader_epoch=6)])
    response = resp_cls(version=0, throttle_time_ms=0, error_code=0,
                        topics=[topic_cls(version=0, name='t', partitions=[result])])
    decoded = resp_cls.decode(response.encode(header=False), version=0)
    prior = decoded.topics[0].partitions[0].prior_partitions
    assert [(p.partition_index, p.leader_epoch) for p in prior] == [(0, 5), (1, 6)]
    response.with_header(correlation_id=9)
    with_header = bytes(response.encode(header=True))
    assert with_header[:5] == b'\x00\x00\x00\x09\x00'   # ResponseHeader v1: correlation id, no tags
    assert resp_cls.decode(with_header, version=0, header=True).header.correlation_id == 9


def test_tagged_decode_reads_only_the_tag_bytes():
    # a large records payload after many tagged partitions must not be copied per partition
    topic_cls = messages.FetchResponse.FetchableTopicResponse
    partitions = [topic_cls.PartitionData(
        version=12, partition_index=i, error_code=0, high_watermark=5, last_stable_offset=5,
        log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1, records=b'x' * 1000,
        partition_epoch=i)
        for i in range(200)]
    msg = messages.FetchResponse(version=12, throttle_time_ms=0, error_code=0, session_id=0,
                                 responses=[topic_cls(version=12, topic='t', partitions=partitions)])
    data = bytes(msg.encode())
    copies = []
    real_bytes_io = io.BytesIO

    class CountingBytesIO(real_bytes_io):
        def __init__(self, initial: bytes = b'') -> None:
            copies.append(len(initial))
            super().__init__(initial)

    decode = messages.FetchResponse._struct.compiled_decode_from(
        12, compact=True, tagged=True, data_class=messages.FetchResponse)
    decode.__globals__['_BytesIO'] = CountingBytesIO
    try:
        decoded, end = decode(memoryview(data), 0)
    finally:
        decode.__globals__['_BytesIO'] = real_bytes_io
    assert end == len(data)
    assert [p.partition_epoch for p in decoded.responses[0].partitions] == list(range(200))
    assert copies == []


def test_patched_decoder_keeps_unknown_tags_of_future_peers():
    msg = _fetch_response_with_partition_epoch_7()
    data = bytes(msg.encode())
    known = b'\x01\x9a\x4e\x04\x00\x00\x00\x07'
    assert data.count(known) == 1 and data.endswith(b'\x00')
    # partition: tag 10099 instead of 10010; top level (no known tags at v12): one unknown tag 5
    data = data.replace(known, b'\x01\xf3\x4e\x04\x00\x00\x00\x07')[:-1] + b'\x01\x05\x02\xab\xcd'
    decoded = messages.FetchResponse.decode(data, version=12)
    assert decoded.unknown_tags == {'_5': b'\xab\xcd'} and decoded.tags is None
    got = decoded.responses[0].partitions[0]
    assert (got.partition_epoch, got.unknown_tags, got.tags) == (-1, {'_10099': b'\x00\x00\x00\x07'}, None)
    assert messages.FetchResponse.decode(msg.encode(), version=12).responses[0].partitions[0].tags == \
        {'partition_epoch'}

def test_apply_extensions_rejects_a_colliding_field():
    json = {'flexibleVersions': '4+', 'fields': [
        {'name': 'Existing', 'type': 'int32', 'versions': '0+', 'tag': 10060, 'taggedVersions': '4+'}]}
    with pytest.raises(ValueError, match='collides'):
        apply_extensions(json, 'HeartbeatRequest')


# --- KIP-1243 headers -------------------------------------------------------------------------------

# one tagged field: tag 0, 13 bytes: cluster_id 'abc', consistency_token 42, no nested tags
STATE_BYTES = b'\x01' b'\x00' b'\x0d' b'\x04abc' b'\x00\x00\x00\x00\x00\x00\x00\x2a' b'\x00'


def _request_header(cls: type, **kw: Any) -> Any:
    return cls(request_api_key=ApiKey.Metadata, request_api_version=12, correlation_id=7, client_id='c', **kw)


@pytest.mark.parametrize('flexible', [False, True])
def test_request_header_without_consistency_state_is_byte_identical(flexible):
    ours = _request_header(headers.RequestHeader).encode(flexible=flexible)
    assert ours == _request_header(stock_header.RequestHeader).encode(flexible=flexible)
    assert ours == b'\x00\x03\x00\x0c\x00\x00\x00\x07\x00\x01c' + (b'\x00' if flexible else b'')
    decoded = headers.RequestHeader.decode(io.BytesIO(ours), flexible=flexible)
    assert decoded.consistency_state is None and decoded.correlation_id == 7


def test_request_header_with_consistency_state_both_directions():
    state = headers.RequestConsistencyState(cluster_id='abc', consistency_token=42)
    encoded = _request_header(headers.RequestHeader, consistency_state=state).encode(flexible=True)
    assert encoded == b'\x00\x03\x00\x0c\x00\x00\x00\x07\x00\x01c' + STATE_BYTES
    decoded = headers.RequestHeader.decode(io.BytesIO(encoded), flexible=True)
    assert (decoded.consistency_state.cluster_id, decoded.consistency_state.consistency_token) == ('abc', 42)
    stock = stock_header.RequestHeader.decode(io.BytesIO(encoded), flexible=True)
    assert stock.unknown_tags == {'_0': STATE_BYTES[3:]}
    assert (stock.request_api_key, stock.correlation_id, stock.client_id) == (3, 7, 'c')
    # v1 (not flexible) has no tagged fields: the state is not sent
    assert _request_header(headers.RequestHeader, consistency_state=state).encode(flexible=False) == \
        b'\x00\x03\x00\x0c\x00\x00\x00\x07\x00\x01c'


def test_response_header_with_and_without_consistency_state():
    plain = headers.ResponseHeader(correlation_id=7)
    assert plain.encode(flexible=True) == stock_header.ResponseHeader(correlation_id=7).encode(flexible=True)
    assert plain.encode(flexible=True) == b'\x00\x00\x00\x07\x00'
    assert plain.encode(flexible=False) == b'\x00\x00\x00\x07'
    state = headers.ResponseConsistencyState(cluster_id=None, consistency_token=5)
    encoded = headers.ResponseHeader(correlation_id=7, consistency_state=state).encode(flexible=True)
    assert encoded == b'\x00\x00\x00\x07' b'\x01\x00\x0a' b'\x00' b'\x00\x00\x00\x00\x00\x00\x00\x05' b'\x00'
    decoded = headers.ResponseHeader.decode(io.BytesIO(encoded), flexible=True)
    assert (decoded.consistency_state.cluster_id, decoded.consistency_state.consistency_token) == (None, 5)
    assert stock_header.ResponseHeader.decode(io.BytesIO(encoded), flexible=True).unknown_tags == \
        {'_0': encoded[7:]}


def test_kafka_python_messages_keep_kafka_pythons_headers():
    request = stock_metadata.MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False)
    request.with_header(correlation_id=7, client_id='c')
    assert type(request.header) is stock_header.RequestHeader
    assert type(messages.MetadataResponse[12].parse_header(io.BytesIO(b'\x00\x00\x00\x07\x00'))) is \
        stock_header.ResponseHeader


def test_newer_versions_extend_kafka_pythons_specs_to_kafka_4_4s():
    """ApiVersions v5, TxnOffsetCommit v6 and DeleteGroups v3 (kafka-python 3.0 stops one short): the added fields
    in Kafka's order, kafka-python's own classes and response registry unchanged."""
    registry = ResponseClassRegistry._response_class_registry
    maxima = {cls.__name__: cls.max_version for cls in messages.NEWER_MESSAGES}
    assert maxima == {'ApiVersionsRequest': 5, 'ApiVersionsResponse': 5, 'TxnOffsetCommitRequest': 6,
                      'TxnOffsetCommitResponse': 6, 'DeleteGroupsRequest': 3, 'DeleteGroupsResponse': 3}
    for cls in messages.NEWER_MESSAGES:
        stock = cls.__mro__[1]
        assert stock.max_version == cls.max_version - 1
        assert messages.REQUESTS.get(cls.API_KEY) is cls or messages.RESPONSES[cls.API_KEY] is cls
        assert cls.API_KEY not in messages.EXTENDED_RESPONSES
        if not cls.is_request():
            assert registry[cls.API_KEY][None] is stock
    commit = messages.TxnOffsetCommitRequest
    topic_id = uuid.UUID(int=5)
    request = commit(version=6, transactional_id='t', group_id='g', producer_id=7, producer_epoch=1, generation_id=3,
                     member_id='m', group_instance_id=None, topics=[commit.TxnOffsetCommitRequestTopic(
                         topic_id=topic_id, partitions=[commit.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                             partition_index=2, committed_offset=9, committed_leader_epoch=-1, committed_metadata='')])])
    encoded = bytes(request.encode(version=6))
    # the topic id comes first in the topic (where v5's name was), before its partitions
    assert encoded.index(topic_id.bytes) + 16 == encoded.index(b'\x02\x00\x00\x00\x02')
    decoded = commit.decode(encoded, version=6)
    assert (decoded.topics[0].topic_id, decoded.topics[0].name, decoded.topics[0].partitions[0].committed_offset) == (
        topic_id, '', 9)  # v6 has no name: the default
    v5 = stock_producer.TxnOffsetCommitRequest(version=5, **{k: getattr(request, k) for k in (
        'transactional_id', 'group_id', 'producer_id', 'producer_epoch', 'generation_id', 'member_id',
        'group_instance_id')}, topics=[])
    assert bytes(v5.encode(version=5)) == bytes(commit(version=5, **{k: getattr(request, k) for k in (
        'transactional_id', 'group_id', 'producer_id', 'producer_epoch', 'generation_id', 'member_id',
        'group_instance_id')}, topics=[]).encode(version=5))


def test_a_kafka_python_that_ships_a_declared_version_trips_the_tripwire():
    spec = {'validVersions': '0-5', 'fields': []}
    with pytest.raises(KafkaPythonChanged, match=r'ships ApiVersionsRequest versions 0-5; kafka_kip declares v5 '
                                                 r'itself: drop its row'):
        apply_newer_versions(spec, 'ApiVersionsRequest')
