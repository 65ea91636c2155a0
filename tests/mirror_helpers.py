"""Helpers shared by the mirror tests: groups' committed offsets and raw source writes."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import kafka
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

from kafka_kip.protocol.requests import produce_request
from kafka_kip.testing import ReferenceCluster
from kafka_kip.testing.conditions import wait_until
from kafka_kip.testing.wire_client import WireClient

REPO = Path(__file__).resolve().parents[1]


def mirror_cli(*args: str) -> subprocess.Popen:
    """``kafka-kip mirror ARGS`` in a child process running this checkout (text pipes for its output)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, '-m', 'kafka_kip', 'mirror', *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def write_at(cluster: ReferenceCluster, tp: TopicPartition, base: int, values: list[bytes]) -> None:
    """One batch of ``values`` at offsets ``base..`` on the leader (KIP-391 produce with offsets)."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**30)
    now = int(time.time() * 1000)  # a target's time-based retention keeps records of now
    for i, value in enumerate(values):
        builder.append(i, now, b'k%d' % ((base + i) % 7), value, [])
    data = builder.build()
    data[0:8] = base.to_bytes(8, 'big')
    with WireClient(cluster.brokers()[cluster.leader(tp)]) as wire:
        answer = wire.request(produce_request(tp.topic, tp.partition, bytes(data), use_offset=True))
    assert answer.responses[0].partition_responses[0].error_code == 0


def commit_groups(bootstrap: str, offsets: Mapping[str, Mapping[TopicPartition, int]]) -> None:
    """Commit ``{group: {partition: offset}}`` (no leader epoch) as a client outside the groups does (OffsetCommit
    with no member id), through one admin client."""
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        for group, committed in offsets.items():
            errors = admin.alter_group_offsets(group, {tp: kafka.OffsetAndMetadata(offset, '', -1)
                                                       for tp, offset in committed.items()})
            assert set(errors.values()) == {kafka.errors.NoError}, (group, errors)
    finally:
        admin.close()


def committed_offsets(bootstrap: str, groups: Iterable[str], tp: TopicPartition) -> dict[str, int | None]:
    """Each group's committed offset of ``tp`` (None: no commit), read through one admin client."""
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found = {group: admin.list_group_offsets({group: [tp]})[group].get(tp) for group in groups}
    finally:
        admin.close()
    return {group: None if committed is None or committed.offset < 0 else committed.offset
            for group, committed in found.items()}


def first_record_of_group(bootstrap: str, group: str, tp: TopicPartition) -> tuple[int, bytes]:
    """Where ``group`` resumes on ``tp`` of the cluster at ``bootstrap``: the first record it reads."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                   auto_offset_reset='none')
    consumer.assign([tp])
    try:
        records = wait_until(lambda: consumer.poll(timeout_ms=200).get(tp), f'group {group} reading {tp}')
    finally:
        consumer.close(autocommit=False)
    return records[0].offset, records[0].value
