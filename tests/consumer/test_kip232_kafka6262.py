"""KAFKA-6262, the motivation of KIP-232, scripted on the reference cluster.

A MirrorMaker-style consumer (``auto_offset_reset='earliest'``) is at offset 200 of a partition when one
metadata response comes from a broker whose metadata is delayed: it still names the old leader, a zombie
whose log ends at 100. kafka-python follows it, fetches offset 200 from the zombie, gets
OFFSET_OUT_OF_RANGE and rewinds to the earliest offset: everything is mirrored a second time. kafka_kip
refuses the outdated response and keeps fetching from the real leader.

Each consumer runs in a fresh process (tests/support/scenarios/consumer.py); kafka-python's in one that never imported
kafka_kip, so the figure printed for it is stock kafka-python's.
"""
from pathlib import Path

import kafka
import pytest
from kafka.structs import TopicPartition

from kafka_kip.metadata import KipNetClient
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.fresh import FreshProcess

pytestmark = pytest.mark.kip232

TP = TopicPartition('src', 0)
CONSUMER = Path(__file__).resolve().parents[1] / 'support' / 'scenarios' / 'consumer.py'


def refresh_from(manager, broker_id):
    """One metadata request to ``broker_id``, on the client's network thread."""
    wait_until(lambda: not manager.cluster.metadata_refresh_in_progress, 'no metadata refresh in progress')
    future = manager.call_soon(manager.cluster.refresh_metadata, broker_id)
    wait_until(lambda: future.is_done, f'the metadata response of broker {broker_id}')
    if future.failed():
        raise future.exception


def mirror_after_stale_metadata(kip):
    """The offsets the mirror consumer reads after the stale metadata response."""
    with ReferenceCluster(brokers=3) as cluster, FreshProcess(CONSUMER, stock=not kip) as mirror:
        cluster.create_topic('src', partitions=1, replication_factor=3)
        producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all',
                                       kafka_client=KipNetClient)

        def produce(start, end):
            for offset in range(start, end):
                producer.send('src', value=b'%d' % offset, partition=0)
            producer.flush()

        try:
            produce(0, 100)
            mirror.call('start', kip, {'bootstrap_servers': cluster.bootstrap_servers, 'enable_auto_commit': False,
                                       'auto_offset_reset': 'earliest', 'fetch_max_wait_ms': 100})
            mirror.call('assign', [['src', 0]])
            mirror.call('poll_until_offset', 99)

            cluster.delay_metadata(0)         # broker 0: leader at epoch 0 with 100 records, forever
            assert cluster.elect_leader(TP, 1) == 1
            refresh_from(producer._sender._client._manager, 1)
            produce(100, 200)
            mirror.call('refresh_from', 1)
            seen = mirror.call('poll_until_offset', 199)
            assert [r[0] for r in seen['records']] == list(range(200))

            mark, sent = len(seen['records']), len(seen['fetched_from'])
            mirror.call('refresh_from', 0)    # the stale response
            # New records only once the consumer has acted on it: every fetch sent before it has been
            # answered, and the first one sent after it too.
            mirror.call('poll_until_fetches_answered', sent)
            produce(200, 250)
            mirror.call('poll_until_offset_or_rewind', 249, mark, 99)
            cluster.release_metadata(0)
            seen = mirror.call('poll_until_offset', 249)
            mirror.call('close')
            assert cluster.internal_errors == []
            return [r[0] for r in seen['records'][mark:]]
        finally:
            producer.close(timeout=5)


def test_kafka6262_reconsumed_records():
    stock = mirror_after_stale_metadata(kip=False)
    kip = mirror_after_stale_metadata(kip=True)
    stock_reconsumed = sum(1 for offset in stock if offset < 200)
    kip_reconsumed = sum(1 for offset in kip if offset < 200)
    print(f'KAFKA-6262: records re-consumed after one stale metadata response: '
          f'kafka-python {kafka.__version__} {stock_reconsumed}, kafka_kip {kip_reconsumed}')
    assert stock == list(range(250)) and stock_reconsumed == 200
    assert kip == list(range(200, 250)) and kip_reconsumed == 0
