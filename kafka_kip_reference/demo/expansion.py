"""The demo's partition-expansion scene (KIP-253): a keyed producer writes while a topic grows 2 -> 4 -> 6 partitions.

A 3-broker reference cluster (KIP-253 on). In another process, a producer sends 9,000 keyed records (48 keys,
values in send order) from its own thread, with at most 200 unacknowledged. The scene grows the topic to 4
partitions once 3,000 records were sent and to 6 once 6,000 were, while the producer keeps writing. A group of three
consumers starts behind the producer, once it has partitioned by 4 and sent 5,000 records (records of both counts
wait for the group), and reads while the topic grows again; each member appends what its polls return to its
group's list: the global order of poll returns. The same process script (:mod:`kafka_kip_reference.demo.expansion_group`) runs
unmodified kafka-python (a process that never imports kafka_kip), then kafka_kip with two groups reading side by
side, a classic one and a KIP-848 one (``group_protocol='consumer'``: the holds' positions ride
ConsumerGroupHeartbeat), then kafka_kip on a cluster whose brokers do not support KIP-253 (``features=()``, as Apache
Kafka): there it orders nothing and warns. All refresh metadata every second. Counted from what was sent and each
group returned:

- records lost (sent, acknowledged, never returned) and records returned twice;
- per-key inversions: a record returned after a later record of its key;
- misplaced: records sent after an expansion returned that are not in their key's partition for the new count (or
  for a later count: a record still queued when the topic grew again is re-partitioned by that count).
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafka.partitioner.default import murmur2

from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.conditions import wait_until
from kafka_kip_reference.fixtures.fresh import FreshProcess

KEYS = 48
PER_PHASE = 3000
COUNTS = (2, 4, 6)
MEMBERS = 3
GROUP_JOINS_AT = 5000  # the group starts behind the producer: records of both counts wait for it
_GROUP = Path(__file__).with_name('expansion_group.py')
_SLACK = 500  # records the producer may send past a phase's end while the topic grows
_BROKERS = {'group.min.session.timeout.ms': 1000, 'group.consumer.heartbeat.interval.ms': 500}
_PRODUCER = {'linger_ms': 5, 'metadata_max_age_ms': 1000}
_READER = {'auto_offset_reset': 'earliest', 'metadata_max_age_ms': 1000, 'max_poll_records': 100}
_CLASSIC = dict(_READER, heartbeat_interval_ms=100, session_timeout_ms=3000)
_CONSUMER_PROTOCOL = dict(_READER, group_protocol='consumer')  # the broker dictates the heartbeat interval


@dataclass
class ExpansionRow:
    """What one kind of client did through the expansions."""

    name: str
    sent: int
    lost: int
    duplicated: int
    inversions: int
    misplaced: int

    @property
    def clean(self) -> bool:
        return (self.lost, self.duplicated, self.inversions, self.misplaced) == (0, 0, 0, 0)


@dataclass
class ExpansionScene:
    #: kafka-python, kafka_kip (classic group), kafka_kip (consumer-protocol group), kafka_kip on brokers without kip.253
    rows: list[ExpansionRow]
    seconds: float

    @property
    def kip(self) -> ExpansionRow:
        return self.rows[1]

    @property
    def kip_consumer_protocol(self) -> ExpansionRow:
        return self.rows[2]

    @property
    def clean(self) -> bool:
        """kafka_kip's groups on kip.253 brokers, classic and consumer-protocol, lost, duplicated and misordered nothing."""
        return self.kip.clean and self.kip_consumer_protocol.clean


def _partition(key: str, count: int) -> int:
    return (murmur2(key.encode()) & 0x7FFFFFFF) % count


def count(name: str, outcome: dict, group: str = 'g') -> ExpansionRow:
    """The row of ``group`` in one run, from every record sent (its partition, by value) and returned (in order)."""
    sent, returned, marks = outcome['sent'], outcome['returned'][group], outcome['marks']
    values = Counter(value for _, value, *_ in returned)
    last: dict[str, int] = {}
    inversions = 0
    for key, value, *_ in returned:
        inversions += value < last.get(key, -1)
        last[key] = max(value, last.get(key, -1))
    misplaced = 0
    for value, (partition,) in enumerate(sent):
        grown = sum(value >= mark for mark in marks)  # expansions that had returned when the record was sent
        misplaced += grown > 0 and partition not in {_partition(f'key-{value % KEYS}', total)
                                                     for total in COUNTS[grown:]}
    return ExpansionRow(name, len(sent), sum(value not in values for value in range(len(sent))),
                        sum(values.values()) - len(values), inversions, misplaced)


