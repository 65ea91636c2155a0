"""Keep consumer positions outside Kafka -- in SQLite, next to the results -- and resume from them (KIP-232).

Every batch is processed (here: its values are stored) and the position it leads to is saved in the same
SQLite transaction, as ``offset`` plus the opaque ``offset_epoch`` bytes from
``consumer.position_and_offset_epoch(tp)``. On start the consumer seeks to each stored position with
``seek(tp, offset, offset_epoch=...)``, so a restart continues exactly after the last stored record, and:

- if the topic was deleted and recreated meanwhile, ``poll()`` raises ``InvalidPartitionEpochError``
  instead of reading the new topic from an offset that belonged to the old one (exit status 2);
- if the log was truncated below a stored position (unclean leader election), ``poll()`` raises
  ``TruncatedPartitionError`` with the offset where the log diverged (exit status 3).

    python examples/external_offsets.py --bootstrap-servers HOST:PORT --topic TOPIC --db offsets.sqlite \\
        [--max-records N] [--idle-ms MS]

Consumes until ``--max-records`` records are processed or no record arrives for ``--idle-ms``.
"""
from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from collections.abc import Sequence

from kafka_kip import KafkaConsumer, TopicPartition
from kafka_kip.errors import InvalidPartitionEpochError, TruncatedPartitionError

SCHEMA = """
CREATE TABLE IF NOT EXISTS positions (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL, offset_epoch BLOB NOT NULL,
    PRIMARY KEY (topic, partition));
CREATE TABLE IF NOT EXISTS results (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL, value BLOB,
    PRIMARY KEY (topic, partition, offset));
"""


def open_store(path: str) -> sqlite3.Connection:
    """The SQLite database holding results and positions (created if missing)."""
    store = sqlite3.connect(path)
    store.executescript(SCHEMA)
    return store


def resume(consumer: KafkaConsumer, store: sqlite3.Connection, partitions: list[TopicPartition]) -> None:
    """Seek every partition to its stored position (with its offset epoch), or to its beginning."""
    stored = {TopicPartition(topic, partition): (offset, offset_epoch)
              for topic, partition, offset, offset_epoch
              in store.execute('SELECT topic, partition, offset, offset_epoch FROM positions')}
    for tp in partitions:
        if tp in stored:
            offset, offset_epoch = stored[tp]
            consumer.seek(tp, offset, offset_epoch=offset_epoch)
        else:
            consumer.seek_to_beginning(tp)


def save(consumer: KafkaConsumer, store: sqlite3.Connection, tp: TopicPartition, records: list) -> None:
    """Store the batch's results and the position after it in one transaction."""
    position = consumer.position_and_offset_epoch(tp)
    with store:
        store.executemany('INSERT INTO results VALUES (?, ?, ?, ?)',
                          [(tp.topic, tp.partition, r.offset, r.value) for r in records])
        store.execute('INSERT OR REPLACE INTO positions VALUES (?, ?, ?, ?)',
                      (tp.topic, tp.partition, position.offset, position.offset_epoch))


def consume(bootstrap_servers: str, topic: str, db: str, max_records: int | None = None,
            idle_ms: int = 2000) -> int:
    """Process ``topic`` into ``db`` from the stored positions on; returns how many records were processed."""
    store = open_store(db)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                             auto_offset_reset='none')
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(partitions)
        resume(consumer, store, partitions)
        processed = 0
        idle_since = time.monotonic()
        while max_records is None or processed < max_records:
            limit = None if max_records is None else max_records - processed
            batches = consumer.poll(timeout_ms=200, max_records=limit)
            for tp, records in batches.items():
                save(consumer, store, tp, records)
                processed += len(records)
            if batches:
                idle_since = time.monotonic()
            elif (time.monotonic() - idle_since) * 1000 >= idle_ms:
                break
        return processed
    finally:
        consumer.close()
        store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--bootstrap-servers', required=True)
    parser.add_argument('--topic', required=True)
    parser.add_argument('--db', required=True, help='SQLite file for results and positions')
    parser.add_argument('--max-records', type=int, default=None)
    parser.add_argument('--idle-ms', type=int, default=2000, help='stop after this long without records')
    args = parser.parse_args(argv)
    try:
        processed = consume(args.bootstrap_servers, args.topic, args.db, args.max_records, args.idle_ms)
    except InvalidPartitionEpochError as exc:
        print(f'stored positions belong to a deleted incarnation of the topic: {exc.partition_epochs}')
        return 2
    except TruncatedPartitionError as exc:
        print(f'the log was truncated below stored positions: {exc.truncated_offsets}')
        return 3
    print(f'processed {processed} records')
    return 0


if __name__ == '__main__':
    sys.exit(main())
