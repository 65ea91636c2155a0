"""The extension error table and kafka_kip.errors as a superset of kafka.errors."""
from __future__ import annotations

import inspect

import kafka.errors
import pytest
from kafka.structs import OffsetAndMetadata, TopicPartition

import kafka_kip.errors as errors
from kafka_kip.errors import (
    EXTENSION_ERRORS,
    InconsistentClusterIdError,
    InvalidLeaderEpochError,
    InvalidPartitionCountError,
    InvalidPartitionEpochError,
    InvalidProduceOffsetError,
    StaleMetadataError,
    TruncatedPartitionError,
    UnsupportedFeatureError,
)

TP0, TP1 = TopicPartition('t', 0), TopicPartition('t', 1)
TABLE = {
    10001: ('INVALID_PARTITION_EPOCH', InvalidPartitionEpochError),
    10002: ('INVALID_PRODUCE_OFFSET', InvalidProduceOffsetError),
    10003: ('STALE_METADATA', StaleMetadataError),
    10004: ('INCONSISTENT_CLUSTER_ID', InconsistentClusterIdError),
    10005: ('INVALID_PARTITION_COUNT', InvalidPartitionCountError),
    10006: ('TRUNCATED_PARTITION', TruncatedPartitionError),
    10007: ('UNSUPPORTED_FEATURE', UnsupportedFeatureError),
    10008: ('INVALID_LEADER_EPOCH', InvalidLeaderEpochError),
}
TABLE_CLASSES = [cls for _message, cls in TABLE.values()]


def _kafka_python_codes() -> dict[int, type]:
    return {obj.errno: obj for obj in vars(kafka.errors).values()
            if inspect.isclass(obj) and issubclass(obj, kafka.errors.BrokerResponseError)
            and obj.__module__ == 'kafka.errors' and obj.errno is not None}


def test_table_is_exactly_the_shared_codes():
    assert {code: (cls.message, cls) for code, cls in EXTENSION_ERRORS.items()} == TABLE


def test_codes_do_not_collide_with_any_kafka_python_error():
    stock_codes = _kafka_python_codes()
    assert len(stock_codes) > 100
    assert not set(EXTENSION_ERRORS) & set(stock_codes)
    assert max(stock_codes) < min(EXTENSION_ERRORS)


@pytest.mark.parametrize('code', sorted(TABLE))
def test_each_code_maps_to_our_class_through_both_for_code(code):
    cls = TABLE[code][1]
    assert kafka.errors.for_code(code) is cls
    assert errors.for_code(code) is cls
    assert kafka.errors.kafka_errors[code] is cls
    assert issubclass(cls, kafka.errors.BrokerResponseError)
    assert cls.errno == code and cls.description
    instance = cls()  # kafka-python's generic paths instantiate with no arguments
    assert str(instance).startswith(f'[Error {code}] {cls.__name__}')


def test_stock_codes_still_map_to_kafka_python_classes():
    assert kafka.errors.for_code(104) is kafka.errors.InconsistentClusterIdError
    assert kafka.errors.for_code(1) is kafka.errors.OffsetOutOfRangeError
    assert kafka.errors.for_code(10009).__name__ == 'UnrecognizedBrokerError'


def test_register_is_idempotent_and_refuses_a_taken_code():
    errors.register_extension_errors()
    assert kafka.errors.for_code(10002) is InvalidProduceOffsetError
    kafka.errors.kafka_errors[10002] = kafka.errors.UnknownError
    try:
        with pytest.raises(RuntimeError, match='10002 is already UnknownError'):
            errors.register_extension_errors()
    finally:
        kafka.errors.kafka_errors[10002] = InvalidProduceOffsetError


