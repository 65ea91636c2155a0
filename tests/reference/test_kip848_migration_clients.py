"""Online upgrade and downgrade between classic and KIP-848 consumer groups: a classic kafka_kip consumer and
librdkafka's consumer-protocol consumer (confluent-kafka ``group.protocol=consumer``, unmodified) share one group,
on the reference cluster and, as the baseline the same expectations come from, on Apache Kafka 4.4.

The classic member is kafka_kip's, not stock kafka-python 3.0.12's: that one, subscribed before it knows the
topic's partitions, rejoins when they arrive, and a short ``poll()`` during that join can leave it unfinished for
good or mid-rebalance at the next commit (seen on loaded machines; kafka_kip's ``ConsumerCoordinator`` completes it)."""
from __future__ import annotations

import uuid

import pytest

from kafka_kip import KafkaConsumer
from kafka_kip_reference.fixtures.conditions import wait_until

pytestmark = pytest.mark.kip848
confluent_kafka = pytest.importorskip('confluent_kafka')
confluent_admin = pytest.importorskip('confluent_kafka.admin')

from tests.reference.test_kip848_clients import produce  # noqa: E402  (after the skip: it needs confluent_kafka)


def group_type(admin: object, group_id: str) -> str:
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=10).valid}  # type: ignore[attr-defined]
    return listed[group_id].type.name


class Members:
    """A classic kafka_kip member and, once added, a librdkafka consumer-protocol member of one group."""

    def __init__(self, classic: KafkaConsumer) -> None:
        self.classic = classic
        self.modern: object | None = None
        self.seen: list[tuple[int, int]] = []

    def poll(self) -> None:
        for records in self.classic.poll(timeout_ms=50).values():
            self.seen.extend((r.partition, r.offset) for r in records)
        if self.modern is not None:
            message = self.modern.poll(0.05)  # type: ignore[attr-defined]
            if message is not None:
                assert message.error() is None, message.error()
                self.seen.append((message.partition(), message.offset()))

    def owned(self) -> list[list[int]]:
        owned = [sorted(tp.partition for tp in self.classic.assignment())]
        if self.modern is not None:
            owned.append(sorted(tp.partition for tp in self.modern.assignment()))  # type: ignore[attr-defined]
        return owned

    def until(self, count: int, sizes: list[int]) -> list[list[int]]:
        """Poll until ``count`` records arrived and the members hold ``sizes`` partitions (in member order)."""
        def settled() -> list[list[int]] | None:
            self.poll()
            owned = self.owned()
            return owned if len(self.seen) >= count and list(map(len, owned)) == sizes else None

        return wait_until(settled, f'{count} records and assignment sizes {sizes}', timeout=90)


def test_classic_group_upgrades_when_a_consumer_member_joins_and_downgrades_when_it_leaves(bootstrap_848: str) -> None:
    """A classic group of one kafka_kip member holding 6 partitions becomes a consumer group when a librdkafka
    consumer-protocol member joins (3 partitions each, every record once from the committed offsets) and a classic
    group again when that member leaves (the classic member holds all 6 and reads on from the committed offsets)."""
    bootstrap = bootstrap_848
    admin = confluent_admin.AdminClient({'bootstrap.servers': bootstrap})
    topic = f'migrate-{uuid.uuid4().hex[:8]}'
    group_id = f'{topic}-g'
    admin.create_topics([confluent_admin.NewTopic(topic, 6, 3)])[topic].result(30)
    produce(bootstrap, topic, 0, 60)
    members = Members(KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group_id,
                                    auto_offset_reset='earliest', enable_auto_commit=False,
                                    heartbeat_interval_ms=500, session_timeout_ms=10000))
    try:
        assert members.until(60, [6]) == [[0, 1, 2, 3, 4, 5]]
        assert sorted(members.seen) == sorted((i % 6, i // 6) for i in range(60))
        members.classic.commit()
        assert group_type(admin, group_id) == 'CLASSIC'

        members.modern = confluent_kafka.Consumer({
            'bootstrap.servers': bootstrap, 'group.id': group_id, 'group.protocol': 'consumer',
            'auto.offset.reset': 'earliest', 'enable.auto.commit': False})
        members.modern.subscribe([topic])
        members.seen.clear()
        owned = members.until(0, [3, 3])
        assert sorted(owned[0] + owned[1]) == [0, 1, 2, 3, 4, 5]
        assert group_type(admin, group_id) == 'CONSUMER'
        produce(bootstrap, topic, 60, 120)
        owned = members.until(60, [3, 3])
        assert (sorted(members.seen), sorted(owned[0] + owned[1])) == (
            sorted((i % 6, i // 6) for i in range(60, 120)), [0, 1, 2, 3, 4, 5])
        members.classic.commit()
        members.modern.commit(asynchronous=False)

        members.modern.close()
        members.modern = None
        members.seen.clear()
        assert members.until(0, [6]) == [[0, 1, 2, 3, 4, 5]]
        wait_until(lambda: group_type(admin, group_id) == 'CLASSIC', 'the group downgraded to classic', timeout=30)
        produce(bootstrap, topic, 120, 150)
        members.until(30, [6])
        assert sorted(members.seen) == sorted((i % 6, i // 6) for i in range(120, 150))
    finally:
        members.classic.close()
        if members.modern is not None:
            members.modern.close()
