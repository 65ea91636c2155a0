"""KIP-1243's ConsistencyContext and ConsistencyContextStore: ordering, bytes, the four stores."""
from __future__ import annotations

import multiprocessing
import pickle
import threading

import pytest
from kafka.errors import KafkaConfigurationError

import kafka_kip
from kafka_kip import ConsistencyContext, ConsistencyContextStore

pytestmark = pytest.mark.kip1243

A5 = ConsistencyContext.of('cluster-a', 5)
A9 = ConsistencyContext.of('cluster-a', 9)
B7 = ConsistencyContext.of('cluster-b', 7)
UNKNOWN = ConsistencyContext.unknown()


def test_context_fields_and_unknown():
    assert (A5.cluster_id, A5.offset, A5.is_unknown()) == ('cluster-a', 5, False)
    assert (UNKNOWN.cluster_id, UNKNOWN.offset, UNKNOWN.is_unknown()) == (None, -1, True)
    assert ConsistencyContext.unknown() is UNKNOWN
    assert ConsistencyContext.of('cluster-a', 0).offset == 0
    assert str(A5) == "ConsistencyContext(cluster_id='cluster-a', offset=5)"
    assert str(UNKNOWN) == 'ConsistencyContext(unknown)'


@pytest.mark.parametrize('cluster_id, offset, error, message', [
    (None, 1, TypeError, 'cluster_id must be a str, got None'),
    (b'a', 1, TypeError, "cluster_id must be a str, got b'a'"),
    ('', 1, ValueError, "cluster_id must be 1..32767 UTF-8 bytes, got ''"),
    ('a', -1, ValueError, 'offset must be in 0..2\\*\\*63-1, got -1'),
    ('a', 2 ** 63, ValueError, 'offset must be in 0..2\\*\\*63-1, got 9223372036854775808'),
    ('a', 1.0, TypeError, 'offset must be an int, got 1.0'),
    ('a', True, TypeError, 'offset must be an int, got True'),
])
def test_of_refuses_bad_values(cluster_id, offset, error, message):
    with pytest.raises(error, match=message):
        ConsistencyContext.of(cluster_id, offset)


def test_later_takes_the_greater_offset_of_one_cluster():
    assert A5.later(A9) is A9
    assert A9.later(A5) is A9
    tie = ConsistencyContext.of('cluster-a', 5)
    assert A5.later(tie) is A5
    assert A5.later(UNKNOWN) is A5
    assert UNKNOWN.later(A5) is A5
    assert UNKNOWN.later(UNKNOWN) is UNKNOWN
    with pytest.raises(ValueError, match="two clusters cannot be compared: 'cluster-a' and 'cluster-b'"):
        A5.later(B7)
    with pytest.raises(TypeError, match='expected a ConsistencyContext'):
        A5.later(('cluster-a', 6))


def test_bytes_round_trip_and_are_versioned():
    for context in (A5, B7, UNKNOWN, ConsistencyContext.of('ü-cluster', 2 ** 63 - 1)):
        blob = context.to_bytes()
        assert ConsistencyContext.from_bytes(blob) == context
        assert ConsistencyContext.from_bytes(bytearray(blob)) == context
        assert ConsistencyContext.from_bytes(memoryview(blob)) == context
    assert A5.to_bytes() == b'KC\x01' + (5).to_bytes(8, 'big') + b'\x00\x09cluster-a'
    assert ConsistencyContext.from_bytes(UNKNOWN.to_bytes()) is UNKNOWN
    assert pickle.loads(pickle.dumps(A5)) == A5


@pytest.mark.parametrize('blob, message', [
    (b'', 'not a consistency context'),
    (b'XX\x01' + bytes(10), 'not a consistency context'),
    (b'KC\x02' + (5).to_bytes(8, 'big') + b'\x00\x01a', 'format version 2 is not known to this kafka_kip '
                                                           '\\(it reads version 1\\)'),
    (b'KC\x01' + (5).to_bytes(8, 'big') + b'\x00\x05ab', 'has 2 cluster id bytes, its header says 5'),
    (b'KC\x01' + (5).to_bytes(8, 'big') + b'\x00\x01\xff', 'cluster id is not UTF-8'),
    (b'KC\x01' + (-5).to_bytes(8, 'big', signed=True) + b'\x00\x01a', 'offset must be in 0..2'),
    (b'KC\x01' + (3).to_bytes(8, 'big') + b'\xff\xff', 'malformed unknown consistency context'),
])
def test_from_bytes_refuses_what_it_cannot_read(blob, message):
    with pytest.raises(ValueError, match=message):
        ConsistencyContext.from_bytes(blob)