def test_kafka_kip_errors_is_a_superset_of_kafka_errors():
    public = {name for name, obj in vars(kafka.errors).items()
              if not name.startswith('_') and not inspect.ismodule(obj)}
    assert 'for_code' in public and 'CorruptRecordException' in public and 'kafka_errors' in public
    assert public <= set(errors.__all__)
    for name in public - {'InconsistentClusterIdError'}:
        assert getattr(errors, name) is getattr(kafka.errors, name), name
    assert issubclass(errors.InconsistentClusterIdError, kafka.errors.InconsistentClusterIdError)
    namespace: dict = {}
    exec('from kafka_kip.errors import *', namespace)
    assert {cls.__name__ for cls in TABLE_CLASSES} <= set(namespace)
    assert namespace['InconsistentClusterIdError'] is InconsistentClusterIdError


def test_retriable_flags():
    flags = {cls.__name__: (cls.retriable, cls.invalid_metadata) for cls in TABLE_CLASSES}
    assert flags == {
        'InvalidPartitionEpochError': (False, False), 'InvalidProduceOffsetError': (False, False),
        'StaleMetadataError': (True, True), 'InconsistentClusterIdError': (False, False),
        'InvalidPartitionCountError': (True, True), 'TruncatedPartitionError': (False, False),
        'UnsupportedFeatureError': (False, False), 'InvalidLeaderEpochError': (False, False),
    }


def test_invalid_produce_offset_error_fields():
    error = InvalidProduceOffsetError(1234)
    assert error.log_end_offset == 1234
    assert str(error) == ('[Error 10002] InvalidProduceOffsetError: '
                          'Produce offset is below the log end offset 1234')
    assert InvalidProduceOffsetError(7, message='behind').args == ('behind',)
    assert InvalidProduceOffsetError(log_end_offset=9).log_end_offset == 9
    # kafka-python's producer builds errors as error_cls(partition_response.error_message)
    from_broker = InvalidProduceOffsetError('offset 3 < 10')
    assert (from_broker.log_end_offset, from_broker.args) == (-1, ('offset 3 < 10',))
    assert InvalidProduceOffsetError(None).log_end_offset == -1


def test_invalid_partition_epoch_error_fields():
    error = InvalidPartitionEpochError({TP0: 3})
    assert error.partition_epochs == {TP0: 3}
    assert "Partition epoch changed for {TopicPartition(topic='t', partition=0): 3}" in str(error)
    assert InvalidPartitionEpochError('broker said so').partition_epochs == {}
    assert InvalidPartitionEpochError('broker said so').args == ('broker said so',)


def test_truncated_partition_error_is_offset_out_of_range_and_log_truncation():
    error = TruncatedPartitionError({TP0: 10, TP1: None})
    assert isinstance(error, kafka.errors.OffsetOutOfRangeError)
    assert isinstance(error, kafka.errors.LogTruncationError)
    assert error.errno == 10006
    assert error.truncated_offsets == {TP0: 10, TP1: None}
    assert error.divergent_offsets == {TP0: OffsetAndMetadata(10, '', -1), TP1: None}
    explicit = {TP0: OffsetAndMetadata(10, '', 4)}
    assert TruncatedPartitionError({TP0: 10}, explicit).divergent_offsets == explicit
    gone = TruncatedPartitionError({TP0: 10}, message='gone')
    assert str(gone) == '[Error 10006] TruncatedPartitionError: gone'
    with pytest.raises(kafka.errors.OffsetOutOfRangeError):
        raise TruncatedPartitionError({TP0: 10})


def test_unsupported_feature_error_names_the_feature():
    error = UnsupportedFeatureError('kip.391')
    assert error.feature == 'kip.391' and error.node_id is None
    assert str(error) == ('[Error 10007] UnsupportedFeatureError: '
                          "The broker did not advertise feature 'kip.391' "
                          'in ApiVersionsResponse SupportedFeatures')
    assert str(UnsupportedFeatureError('kip.253', node_id=2)).endswith(
        "Broker 2 did not advertise feature 'kip.253' in ApiVersionsResponse SupportedFeatures")


def test_inconsistent_cluster_id_is_caught_as_kafka_pythons():
    with pytest.raises(kafka.errors.InconsistentClusterIdError):
        raise InconsistentClusterIdError()
    assert InconsistentClusterIdError.errno == 10004
    assert kafka.errors.InconsistentClusterIdError.errno == 104
