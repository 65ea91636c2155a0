"""The demo's naive replicator: a consume->produce loop on unmodified kafka-python, as people write it.

A scenario file for :class:`kafka_kip_reference.fixtures.fresh.FreshProcess`: it runs in a fresh interpreter that never
imports kafka_kip (the demo's "kafka-python" row is measured on stock kafka-python). Auto-commit,
``auto_offset_reset='earliest'``, records sent to the same partition number of the target topic. The demo
paces its faults by :func:`progress`, which the loop keeps without acting on it.
"""
import threading
from typing import Any

import kafka

_loop: dict[str, Any] = {}


def start(source: str, target: str, source_topic: str, target_topic: str, metadata_max_age_ms: int) -> None:
    """Start the loop in a thread of this process."""
    running = threading.Event()
    running.set()
    thread = threading.Thread(target=_run, args=(running, source, target, source_topic, target_topic,
                                                 metadata_max_age_ms), name='naive-mirror', daemon=True)
    _loop.update(running=running, thread=thread, crash=False, read_to={}, sent=0, answered=0)
    thread.start()


def progress() -> dict[str, Any]:
    """What the loop did so far: ``read_to`` ``[[source partition, offset after the last record read], ...]``,
    ``unanswered`` sends the target has not answered yet, and whether the loop still ``runs``."""
    return {'read_to': sorted(dict(_loop['read_to']).items()), 'unanswered': _loop['sent'] - _loop['answered'],
            'runs': _loop['thread'].is_alive()}


def stop(crash: bool) -> None:
    """Stop the loop: with ``crash`` its buffered records go nowhere and its offsets stay uncommitted."""
    _loop['crash'] = crash
    _loop['running'].clear()
    _loop['thread'].join()


def _run(running: threading.Event, source: str, target: str, source_topic: str, target_topic: str,
         metadata_max_age_ms: int) -> None:
    # session_timeout_ms: 10 s, Kafka's default before 3.0. With kafka-python's 45 s a member that crashed without
    # leaving the group keeps its partitions that long, and the restarted loop waits as long to read again.
    consumer = kafka.KafkaConsumer(source_topic, bootstrap_servers=source, group_id='naive-mirror',
                                   auto_offset_reset='earliest', metadata_max_age_ms=metadata_max_age_ms,
                                   session_timeout_ms=10_000)
    producer = kafka.KafkaProducer(bootstrap_servers=target, linger_ms=5)
    try:
        while running.is_set():
            for records in consumer.poll(timeout_ms=100).values():
                for r in records:
                    future = producer.send(target_topic, key=r.key, value=r.value, partition=r.partition,
                                           timestamp_ms=r.timestamp, headers=list(r.headers))
                    _loop['sent'] += 1
                    future.add_both(_answered)
                    _loop['read_to'][r.partition] = r.offset + 1
    finally:
        if _loop['crash']:
            producer.close(timeout=0)
            consumer.close(autocommit=False)
        else:
            producer.flush()
            producer.close()
            consumer.close()


def _answered(_result: Any) -> None:
    _loop['answered'] += 1  # on the producer's thread, the only one that counts answers
