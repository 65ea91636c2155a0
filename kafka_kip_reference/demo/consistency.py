"""The demo's lagging-broker scene (KIP-1243): a topic created, then grown, through one broker while another lags.

A 3-broker reference cluster. Broker 2's metadata is held back (``delay_metadata``) while an admin client creates
topic ``events`` (6 partitions) through broker 0. A consumer and a producer of another process, bootstrapped on
broker 2 only, then use it: unmodified kafka-python (a process that never imports kafka_kip), and kafka_kip's
clients sharing the admin's consistency context through ``ConsistencyContextStore.file(path)``. Each asks broker 2
for metadata once more (as happens whenever it is a client's least loaded broker). Then broker 2 catches up, lags
again, and the admin grows ``events`` to 12 partitions; the producers, which knew 6, ask broker 2 again and send
keyed records. Counted from the clients' own metadata views and where their records landed:

- the partitions of ``events`` in the consumer's metadata once it asked broker 2 (of 6);
- records the producer sent within ``max_block_ms`` (of 60);
- keyed records the producer placed by the old partition count after the grow (of 120): with 12 partitions a key
  belongs on ``murmur2(key) % 12``.
"""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafka.partitioner.default import murmur2

from kafka_kip.factory import ClientFactory
from kafka_kip.metadata.store import ConsistencyContextStore
from kafka_kip_reference import ReferenceCluster
from kafka_kip_reference.fixtures.fresh import FreshProcess

TOPIC = 'events'
CREATED, GROWN = 6, 12
SENT, KEYED = 60, 120
_CLIENTS = Path(__file__).with_name('lagging_clients.py')
_MAX_BLOCK_MS = 3000
_WAIT_MS = 200  # how long the lagging broker holds a request with a newer token before STALE_METADATA


@dataclass
class LaggingRow:
    """What one kind of client did through the lagging broker."""

    name: str
    partitions_seen: int  # partitions of the new topic in the consumer's metadata once it asked the lagging broker
    sent: int  # records the producer sent within max_block_ms
    old_count: int  # keyed records placed by the partition count from before the grow

    @property
    def clean(self) -> bool:
        return (self.partitions_seen, self.sent, self.old_count) == (CREATED, SENT, 0)


@dataclass
class LaggingScene:
    rows: list[LaggingRow]  # kafka-python, kafka_kip
    seconds: float

    @property
    def kip(self) -> LaggingRow:
        return self.rows[-1]


def _address(cluster: ReferenceCluster, broker_id: int) -> str:
    broker = cluster.brokers()[broker_id]
    return f'{broker.host}:{broker.port}'


def _partition(key: str, count: int) -> int:
    return (murmur2(key.encode()) & 0x7FFFFFFF) % count


def run_scene(say: Callable[[str], None] = lambda line: None) -> LaggingScene:
    """Run the scene and count; ``say`` gets a line per step."""
    started = time.monotonic()
    keys = [f'user-{i}' for i in range(KEYED)]
    with tempfile.TemporaryDirectory() as directory, \
            ReferenceCluster(brokers=3, broker_config={'metadata.consistency.wait.max.ms': _WAIT_MS}) as cluster:
        shared = {'file': str(Path(directory) / 'consistency-context')}
        factory = ClientFactory(ConsistencyContextStore.file(shared['file']))
        lagging = {'bootstrap_servers': _address(cluster, 2)}
        cluster.delay_metadata(2)
        with factory.admin(bootstrap_servers=_address(cluster, 0)) as admin:
            admin.create_topics({TOPIC: {'num_partitions': CREATED, 'replication_factor': 3}})
        say(f'broker 2 lags; an admin client created {TOPIC} ({CREATED} partitions) through broker 0')
        sides = [('kafka-python 3.0.12 (another process)', False, None),
                 ('kafka_kip (another process, shared file store)', True, shared)]
        processes = {}
        try:
            seen, sent = {}, {}
            for name, kip, store in sides:
                consumer = processes[name, 'consumer'] = FreshProcess(_CLIENTS, stock=not kip)
                consumer.call('start_consumer', kip, store, TOPIC, dict(lagging, enable_auto_commit=False))
                seen[name] = consumer.call('refresh_from', 2)
                producer = processes[name, 'producer'] = FreshProcess(_CLIENTS, stock=not kip)
                producer.call('start_producer', kip, store, TOPIC, dict(lagging, max_block_ms=_MAX_BLOCK_MS))
                producer.call('refresh_from', 2)
                outcome = producer.call('send', [f'v{i}' for i in range(SENT)])
                sent[name] = len(outcome.get('offsets', ()))
            cluster.release_metadata(2)
            for name, _, _ in sides:  # both producers learn the 6 partitions from the caught-up broker
                processes[name, 'producer'].call('refresh_from', 2)
                processes[name, 'producer'].call('wait_for_view', CREATED)
            cluster.delay_metadata(2)
            with factory.admin(bootstrap_servers=_address(cluster, 0)) as admin:
                admin.create_partitions({TOPIC: GROWN})
            say(f'broker 2 lags again; the admin client grew {TOPIC} to {GROWN} partitions')
            rows = []
            for name, _, _ in sides:
                producer = processes[name, 'producer']
                producer.call('refresh_from', 2)
                placed = producer.call('send', keys, keys)['partitions']
                old_count = sum(p != _partition(key, GROWN) for p, key in zip(placed, keys, strict=True))
                rows.append(LaggingRow(name, seen[name], sent[name], old_count))
            for process in processes.values():
                process.call('close')
        finally:
            for process in processes.values():
                process.close()
    return LaggingScene(rows, time.monotonic() - started)


def render(scene: LaggingScene) -> str:
    """The scene's counted table."""
    header = (f'{"":<50}{f"consumer saw (of {CREATED})":>24}{f"producer sent (of {SENT})":>25}'
              f'{f"by the old count (of {KEYED})":>30}')
    lines = [f'lagging broker (KIP-1243): {TOPIC} created, then grown to {GROWN}, while broker 2 lags:', header,
             '-' * len(header)]
    for row in scene.rows:
        lines.append(f'{row.name:<50}{row.partitions_seen:>24}{row.sent:>25}{row.old_count:>30}')
    return '\n'.join(lines)


__all__ = ['LaggingRow', 'LaggingScene', 'render', 'run_scene']
