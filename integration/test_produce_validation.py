"""Produce validation: every hostile batch of :mod:`kafka_kip_reference.fixtures.hostile_batches` gets Apache Kafka's answer.

The expected codes were measured on Apache Kafka 4.4; this test sends each batch (ProduceRequest v9, acks=1) to
a partition leader of every target and compares. A refused batch must leave the log end offset where it was.
"""
from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.api_key import ApiKey

from integration.support import TP
from integration.targets import BrokerTarget
from kafka_kip.protocol.constants import LATEST_TIMESTAMP
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip.protocol.requests import list_offsets_request, produce_request
from kafka_kip_reference.external.probe import kafka_request, metadata_brokers
from kafka_kip_reference.fixtures.hostile_batches import CASES, TOPIC_CONFIGS


def _answer(leader: str, tp: Any, payload: bytes) -> tuple[int, int]:
    """(error code, number of record errors) of producing ``payload`` to ``tp`` on ``leader``."""
    response = kafka_request(leader, produce_request(tp.topic, tp.partition, payload, acks=1), RESPONSES[ApiKey.Produce])
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, len(answer.record_errors)


def _log_end(leader: str, tp: Any) -> int:
    response = kafka_request(leader, list_offsets_request(tp.topic, tp.partition, LATEST_TIMESTAMP), RESPONSES[ApiKey.ListOffsets])
    return response.topics[0].partitions[0].offset


@pytest.mark.known_bug('tansu', 'tansu', 'does not validate produced batches as Kafka does (it fails creating the '
                       'topics with configs, and answers malformed batches otherwise)', raises=Exception)
@pytest.mark.known_bug('librdkafka-mock', 'librdkafka-mock', 'does not validate produced batches as Kafka does '
                       '(it closes the connection on some of them)', raises=Exception)
def test_hostile_batches_get_apache_kafkas_answers(target: BrokerTarget, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=target.bootstrap_servers, **target.client_config)
    try:
        admin.create_topics({f'{topic}-{kind}': {'num_partitions': 1, 'replication_factor': 1, 'configs': configs}
                             for kind, configs in TOPIC_CONFIGS.items()}, wait_for_metadata=True)
    finally:
        admin.close()
    _, brokers = metadata_brokers(target.bootstrap_servers.split(',')[0])
    mismatches = {}
    for case in CASES:
        tp = TP(f'{topic}-{case.topic_kind}', 0)
        leader = brokers[target.describe_partition(tp).leader_id]
        end = _log_end(leader, tp)
        answer = _answer(leader, tp, case.payload(int(time.time() * 1000)))
        if answer != (case.expected_error, case.record_errors) or (answer[0] and _log_end(leader, tp) != end):
            mismatches[case.name] = answer
    assert mismatches == {}
