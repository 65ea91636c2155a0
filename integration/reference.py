"""This project's reference cluster (kafka_kip_reference.ReferenceCluster, in process) as a conformance target."""
from __future__ import annotations

from typing import Any

from kafka.structs import TopicPartition

from integration.targets import BrokerTarget, TargetUnavailable
from kafka_kip_reference.external.probe import wait_until_ready


class ReferenceTarget(BrokerTarget):
    """The reference cluster (``brokers`` brokers, replication factor up to 3) with every fault hook."""

    name = 'reference'

    def __init__(self, brokers: int = 3) -> None:
        try:
            from kafka_kip_reference import ReferenceCluster
        except ImportError as exc:
            raise TargetUnavailable(f'kafka_kip_reference.ReferenceCluster is not importable: {exc}') from exc
        # The suite's short group sessions (GROUP_CONFIG) are below Kafka's default group.min.session.timeout.ms.
        self._cluster = ReferenceCluster(brokers=brokers, broker_config={'group.min.session.timeout.ms': '1000'}).start()
        self._brokers = brokers
        self._replication = min(brokers, 3)
        bootstrap = self._cluster.bootstrap_servers
        try:
            ranges, features = wait_until_ready(bootstrap.split(',')[0], timeout=10.0)
        except BaseException:
            self._cluster.close()
            raise
        hooks = {'leader_epoch_bumps', 'topic_recreation', 'stale_metadata'}
        if self._replication > 1:
            hooks.add('unclean_election')
        super().__init__(bootstrap, ranges, features, hooks=frozenset(hooks))
        from kafka_kip import __version__
        self.version = f'kafka_kip {__version__} ReferenceCluster, {brokers} brokers'

    @property
    def cluster(self) -> Any:
        """The underlying ``ReferenceCluster`` (for reference-only assertions)."""
        return self._cluster

    def create_topic(self, name: str, partitions: int = 1) -> None:
        self._cluster.create_topic(name, partitions, self._replication)

    def recreate_topic(self, name: str, partitions: int = 1) -> None:
        self._cluster.delete_topic(name)
        self.create_topic(name, partitions)

    def bump_leader_epoch(self, tp: TopicPartition) -> int:
        # Another in-sync replica takes over; with none (metadata held: followers leave the ISR) the
        # leader is elected again, which also starts a new leader epoch.
        leader = self._cluster.leader(tp)
        others = [b for b in self._cluster.isr(tp) if b != leader]
        return self._cluster.elect_leader(tp, others[0] if others else leader)

    def pause_follower(self, tp: TopicPartition) -> int:
        leader = self._cluster.leader(tp)
        follower = next(b for b in self._cluster.isr(tp) if b != leader)
        self._cluster.pause_replication(tp, follower)
        return follower

    def elect_uncleanly(self, tp: TopicPartition, broker_id: int) -> int:
        return self._cluster.elect_leader(tp, broker_id, unclean=True)

    def hold_metadata(self) -> None:
        for broker_id in range(self._brokers):
            self._cluster.delay_metadata(broker_id)

    def release_metadata(self) -> None:
        for broker_id in range(self._brokers):
            self._cluster.release_metadata(broker_id)

    def logs(self) -> str:
        errors = self._cluster.internal_errors
        return '\n'.join(f'internal error: {e!r}' for e in errors)

    def close(self) -> None:
        self._cluster.close()
