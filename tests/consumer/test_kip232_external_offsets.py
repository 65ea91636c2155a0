"""examples/external_offsets.py, run as a program against the reference cluster: stop, restart, resume."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaProducer

from kafka_kip import TopicPartition
from kafka_kip_reference import ReferenceCluster

pytestmark = pytest.mark.kip232

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / 'examples' / 'external_offsets.py'
TOPIC = 'external'


@pytest.fixture
def cluster():
    with ReferenceCluster(brokers=1) as cluster:
        cluster.create_topic(TOPIC, partitions=2)
        yield cluster


def produce(cluster: ReferenceCluster, per_partition: int, prefix: str) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        for partition in (0, 1):
            for i in range(per_partition):
                producer.send(TOPIC, value=f'{prefix}-{partition}-{i}'.encode(), partition=partition).get(10)
    finally:
        producer.close()


def run_example(cluster: ReferenceCluster, db: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get('PYTHONPATH')])))
    return subprocess.run([sys.executable, str(EXAMPLE), '--bootstrap-servers', cluster.bootstrap_servers,
                           '--topic', TOPIC, '--db', str(db), '--idle-ms', '1000', *extra],
                          capture_output=True, text=True, timeout=60, env=env, check=False)


def stored(db: Path) -> tuple[list[tuple], dict[int, int]]:
    with sqlite3.connect(db) as store:
        results = store.execute('SELECT partition, offset, value FROM results ORDER BY partition, offset').fetchall()
        positions = dict(store.execute('SELECT partition, offset FROM positions'))
    return results, positions


def test_resumes_from_positions_stored_with_offset_epochs(cluster: ReferenceCluster, tmp_path: Path) -> None:
    db = tmp_path / 'offsets.sqlite'
    produce(cluster, 6, 'old')
    expected = [(p, i, f'old-{p}-{i}'.encode()) for p in (0, 1) for i in range(6)]

    first = run_example(cluster, db, '--max-records', '4')
    assert (first.returncode, first.stdout) == (0, 'processed 4 records\n'), first.stderr[-2000:]
    results, positions = stored(db)
    assert len(results) == 4 and set(results) <= set(expected)
    # Each stored position is just after the partition's last stored result.
    assert positions == {p: 1 + max(o for q, o, _ in results if q == p) for p in {q for q, _, _ in results}}

    second = run_example(cluster, db)                 # a restart: resumes, no record twice
    assert (second.returncode, second.stdout) == (0, 'processed 8 records\n'), second.stderr[-2000:]
    assert stored(db) == (expected, {0: 6, 1: 6})

    old_epochs = {p: cluster.partition_epoch(TopicPartition(TOPIC, p)) for p in (0, 1)}
    cluster.delete_topic(TOPIC)
    cluster.create_topic(TOPIC, partitions=2)
    produce(cluster, 8, 'new')
    third = run_example(cluster, db)                  # the stored positions are of the deleted topic
    held = {TopicPartition(TOPIC, p): epoch for p, epoch in old_epochs.items()}
    assert (third.returncode, third.stdout) == \
        (2, f'stored positions belong to a deleted incarnation of the topic: {held}\n')
    assert stored(db) == (expected, {0: 6, 1: 6})    # nothing of the new topic was processed
