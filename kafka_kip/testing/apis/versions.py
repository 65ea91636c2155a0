"""The API versions the reference brokers advertise (and accept)."""
from __future__ import annotations

from kafka_kip.protocol.messages import RESPONSES
from kafka_kip.testing.groups import GroupCoordinator

#: api_key -> (min, max) for the APIs of kafka_kip.testing.apis and the SASL exchange. Minimums are
#: Apache Kafka 4.0's; maximums are what both kafka-python's message classes and these handlers cover.
OWN_API_VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 13),   # Produce: v9+ carries use_offset / log_end_offset (KIP-391); v13 addresses topics by id
    1: (4, 17),   # Fetch: v12+ diverging epochs and partition_epoch (KIP-232); v13+ topic ids
    2: (1, 8),    # ListOffsets: v6+ partition_epoch; v7 max timestamp; v8 earliest-local
    3: (0, 13),   # Metadata: v9+ partition_epoch / max_partition_epoch (KIP-232); v10+ topic ids
    17: (1, 1),   # SaslHandshake (v0's unframed tokens are not supported)
    18: (0, 4),   # ApiVersions: v3+ SupportedFeatures
    19: (2, 7),   # CreateTopics
    20: (1, 6),   # DeleteTopics
    21: (0, 2),   # DeleteRecords
    22: (0, 5),   # InitProducerId
    23: (2, 4),   # OffsetForLeaderEpoch
    32: (1, 4),   # DescribeConfigs
    36: (0, 2),   # SaslAuthenticate
    37: (0, 3),   # CreatePartitions
    60: (0, 2),   # DescribeCluster
}

#: Every advertised API: ours plus the group coordinator's.
API_VERSIONS: dict[int, tuple[int, int]] = dict(sorted({**OWN_API_VERSIONS, **GroupCoordinator.API_VERSIONS}.items()))


def api_version_entries() -> list:
    """The ``api_keys`` list of an ApiVersionsResponse."""
    entry = RESPONSES[18].ApiVersion
    return [entry(api_key=key, min_version=low, max_version=high) for key, (low, high) in API_VERSIONS.items()]
