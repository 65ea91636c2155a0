"""Reading a partition to its end as a condition: until the consumer's position reaches the high watermark its
last fetch reported, never "until nothing came for N seconds" (slow on an idle broker, short on a loaded one).
Reading a number of records: until they came, at most for a deadline (a test then asserts the exact records)."""
from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from kafka.structs import TopicPartition

from kafka_kip_reference.fixtures.conditions import wait_until


def read_to_end(consumer: Any, partitions: Iterable[TopicPartition], timeout: float = 30.0) -> list[Any]:
    """Every record ``consumer`` (assigned or subscribed to ``partitions``) returns until, for each partition,
    its position reaches the high watermark of its last fetch: the records up to the end of the log."""
    partitions = list(partitions)
    records: list[Any] = []

    def at_end() -> bool:
        for batch in consumer.poll(timeout_ms=100).values():
            records.extend(batch)
        assigned = consumer.assignment()
        return all(tp in assigned and consumer.highwater(tp) is not None
                   and consumer.position(tp) >= consumer.highwater(tp) for tp in partitions)

    wait_until(at_end, f'{partitions} read to their high watermarks', timeout)
    return records


def poll_records(consumer: Any, count: int, seconds: float = 10.0, tp: TopicPartition | None = None) -> list[Any]:
    """The records ``consumer`` returns (of ``tp`` alone, if given) until ``count`` came or ``seconds`` passed;
    what poll() raises propagates."""
    records: list[Any] = []
    deadline = time.monotonic() + seconds
    while len(records) < count and time.monotonic() < deadline:
        for partition, batch in consumer.poll(timeout_ms=100).items():
            if tp is None or partition == tp:
                records.extend(batch)
    return records


def confluent_messages(consumer: Any, count: int, what: str, timeout: float = 30.0) -> list[Any]:
    """The first ``count`` messages without an error that a confluent-kafka consumer polls, waited for."""
    messages: list[Any] = []

    def enough() -> bool:
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            messages.append(message)
        return len(messages) == count

    wait_until(enough, what, timeout)
    return messages
