"""librdkafka's KIP-848 consumer (confluent-kafka, ``group.protocol=consumer``) on the reference cluster and, as the
baseline the same expectations come from, on Apache Kafka."""
from __future__ import annotations

import uuid

import pytest

from kafka_kip_reference.fixtures.conditions import wait_until

pytestmark = pytest.mark.kip848

confluent_kafka = pytest.importorskip('confluent_kafka')
confluent_admin = pytest.importorskip('confluent_kafka.admin')

def produce(bootstrap: str, topic: str, start: int, end: int) -> None:
    producer = confluent_kafka.Producer({'bootstrap.servers': bootstrap, 'acks': 'all'})
    for i in range(start, end):
        producer.produce(topic, key=f'k{i}', value=f'v{i}', partition=i % 6)
    assert producer.flush(30) == 0


def poll_until(members: list, seen: list[tuple[int, int]], count: int, sizes: list[int]) -> list[set[int]]:
    """Poll every member until ``count`` records arrived and the members hold ``sizes`` partitions (sorted)."""
    def settled() -> list[set[int]] | None:
        for member in members:
            message = member.poll(0.05)
            if message is not None:
                assert message.error() is None, message.error()
                seen.append((message.partition(), message.offset()))
        owned = [{tp.partition for tp in member.assignment()} for member in members]
        return owned if len(seen) >= count and sorted(map(len, owned)) == sizes else None

    return wait_until(settled, f'{count} records and assignments {sizes}', timeout=90)


def test_three_members_read_every_record_once_and_hand_over(bootstrap_848: str) -> None:
    """3 members over 6 partitions hold 2 each, disjoint and complete, and read 60 records once; one closes, the two
    others hold 3 each and read exactly the 12 new records from the committed offsets."""
    bootstrap = bootstrap_848
    admin = confluent_admin.AdminClient({'bootstrap.servers': bootstrap})
    topic = f'rdk-848-{uuid.uuid4().hex[:8]}'
    admin.create_topics([confluent_admin.NewTopic(topic, 6, 3)])[topic].result(30)
    members = [confluent_kafka.Consumer({
        'bootstrap.servers': bootstrap, 'group.id': f'{topic}-g', 'group.protocol': 'consumer',
        'auto.offset.reset': 'earliest', 'enable.auto.commit': False}) for _ in range(3)]
    try:
        for member in members:
            member.subscribe([topic])
        seen: list[tuple[int, int]] = []
        poll_until(members, seen, 0, [2, 2, 2])
        produce(bootstrap, topic, 0, 60)
        owned = poll_until(members, seen, 60, [2, 2, 2])
        assert (len(seen), len(set(seen)), sorted(set().union(*owned)), sum(map(len, owned))) == (
            60, 60, [0, 1, 2, 3, 4, 5], 6)
        for member in members:
            member.commit(asynchronous=False)
        members.pop().close()
        seen.clear()
        poll_until(members, seen, 0, [3, 3])
        produce(bootstrap, topic, 60, 72)
        owned = poll_until(members, seen, 12, [3, 3])
        assert (sorted(seen), sorted(set().union(*owned))) == (
            sorted((i % 6, 10 + i // 6) for i in range(12)), [0, 1, 2, 3, 4, 5])
    finally:
        for member in members:
            member.close()
