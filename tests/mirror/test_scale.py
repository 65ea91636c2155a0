"""The mirror at scale: start-up and copying batched per broker, whatever the partition count.

Requests are counted where they arrive (a control on every broker of both clusters), by the mirror's client id.
"""
from __future__ import annotations

from collections import Counter

import kafka
import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip.mirror import Mirror
from kafka_kip_reference import ReferenceCluster

INIT_PRODUCER_ID, LIST_OFFSETS, FETCH = ApiKey.InitProducerId, ApiKey.ListOffsets, ApiKey.Fetch
PRODUCE, OFFSET_FOR_LEADER_EPOCH = ApiKey.Produce, ApiKey.OffsetForLeaderEpoch
NAMES = {INIT_PRODUCER_ID: 'InitProducerIdRequest', LIST_OFFSETS: 'ListOffsetsRequest', FETCH: 'FetchRequest',
         PRODUCE: 'ProduceRequest'}


def count_requests(cluster: ReferenceCluster, client_id: str) -> Counter[int]:
    """Requests of ``client_id`` reaching any broker of ``cluster``, by API key (counted from now on)."""
    seen: Counter[int] = Counter()

    def note(request) -> None:
        if request.client_id == client_id:
            seen[request.api_key] += 1

    cluster.control(None, note, keep=True)
    return seen


def one_record_per_partition(cluster: ReferenceCluster, topic: str, partitions: int) -> None:
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=20)
    for p in range(partitions):
        producer.send(topic, value=b'v-%d' % p, partition=p)
    producer.flush()
    producer.close()


@pytest.mark.parametrize('partitions', [30, 300])
def test_requests_do_not_grow_with_the_partition_count(reference_cluster_factory, partitions: int) -> None:
    source = reference_cluster_factory(brokers=3)
    target = reference_cluster_factory(brokers=1)
    source.create_topic('wide', partitions=partitions, replication_factor=1)  # leaders on all 3 brokers
    one_record_per_partition(source, 'wide', partitions)
    at_source = count_requests(source, 'kafka-kip-mirror-source')
    at_target = count_requests(target, 'kafka-kip-mirror-target')
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, 'wide') as mirror:
        summary = mirror.run(stop_at_end=True)
        sent = {'source': dict(mirror.source.requests_sent), 'target': dict(mirror.target.requests_sent)}
    assert (summary.records, summary.incidents, summary.exit_code) == (partitions, [], 0)
    assert all(source.records(TopicPartition('wide', p))[0].value ==
               target.records(TopicPartition('wide', p))[0].value for p in (0, partitions - 1))
    # one producer id for the whole mirror, not one per partition
    assert at_target[INIT_PRODUCER_ID] == 1
    # every copy request the clients sent reached a broker: none was refused locally by back-pressure
    for side, seen in (('source', at_source), ('target', at_target)):
        assert {key: seen[key] for key in NAMES} == {key: sent[side].get(name, 0) for key, name in NAMES.items()}
    # start-up asks per broker, not per partition: the source's end and log start, the target's end
    # (ListOffsets, then a Fetch for the ends), each one request per broker and question
    assert at_source[LIST_OFFSETS] <= 2 * 3 + 2 and at_target[LIST_OFFSETS] <= 2
    # every partition of a leader in one fetch (a few per broker: the end probes, the data, the empty
    # answer at the end); what one fetch answer brings goes in one produce
    assert at_target[PRODUCE] <= at_source[FETCH] <= 3 * 4
    assert at_source[OFFSET_FOR_LEADER_EPOCH] == 0
