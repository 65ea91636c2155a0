"""The Apache Kafka launcher (kafka_kip_reference.external.apache_kafka) and its Maven cache, on real Kafka processes."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import kafka_kip as kafka
from kafka_kip_reference.external import maven
from kafka_kip_reference.external.probe import metadata_brokers

TP = kafka.TopicPartition


def _listed(cluster: Any, broker_id: int) -> set[int]:
    cluster_id, brokers = metadata_brokers(cluster.broker_address(broker_id))
    assert cluster_id == cluster.cluster_id
    return set(brokers)


def test_brokers_stop_start_and_are_killed(apache_kafka: Any) -> None:
    """A stopped broker leaves the others' Metadata and comes back on its port; so does a killed one."""
    started = '[KafkaRaftServer nodeId=2] Kafka Server started'
    starts_before = apache_kafka.logs().count(started)  # (other tests of the session may have restarted it)
    assert [_listed(apache_kafka, b) for b in (0, 1, 2)] == [{0, 1, 2}] * 3
    apache_kafka.stop_broker(1)
    assert apache_kafka.running_brokers() == [0, 2]
    assert [_listed(apache_kafka, b) for b in (0, 2)] == [{0, 2}] * 2
    apache_kafka.start_broker(1)
    assert [_listed(apache_kafka, b) for b in (0, 1, 2)] == [{0, 1, 2}] * 3

    apache_kafka.restart_broker(2, kill=True)
    assert [_listed(apache_kafka, b) for b in (0, 1, 2)] == [{0, 1, 2}] * 3
    logs = apache_kafka.logs()
    assert [logs.count(f'===== {name}') for name in ('controller', 'broker 0', 'broker 1', 'broker 2')] == [1] * 4
    assert logs.count(started) == starts_before + 1


def test_elect_leader_moves_leadership_and_bumps_the_epoch(apache_kafka: Any) -> None:
    """A reassignment + preferred election moves the leader to another replica: leader epoch 0 -> 1 -> 2."""
    topic = f'elect-{uuid.uuid4().hex[:8]}'
    apache_kafka.create_topic(topic)
    tp = TP(topic, 0)
    first = apache_kafka.leader(tp)
    second, third = (b for b in apache_kafka.replicas(tp) if b != first)
    assert apache_kafka.elect_leader(tp, second) == 1
    assert apache_kafka.elect_leader(tp, third) == 2
    assert (apache_kafka.leader(tp), apache_kafka.partition(tp).leader_epoch) == (third, 2)


def test_unclean_election_truncates_the_old_leader_inside_kafka(apache_kafka: Any) -> None:
    """Records 3-4, acknowledged while a follower was stopped, are lost when that follower is elected
    uncleanly; the old leader truncates its own log to offset 3 when it comes back."""
    topic = f'unclean-{uuid.uuid4().hex[:8]}'
    apache_kafka.create_topic(topic)
    tp = TP(topic, 0)
    producer = kafka.KafkaProducer(bootstrap_servers=apache_kafka.bootstrap_servers, acks='all')
    try:
        assert [producer.send(topic, value=b'%d' % i, partition=0).get(timeout=10).offset for i in range(3)] == \
            [0, 1, 2]
        leader = apache_kafka.leader(tp)
        stale = next(b for b in apache_kafka.isr(tp) if b != leader)
        apache_kafka.stop_broker(stale)
        assert [producer.send(topic, value=b'%d' % i, partition=0).get(timeout=10).offset for i in (3, 4)] == \
            [3, 4]
    finally:
        producer.close()
    epoch = apache_kafka.elect_uncleanly(tp, stale)
    assert (apache_kafka.leader(tp), apache_kafka.partition(tp).leader_epoch) == (stale, epoch)
    assert sorted(apache_kafka.isr(tp)) == [0, 1, 2]

    consumer = kafka.KafkaConsumer(bootstrap_servers=apache_kafka.bootstrap_servers, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        assert consumer.end_offsets([tp]) == {tp: 3}
    finally:
        consumer.close()
    old_leader_log = apache_kafka.logs().split(f'===== broker {leader} ')[1].split('=====')[0]
    assert f'[UnifiedLog partition={topic}-0, dir=' in old_leader_log
    assert f'Truncating partition {topic}-0 with TruncationState(offset=3, completed=true)' in old_leader_log


def test_missing_maven_is_one_line_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without mvn on PATH, resolving raises JavaUnavailable naming the missing tool."""
    monkeypatch.setenv('KAFKA_KIP_CACHE', str(tmp_path))
    monkeypatch.setenv('PATH', str(tmp_path))
    with pytest.raises(maven.JavaUnavailable, match=r"^no 'mvn' on PATH \(install Java 17 and Maven"):
        maven.resolve('nothing', ['org.slf4j:slf4j-api:2.0.16'])


def test_unknown_artifact_is_one_line_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A coordinate Maven cannot resolve raises JavaUnavailable naming it, and caches nothing."""
    monkeypatch.setenv('KAFKA_KIP_CACHE', str(tmp_path))
    with pytest.raises(maven.JavaUnavailable, match='Maven could not resolve org.apache.kafka:no-such-artifact:0.0.1'):
        maven.resolve('missing', ['org.apache.kafka:no-such-artifact:0.0.1'])
    assert [p.name for p in (tmp_path / 'maven').iterdir() if p.is_dir()] == []


def test_concurrent_resolutions_share_one_cache_entry(tmp_path: Path) -> None:
    """Two processes resolving the same coordinates at once both get the complete directory."""
    script = ('import sys; from kafka_kip_reference.external import maven; '
              "d = maven.resolve('slf4j', ['org.slf4j:slf4j-api:2.0.16']); "
              "print(d, sorted(p.name for p in d.iterdir()))")
    env = {**os.environ, 'KAFKA_KIP_CACHE': str(tmp_path)}
    runs = [subprocess.Popen([sys.executable, '-c', script], env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    assert outputs[0] == outputs[1]
    assert outputs[0].endswith("['.complete', 'slf4j-api-2.0.16.jar']\n")
    assert len([p for p in (tmp_path / 'maven').iterdir() if p.is_dir()]) == 1


def test_a_sasl_listener_only_for_the_mechanisms_the_launcher_sets_up() -> None:
    from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster
    with pytest.raises(ValueError, match="^SASL mechanism 'GSSAPI' is not set up by this launcher; it sets up: "
                                         "OAUTHBEARER$"):
        ApacheKafkaCluster(1, sasl_mechanisms=('OAUTHBEARER', 'GSSAPI'))
    with pytest.raises(TypeError, match="got the string 'OAUTHBEARER'"):
        ApacheKafkaCluster(1, sasl_mechanisms='OAUTHBEARER')
    with pytest.raises(ValueError, match='^this cluster has no SASL listener: give sasl_mechanisms$'):
        ApacheKafkaCluster(1).sasl_bootstrap_servers  # noqa: B018
