"""KAFKA-6262, the motivation of KIP-232, scripted on the reference cluster.

A MirrorMaker-style consumer (``auto_offset_reset='earliest'``) is at offset 200 of a partition when one
metadata response comes from a broker whose metadata is delayed: it still names the old leader, a zombie
whose log ends at 100. kafka-python follows it, fetches offset 200 from the zombie, gets
OFFSET_OUT_OF_RANGE and rewinds to the earliest offset: everything is mirrored a second time. kafka_kip
refuses the outdated response and keeps fetching from the real leader.
"""
import time

import kafka
from kafka.structs import TopicPartition

from kafka_kip.metadata import KipNetClient
from kafka_kip.testing import ReferenceCluster

TP = TopicPartition('src', 0)


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(0.005)


def refresh_from(manager, broker_id):
    """One metadata request to ``broker_id``, on the client's network thread."""
    wait_until(lambda: not manager.cluster.metadata_refresh_in_progress)
    future = manager.call_soon(manager.cluster.refresh_metadata, broker_id)
    wait_until(lambda: future.is_done)
    if future.failed():
        raise future.exception


def record_fetches(manager):
    """The Fetch requests the consumer sends: ``[(broker id, response future), ...]``, in order."""
    send, fetches = manager.send, []

    def recording_send(request, node_id=None, **kwargs):
        future = send(request, node_id=node_id, **kwargs)
        if request.API_KEY == 1:
            fetches.append((node_id, future))
        return future

    manager.send = recording_send
    return fetches


def mirror_after_stale_metadata(kip):
    """The offsets the mirror consumer reads after the stale metadata response."""
    with ReferenceCluster(brokers=3) as cluster:
        cluster.create_topic('src', partitions=1, replication_factor=3)
        producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks='all',
                                       kafka_client=KipNetClient)
        extra = {'kafka_client': KipNetClient} if kip else {}
        consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                                       auto_offset_reset='earliest', fetch_max_wait_ms=100, **extra)
        offsets = []

        def produce(start, end):
            for offset in range(start, end):
                producer.send('src', value=b'%d' % offset, partition=0)
            producer.flush()

        def mirror_until(condition):
            deadline = time.monotonic() + 10
            while not condition():
                assert time.monotonic() < deadline, f'mirrored up to {offsets[-1:]}'
                for records in consumer.poll(timeout_ms=100).values():
                    offsets.extend(record.offset for record in records)

        try:
            produce(0, 100)
            consumer.assign([TP])
            mirror_until(lambda: offsets[-1:] == [99])

            cluster.delay_metadata(0)         # broker 0: leader at epoch 0 with 100 records, forever
            assert cluster.elect_leader(TP, 1) == 1
            refresh_from(producer._sender._client._manager, 1)
            produce(100, 200)
            refresh_from(consumer._manager, 1)
            mirror_until(lambda: offsets[-1:] == [199])
            assert offsets == list(range(200))

            fetches = record_fetches(consumer._manager)
            mark = len(offsets)
            refresh_from(consumer._manager, 0)    # the stale response
            # New records only once the consumer has acted on it: every fetch sent before it has been
            # answered, and the first one sent after it too.
            sent = len(fetches)
            mirror_until(lambda: len(fetches) > sent and all(f.is_done for _, f in fetches[:sent + 1]))
            produce(200, 250)
            mirror_until(lambda: offsets[-1] == 249 or 99 in offsets[mark:])
            cluster.release_metadata(0)
            mirror_until(lambda: offsets[-1] == 249)
            assert cluster.internal_errors == []
            return offsets[mark:]
        finally:
            consumer.close()
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
