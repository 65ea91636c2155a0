"""Apache Kafka as a conformance target, from the first of these that is available here:

1. ``KAFKA_BOOTSTRAP=host:port``: a cluster someone already runs (no fault hooks: the suite does not own it);
2. testcontainers, where a Docker engine answers (one broker, no fault hooks);
3. the jars from Maven Central (:mod:`kafka_kip_reference.external.apache_kafka`): a KRaft controller and 3 brokers,
   shared with the rest of the test session, with Kafka's own means as fault hooks: leader moves by
   reassignment + ElectLeaders, topic recreation, and a real unclean leader election.

Stale metadata cannot be forced on Kafka (its brokers follow the controller's metadata log), so that
capability is missing with the reason.
"""
from __future__ import annotations

import os

from kafka.structs import TopicPartition

from integration.targets import BrokerTarget, TargetUnavailable
from kafka_kip_reference.external.apache_kafka import JavaUnavailable, shared_cluster
from kafka_kip_reference.external.probe import wait_until_ready

NAME = 'apache-kafka'
NO_STALE_METADATA = ('cannot be made to serve stale metadata: every broker follows the controller\'s metadata log, '
                     'and no Kafka API or setting holds it back')


def _not_ours(what: str) -> dict[str, str]:
    reason = f'is {what}, which the suite does not control'
    return {'leader_epoch_bumps': reason, 'unclean_election': reason, 'stale_metadata': NO_STALE_METADATA}


class LaunchedKafkaTarget(BrokerTarget):
    """Apache Kafka from Maven Central's jars: 3 brokers of :func:`shared_cluster`, with fault hooks."""

    name = NAME

    def __init__(self) -> None:
        try:
            self.cluster = shared_cluster()
        except JavaUnavailable as exc:
            raise TargetUnavailable(str(exc)) from exc
        ranges, features = wait_until_ready(self.cluster.broker_address(0), timeout=30.0)
        super().__init__(self.cluster.bootstrap_servers, ranges, features,
                         hooks=frozenset({'leader_epoch_bumps', 'unclean_election'}),
                         limits={'stale_metadata': NO_STALE_METADATA})
        self.version = f'Apache Kafka {self.cluster.version} (KRaft, {self.cluster.broker_count} brokers, ' \
                       f'jars from Maven Central)'

    def create_topic(self, name: str, partitions: int = 1) -> None:
        self.cluster.create_topic(name, partitions)

    def recreate_topic(self, name: str, partitions: int = 1) -> None:
        self.cluster.recreate_topic(name, partitions)

    def bump_leader_epoch(self, tp: TopicPartition) -> int:
        leader = self.cluster.leader(tp)
        return self.cluster.elect_leader(tp, next(b for b in self.cluster.isr(tp) if b != leader))

    def pause_follower(self, tp: TopicPartition) -> int:
        # Stopping the broker is Kafka's way: a controlled shutdown takes it out of the ISR at once.
        leader = self.cluster.leader(tp)
        follower = next(b for b in self.cluster.isr(tp) if b != leader)
        self.cluster.stop_broker(follower)
        return follower

    def elect_uncleanly(self, tp: TopicPartition, broker_id: int) -> int:
        return self.cluster.elect_uncleanly(tp, broker_id)

    def logs(self) -> str:
        return self.cluster.logs(tail_chars=6000)

    def heal(self) -> None:
        self.cluster.start_stopped_brokers()

    def close(self) -> None:
        """The cluster is shared with the rest of the session and stops with it."""


class ExternalKafkaTarget(BrokerTarget):
    """A cluster someone already runs, named by ``KAFKA_BOOTSTRAP``."""

    name = NAME

    def __init__(self, bootstrap: str) -> None:
        try:
            ranges, features = wait_until_ready(bootstrap.split(',')[0], timeout=10.0)
        except (ConnectionError, TimeoutError) as exc:
            raise TargetUnavailable(f'KAFKA_BOOTSTRAP={bootstrap} does not answer: {exc}') from exc
        super().__init__(bootstrap, ranges, features, limits=_not_ours(f'the cluster at KAFKA_BOOTSTRAP={bootstrap}'))
        self.version = f'Apache Kafka at {bootstrap} (KAFKA_BOOTSTRAP)'


class ContainerKafkaTarget(BrokerTarget):
    """Apache Kafka (KRaft, one broker) in a container via testcontainers; needs a Docker engine."""

    name = NAME
    IMAGE = 'confluentinc/cp-kafka:7.6.0'

    def __init__(self) -> None:
        from testcontainers.community.kafka import KafkaContainer

        self._container = KafkaContainer(self.IMAGE).with_kraft()
        try:
            self._container.start(timeout=180)  # the first run pulls the image
            bootstrap = self._container.get_bootstrap_server()
            ranges, features = wait_until_ready(bootstrap.split(',')[0], timeout=60.0)
        except BaseException:
            self._container.stop()
            raise
        super().__init__(bootstrap, ranges, features, limits=_not_ours('a single-broker container'))
        self.version = self.IMAGE

    def logs(self) -> str:
        stdout, stderr = self._container.get_logs()
        return (stdout + stderr).decode(errors='replace')

    def close(self) -> None:
        self._container.stop()


def _docker_engine() -> bool:
    try:
        import docker
        import testcontainers.community.kafka  # noqa: F401
    except ImportError:
        return False
    try:
        docker.from_env(timeout=3).ping()
    except Exception:  # docker raises several unrelated types when no engine is there
        return False
    return True


def open_apache_kafka() -> BrokerTarget:
    """The Apache Kafka target from the first available source (see the module docstring)."""
    bootstrap = os.environ.get('KAFKA_BOOTSTRAP')
    if bootstrap:
        return ExternalKafkaTarget(bootstrap)
    if _docker_engine():
        return ContainerKafkaTarget()
    return LaunchedKafkaTarget()
