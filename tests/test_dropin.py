"""The drop-in surface: `import kafka_kip as kafka` must run ordinary kafka-python code unchanged."""
import importlib
import inspect
import pickle

import kafka
import kafka.admin
import kafka.errors
import kafka.structs
import pytest

import kafka_kip
from kafka_kip.structs import OffsetAndMetadata, OffsetAndTimestamp, ProducerRecordWithOffset


@pytest.mark.parametrize('name', kafka.__all__)
def test_every_stock_name_is_exported(name):
    assert name in kafka_kip.__all__
    ours = getattr(kafka_kip, name)
    stock = getattr(kafka, name)
    assert ours is stock or (inspect.isclass(ours) and issubclass(ours, stock))


@pytest.mark.parametrize('name', ['KafkaConsumer', 'KafkaProducer', 'KafkaAdminClient', 'OffsetAndMetadata'])
def test_extended_classes_are_subclasses(name):
    ours, stock = getattr(kafka_kip, name), getattr(kafka, name)
    assert ours is not stock and issubclass(ours, stock)


def test_extended_classes_accept_every_stock_argument():
    for name in ('KafkaConsumer', 'KafkaProducer', 'KafkaAdminClient'):
        ours, stock = getattr(kafka_kip, name), getattr(kafka, name)
        assert set(stock.DEFAULT_CONFIG) <= set(ours.DEFAULT_CONFIG), name


@pytest.mark.parametrize('module', ['errors', 'structs', 'admin', 'serializer', 'partitioner', 'cluster',
                                    'coordinator', 'future', 'metrics', 'record', 'codec', 'util'])
def test_submodules_are_attributes_and_importable(module):
    imported = importlib.import_module('kafka_kip.' + module)
    assert getattr(kafka_kip, module) is imported
    stock = importlib.import_module('kafka.' + module)
    stock_names = getattr(stock, '__all__', None) or [
        n for n, obj in vars(stock).items()
        if not n.startswith('_') and getattr(obj, '__module__', '').startswith('kafka')]
    missing = [n for n in stock_names if not hasattr(imported, n)]
    assert missing == []


def test_admin_exports_deprecated_new_topic_too():
    assert kafka_kip.admin.NewTopic is kafka.admin.NewTopic
    assert kafka_kip.admin.NewPartitions is kafka.admin.NewPartitions
    assert kafka_kip.admin.KafkaAdminClient is kafka_kip.KafkaAdminClient


def test_offset_and_metadata_stays_a_stock_three_tuple():
    oam = OffsetAndMetadata(42, 'meta', 3, timestamp=1700000000000, partition_epoch=7)
    offset, metadata, leader_epoch = oam
    assert (offset, metadata, leader_epoch) == (42, 'meta', 3)
    assert oam == kafka.structs.OffsetAndMetadata(42, 'meta', 3)
    assert (oam.timestamp, oam.partition_epoch) == (1700000000000, 7)
    assert isinstance(oam, kafka.structs.OffsetAndMetadata)
    assert OffsetAndMetadata(1).leader_epoch == -1 and OffsetAndMetadata(1).timestamp == -1
    assert oam != OffsetAndMetadata(42, 'meta', 3, timestamp=1, partition_epoch=7)
    assert pickle.loads(pickle.dumps(oam)) == oam
    assert oam._replace(offset=43) == OffsetAndMetadata(43, 'meta', 3, timestamp=1700000000000, partition_epoch=7)
    with pytest.raises(ValueError, match='no field'):
        oam._replace(offfset=1)
    wrapped = OffsetAndMetadata.from_stock(kafka.structs.OffsetAndMetadata(5, '', 2), timestamp=9)
    assert (wrapped.offset, wrapped.leader_epoch, wrapped.timestamp, wrapped.partition_epoch) == (5, 2, 9, -1)


@pytest.mark.parametrize('value', [OffsetAndMetadata(42, 'meta', 3, timestamp=1, partition_epoch=7),
                                   OffsetAndTimestamp(42, 1700000000000, 3, offset_epoch=b'\x01')],
                         ids=['OffsetAndMetadata', 'OffsetAndTimestamp'])
def test_extended_tuples_compare_like_kafka_pythons_with_anything(value):
    # `committed(tp) == None`, `found != None`, comparisons with other types: as for the plain namedtuple
    stock = tuple(value)
    for other in (None, 42, 'x', (42,), [42, 'meta', 3]):
        assert (value == other, value != other) == (stock == other, stock != other) == (False, True)
    assert value == stock and not value != stock
    assert {value: 1}[stock] == 1


def test_producer_record_with_offset_validates_its_input():
    record = ProducerRecordWithOffset('t', 2, key=b'k', value=b'v', offset=0)
    assert record == ('t', 2, b'k', b'v', None, None, 0)
    with pytest.raises(ValueError, match='needs an explicit partition'):
        ProducerRecordWithOffset('t', offset=5)
    with pytest.raises(ValueError, match=r'offset must be in 0\.\.9223372036854775806, got -1'):
        ProducerRecordWithOffset('t', 0, offset=-1)
    with pytest.raises(TypeError, match=r'offset must be an int in 0\.\.9223372036854775806, got None'):
        ProducerRecordWithOffset('t', 0)
    with pytest.raises(ValueError, match='topic name'):
        ProducerRecordWithOffset('', 0, offset=1)
