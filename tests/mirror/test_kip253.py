"""KIP-253 through the mirror: a topic growing on the source while keyed records are written and the mirror is
behind. The target grows only once its prior partitions are copied up to the source's thresholds, so its
expansion records the same thresholds, its partitions equal the source's record for record (offsets 1:1), and a
kafka_kip consumer group on the target returns each key in the order it was sent.
"""
from __future__ import annotations

import threading

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.structs import TopicPartition

from kafka_kip import KafkaConsumer
from kafka_kip.mirror import Mirror
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.control import Delay
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.mirror.helpers import contents, running
from tests.support.keyed import inversions, produce

pytestmark = pytest.mark.kip253

PRODUCE = ApiKey.Produce
def thresholds(cluster: ReferenceCluster, old_count: int) -> list[int]:
    """Where the leader epoch the expansion bumped each prior partition to starts."""
    return [cluster.epochs(TopicPartition('t', p))[-1][1] for p in range(old_count)]


def metadata_requests(mirror: Mirror) -> int:
    return sum(n for api, n in mirror.summary().requests['source'].items() if api.startswith('Metadata'))


def test_the_target_grows_after_its_prior_partitions_reach_the_source_thresholds_and_keeps_key_order(reference_cluster_factory) -> None:
    source = reference_cluster_factory(brokers=1)
    target = reference_cluster_factory(brokers=1)
    source.create_topic('t', partitions=2, replication_factor=1)
    release = threading.Event()

    def hold_writes(request):
        if request.client_id == 'kafka-kip-mirror-target' and any(
                data.name == 't' for data in request.request.topic_data):
            return Delay(until=release)
        return None

    mirror = Mirror(source.bootstrap_servers, target.bootstrap_servers, 't', offset_mode='broker',
                    topic_refresh_interval_ms=100)
    with running(mirror):
        wait_until(lambda: target.topic_id('t'), 'the target topic created')
        hold = target.control(PRODUCE, hold_writes, keep=True)
        produce(source, range(200))
        source.create_partitions('t', 4)
        source_thresholds = thresholds(source, 2)
        assert sum(source_thresholds) == 200
        seen = metadata_requests(mirror)
        wait_until(lambda: metadata_requests(mirror) >= seen + 3, 'the mirror looked at the source topics again')
        assert mirror.summary().topic_changes == ['created t (2 partitions, replication factor 1)']
        hold.remove()
        release.set()  # the prior partitions' records reach the target, then it grows
        wait_until(lambda: len(mirror.summary().partitions) == 4, 'the new partitions mirrored')
        assert thresholds(target, 2) == source_thresholds
        produce(source, range(200, 400))
        wait_until(lambda: sum(len(target.records(TopicPartition('t', p))) for p in range(4)) == 400,
                   'everything copied')
    assert mirror.result.topic_changes == ['created t (2 partitions, replication factor 1)',
                                           'grew t from 2 to 4 partitions']
    for p in range(4):
        assert contents(target, 't', p) == contents(source, 't', p)
    consumer = KafkaConsumer('t', bootstrap_servers=target.bootstrap_servers, group_id='g',
                             auto_offset_reset='earliest', max_poll_records=7)
    returned: list[tuple[bytes, int]] = []
    try:
        wait_until(lambda: returned.extend((r.key, int(r.value)) for records in consumer.poll(200).values()
                                           for r in records) or len(returned) >= 400, 'the target read')
    finally:
        consumer.close()
    assert sorted(value for _, value in returned) == list(range(400))
    assert inversions(returned) == 0