def test_from_bytes_needs_bytes():
    with pytest.raises(TypeError, match='read from bytes, got str'):
        ConsistencyContext.from_bytes('KC')


def test_memory_store_keeps_the_latest():
    store = ConsistencyContextStore.empty()
    assert store.read() is UNKNOWN
    assert store.store_latest(UNKNOWN) is False
    assert store.store_latest(A5) is True
    assert store.store_latest(ConsistencyContext.of('cluster-a', 5)) is False
    assert store.read() is A5
    assert store.store_latest(A9) is True
    assert store.store_latest(A5) is False
    assert store.read() is A9
    with pytest.raises(ValueError, match="'cluster-a' and 'cluster-b'"):
        store.store_latest(B7)
    assert store.read() is A9
    with pytest.raises(TypeError, match='expected a ConsistencyContext'):
        store.store_latest(9)
    assert ConsistencyContextStore.of(B7).read() is B7


def test_memory_store_from_many_threads_ends_at_the_highest_offset():
    store = ConsistencyContextStore.empty()
    stored = []

    def write(start):
        stored.append(sum(store.store_latest(ConsistencyContext.of('c', offset)) for offset in range(start, 2000, 4)))

    threads = [threading.Thread(target=write, args=(start,)) for start in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.read() == ConsistencyContext.of('c', 1999)
    assert 1 <= sum(stored) <= 2000


def test_eventually_consistent_store_keeps_nothing():
    store = ConsistencyContextStore.eventually_consistent()
    assert store is ConsistencyContextStore.eventually_consistent()
    assert store.store_latest(A9) is False
    assert store.read() is UNKNOWN
    assert store.shares_writes is False
    assert ConsistencyContextStore.empty().shares_writes is True


def test_file_store(tmp_path):
    path = tmp_path / 'context'
    store = ConsistencyContextStore.file(path)
    assert store.read() is UNKNOWN
    assert not path.exists()
    assert store.store_latest(A5) is True
    assert path.read_bytes() == A5.to_bytes()
    other = ConsistencyContextStore.file(str(path))  # another opener of the same file
    assert other.read() == A5
    assert other.store_latest(A9) is True
    assert store.read() == A9
    assert store.store_latest(A5) is False
    with pytest.raises(ValueError, match="'cluster-a' and 'cluster-b'"):
        store.store_latest(B7)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['context', 'context.lock']  # no temporary left
    path.write_bytes(b'garbage')
    with pytest.raises(ValueError, match=f'{path} does not hold a consistency context'):
        store.read()


def _store_range(path, start, stop):
    store = ConsistencyContextStore.file(path)
    for offset in range(start, stop):
        store.store_latest(ConsistencyContext.of('c', offset))


def test_file_store_shared_by_processes_ends_at_the_highest_offset(tmp_path):
    path = tmp_path / 'context'
    context = multiprocessing.get_context('spawn')
    writers = [context.Process(target=_store_range, args=(str(path), start, start + 300)) for start in (0, 150, 100)]
    for writer in writers:
        writer.start()
    reader = ConsistencyContextStore.file(path)
    seen = []
    while any(writer.is_alive() for writer in writers):
        seen.append(reader.read().offset)  # never a torn or missing file once the first store happened
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    assert reader.read() == ConsistencyContext.of('c', 449)
    after_first = seen[next((i for i, offset in enumerate(seen) if offset >= 0), len(seen)):]
    assert all(offset >= 0 for offset in after_first)


def test_stores_are_refused_as_configs_when_not_stores():
    with pytest.raises(KafkaConfigurationError, match="consistency_context_store must be a kafka_kip "
                                                      "ConsistencyContextStore .* got 'ctx'"):
        kafka_kip.KafkaProducer(bootstrap_servers='127.0.0.1:1', consistency_context_store='ctx')
    with pytest.raises(KafkaConfigurationError, match='got 5'):
        kafka_kip.KafkaConsumer(bootstrap_servers='127.0.0.1:1', consistency_context_store=5)
    with pytest.raises(KafkaConfigurationError, match='got 5'):
        kafka_kip.KafkaAdminClient(bootstrap_servers='127.0.0.1:1', consistency_context_store=5)
    with pytest.raises(TypeError, match='ClientFactory needs a ConsistencyContextStore, got None'):
        kafka_kip.ClientFactory(None)
    with pytest.raises(ValueError, match='max_block_ms must be an int >= 0'):
        kafka_kip.ClientFactory(ConsistencyContextStore.empty(), max_block_ms=-1)
