"""The extension error table and kafka_kip.errors as a superset of kafka.errors."""
from __future__ import annotations

import inspect

import kafka.errors
import pytest
from kafka.structs import OffsetAndMetadata, TopicPartition

import kafka_kip
import kafka_kip.errors as errors
from kafka_kip.errors import (
    EXTENSION_ERRORS,
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


def _unrecognized(cls: type, code: int) -> bool:
    """kafka-python's answer for a code it does not know: a fresh UnknownError subclass with that errno."""
    return cls.__name__ == 'UnrecognizedBrokerError' and issubclass(cls, kafka.errors.UnknownError) \
        and cls.errno == code


@pytest.mark.parametrize('code', sorted(TABLE))
def test_each_code_maps_to_our_class_through_kafka_kip_for_code_only(code):
    cls = TABLE[code][1]
    assert errors.for_code(code) is cls
    assert kafka_kip.errors.for_code is errors.for_code     # what `import kafka_kip as kafka` code calls
    # kafka-python's own table is left alone: its for_code does not know the extension codes
    assert code not in kafka.errors.kafka_errors
    assert _unrecognized(kafka.errors.for_code(code), code)
    assert issubclass(cls, kafka.errors.BrokerResponseError)
    assert cls.errno == code and cls.description
    instance = cls()  # kafka-python's generic paths instantiate with no arguments
    assert str(instance).startswith(f'[Error {code}] {cls.__name__}')


def test_stock_codes_map_to_kafka_python_classes_through_both_for_code():
    for for_code in (kafka.errors.for_code, errors.for_code):
        assert for_code(104) is kafka.errors.InconsistentClusterIdError
        assert for_code(1) is kafka.errors.OffsetOutOfRangeError
        assert _unrecognized(for_code(10004), 10004)   # retired: it is Kafka's 104 now
        assert _unrecognized(for_code(10009), 10009)


def test_kafka_kip_errors_is_a_superset_of_kafka_errors():
    public = {name for name, obj in vars(kafka.errors).items()
              if not name.startswith('_') and not inspect.ismodule(obj)}
    assert 'for_code' in public and 'CorruptRecordException' in public and 'kafka_errors' in public
    assert public <= set(errors.__all__)
    for name in public - {'for_code'}:
        assert getattr(errors, name) is getattr(kafka.errors, name), name
    namespace: dict = {}
    exec('from kafka_kip.errors import *', namespace)
    assert {cls.__name__ for cls in TABLE_CLASSES} <= set(namespace)
    assert namespace['for_code'] is errors.for_code


# What a kafka-python user already writes for the situation each extension error reports (KIP-232/320/391 errors
# that have no kafka-python counterpart are missing here: no stock client ever raises anything for them).
DROP_IN = [
    (TruncatedPartitionError({TP0: 10}), kafka.errors.OffsetOutOfRangeError),
    (TruncatedPartitionError({TP0: 10}), kafka.errors.LogTruncationError),
    (StaleMetadataError(), kafka.errors.InvalidMetadataError),
    (InvalidPartitionCountError(), kafka.errors.InvalidMetadataError),
    (UnsupportedFeatureError('kip.391'), kafka.errors.UnsupportedVersionError),
    (errors.for_code(104)(), kafka.errors.InconsistentClusterIdError),
]


@pytest.mark.parametrize(('error', 'stock_class'), DROP_IN, ids=lambda v: type(v).__name__ if isinstance(v, Exception)
                         else v.__name__)
def test_each_extension_error_is_caught_by_the_kafka_python_class_a_stock_user_writes(error, stock_class):
    # `import kafka_kip as kafka` then `except kafka.errors.<StockClass>`
    with pytest.raises(getattr(kafka_kip.errors, stock_class.__name__)):
        raise error
    assert getattr(kafka_kip.errors, stock_class.__name__) is stock_class


def test_retriable_flags():
    flags = {cls.__name__: (cls.retriable, cls.invalid_metadata) for cls in TABLE_CLASSES}
    assert flags == {
        'InvalidPartitionEpochError': (False, False), 'InvalidProduceOffsetError': (False, False),
        'StaleMetadataError': (True, True),
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


def test_inconsistent_cluster_id_is_apache_kafkas_code_104_and_kafka_pythons_class():
    assert errors.InconsistentClusterIdError is kafka.errors.InconsistentClusterIdError
    assert kafka_kip.errors.InconsistentClusterIdError.errno == 104
    assert errors.for_code(104) is kafka.errors.InconsistentClusterIdError
    assert errors.InconsistentClusterIdError not in EXTENSION_ERRORS.values()