def _run(groups: dict[str, tuple[str, dict]], kip: bool, say: Callable[[str], None],
         features: tuple[str, ...] | None = None) -> list[ExpansionRow]:
    """One run on its own cluster: ``groups`` (group id -> (row name, consumer settings)) read side by side."""
    name = ' / '.join(row_name for row_name, _ in groups.values())
    with ReferenceCluster(brokers=3, broker_config=_BROKERS, features=features) as cluster, \
            FreshProcess(_GROUP, stock=not kip, timeout=300) as group:
        cluster.create_topic('t', COUNTS[0], 3)
        group.call('start', kip, cluster.bootstrap_servers, _PRODUCER)
        total = len(COUNTS) * PER_PHASE
        group.call('start_producing', KEYS, total, PER_PHASE + _SLACK)
        for phase, count_ in enumerate(COUNTS[1:], start=1):
            wait_until(lambda phase=phase: group.call('sent') >= phase * PER_PHASE, f'{phase * PER_PHASE} records sent',
                       timeout=120)
            cluster.create_partitions('t', count_)
            group.call('mark')
            wait_until(lambda count_=count_: group.call('partition_count') == count_,
                       f'the producer partitioning by {count_}', timeout=120)
            group.call('allow', min(total, (phase + 1) * PER_PHASE + _SLACK))
            if phase == 1:
                wait_until(lambda: group.call('sent') >= GROUP_JOINS_AT, f'{GROUP_JOINS_AT} records sent', timeout=120)
                for group_id, (_, configs) in groups.items():
                    group.call('start_group', cluster.bootstrap_servers, MEMBERS, configs, group_id)
            say(f'{name}: t grew to {count_} partitions while the producer writes')
        sent = group.call('stop_producing')
        wait_until(lambda: group.call('returned_count') >= sent, 'every record returned', timeout=120)
        outcome = group.call('result')
        if cluster.internal_errors:
            raise cluster.internal_errors[0]
    return [count(row_name, outcome, group_id) for group_id, (row_name, _) in groups.items()]


def run_scene(say: Callable[[str], None] = lambda line: None) -> ExpansionScene:
    """Run the scene for kafka-python, then kafka_kip (a classic and a consumer-protocol group side by side), then
    kafka_kip on brokers without kip.253 (as Apache Kafka), and count; ``say`` gets a line per step."""
    started = time.monotonic()
    rows = [*_run({'g': ('kafka-python 3.0.12 (another process)', _CLASSIC)}, False, say),
            *_run({'g': ('kafka_kip (another process)', _CLASSIC),
                   'g-consumer': ('kafka_kip, group_protocol=consumer', _CONSUMER_PROTOCOL)}, True, say),
            *_run({'g': ('kafka_kip, brokers without kip.253', _CLASSIC)}, True, say, features=())]
    return ExpansionScene(rows, time.monotonic() - started)


def render(scene: ExpansionScene) -> str:
    """The scene's counted table."""
    misplaced = "in the old count's partition"
    header = f'{"":<40}{"sent":>8}{"lost":>7}{"returned twice":>16}{"key order inversions":>22}{misplaced:>30}'
    lines = [f'partition expansion (KIP-253): groups of {MEMBERS} consumers read t while a keyed producer writes and t grows '
             f'{" -> ".join(map(str, COUNTS))}:', header, '-' * len(header)]
    for row in scene.rows:
        lines.append(f'{row.name:<40}{row.sent:>8,}{row.lost:>7}{row.duplicated:>16}{row.inversions:>22}'
                     f'{row.misplaced:>30}')
    return '\n'.join(lines)


__all__ = ['ExpansionRow', 'ExpansionScene', 'count', 'render', 'run_scene']
