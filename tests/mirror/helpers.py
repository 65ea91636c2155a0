"""Helpers shared by the mirror tests: groups' committed offsets, raw source writes, a mirror killed mid-produce."""
from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import kafka
from kafka.protocol.api_key import ApiKey
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

from kafka_kip.mirror import Incident, Mirror, MirrorSummary
from kafka_kip.protocol.constants import UNKNOWN_TOPIC_OR_PARTITION
from kafka_kip.protocol.requests import produce_request
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.broker.control import Delay, Drop
from kafka_kip_reference.broker.model import ClusterError
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.wire_client import WireClient

REPO = Path(__file__).resolve().parents[2]
_COORDINATOR_NOT_READY = (kafka.errors.CoordinatorNotAvailableError, kafka.errors.NotCoordinatorError,
                          kafka.errors.CoordinatorLoadInProgressError)
PRODUCE = ApiKey.Produce


def mirror_cli(*args: str) -> subprocess.Popen:
    """``kafka-kip mirror ARGS`` in a child process running this checkout (text pipes for its output)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, '-m', 'kafka_kip', 'mirror', *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def mirror_to_the_end(*args: str, timeout: float = 60) -> dict:
    """``kafka-kip mirror ARGS --stop-at-end --json`` run to its end, exit code 0: its JSON summary."""
    process = mirror_cli(*args, '--stop-at-end', '--json')
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return json.loads(out)


def mirror_once(source: ReferenceCluster, target: ReferenceCluster, topics: str, **options: Any) -> MirrorSummary:
    """A :class:`~kafka_kip.mirror.Mirror` of ``topics`` with ``options``, run to the source's end: its summary."""
    with Mirror(source.bootstrap_servers, target.bootstrap_servers, topics, **options) as mirror:
        return mirror.run(stop_at_end=True)


def incident_fields(incident: Incident) -> tuple:
    """An incident's kind, whether it stopped the partition, and its ranges: ``(kind, stopped, lost, divergent,
    truncated_at, continued_at)``."""
    return (incident.kind, incident.stopped, incident.lost, incident.divergent, incident.truncated_at,
            incident.continued_at)


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

    def committed_to(group: str, committed: Mapping[TopicPartition, int]) -> bool:
        try:
            errors = admin.alter_group_offsets(group, {tp: kafka.OffsetAndMetadata(offset, '', -1)
                                                       for tp, offset in committed.items()})
        except _COORDINATOR_NOT_READY:
            return False
        if any(error in _COORDINATOR_NOT_READY for error in errors.values()):
            return False
        assert set(errors.values()) == {kafka.errors.NoError}, (group, errors)
        return True

    try:
        for group, committed in offsets.items():
            # (a new cluster has no group coordinator until its offsets topic exists)
            wait_until(functools.partial(committed_to, group, committed), f"group {group} committed, its coordinator ready")
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


def killed_then_restarted(target: ReferenceCluster, tp: TopicPartition, args: Iterable[str], restart: Iterable[str],
                          *, held: int, lands: bool, ready: Callable[[], object], landed: Callable[[], object],
                          while_held: Callable[[], None] = lambda: None) -> tuple[int, dict]:
    """``kafka-kip mirror ARGS`` killed (SIGKILL) while ``target`` holds its ``held``-th produce to ``tp``'s topic,
    then ``kafka-kip mirror RESTART`` run to the end: (records on ``tp`` before the restart, its JSON summary).

    The first mirror's target client is ``first-run``; its produces to the topic after the held one never land.
    Once the held produce arrived and ``ready()``, ``while_held()`` runs, then the kill; the held produce then
    lands (``lands``: waited for until ``landed()``) or is dropped, as a produce in flight when a mirror dies does.
    """
    topic = tp.topic
    release = threading.Event()
    seen: list[int] = []  # correlation ids of the first run's produces to the topic, in arrival order
    dropped: list[int] = []

    def first_run_data(request) -> bool:
        return request.client_id == 'first-run' and any(data.name == topic for data in request.request.topic_data)

    def hold(request):
        if first_run_data(request):
            seen.append(request.correlation_id)
            return Delay(until=release) if len(seen) == held else None
        return None

    def drop_what_follows(request):
        index = seen.index(request.correlation_id) + 1 if first_run_data(request) else 0
        if index > held or (index == held and not lands):
            dropped.append(index)
            return Drop()
        return None

    target.control(PRODUCE, hold, keep=True)
    target.control(PRODUCE, drop_what_follows, keep=True)
    config = Path(tempfile.mkdtemp()) / 'first-run.properties'
    config.write_text('target.client.id=first-run\n')
    first = mirror_cli(*args, '--config', str(config))
    try:
        wait_until(lambda: len(seen) >= held and ready(), f'produce {held} held and the ones before it landed')
        while_held()
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL
    release.set()
    if lands:
        wait_until(landed, 'the held produce to land')
    else:
        wait_until(lambda: held in dropped, 'the held produce to be dropped')
    before = len(target.records(tp))
    return before, mirror_to_the_end(*restart)


def contents(cluster: ReferenceCluster, topic: str, partition: int) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in cluster.records(TopicPartition(topic, partition))]


def copied(cluster: ReferenceCluster, topic: str, partition: int) -> int:
    """How many records the partition holds; 0 while the mirror has not created it (a wait's condition)."""
    try:
        return len(cluster.records(TopicPartition(topic, partition)))
    except ClusterError as exc:
        if exc.error_code != UNKNOWN_TOPIC_OR_PARTITION:
            raise
        return 0


@contextlib.contextmanager
def running(mirror: Mirror) -> Iterator[threading.Thread]:
    """``mirror.run()`` in a thread (its summary then in ``mirror.result``); stopped and closed on exit."""
    runner = threading.Thread(target=lambda: setattr(mirror, 'result', mirror.run()))
    runner.start()
    try:
        yield runner
    finally:
        mirror.stop()
        runner.join(30)
        mirror.close()
