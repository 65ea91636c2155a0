"""What the reference brokers advertise: API versions and extension features, and the narrowing of both."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafka_kip.protocol.features import ALL_FEATURES, KIP_232, KIP_391
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

#: Every API the brokers handle, with every version they handle: ours plus the group coordinator's.
API_VERSIONS: dict[int, tuple[int, int]] = dict(sorted({**OWN_API_VERSIONS, **GroupCoordinator.API_VERSIONS}.items()))

#: The extensions whose broker side the reference cluster implements.
FEATURES: tuple[str, ...] = (KIP_232, KIP_391)

API_VERSIONS_KEY = 18


def implemented_features(features: Iterable[str] | None) -> frozenset[str]:
    """The features a cluster advertises: ``features`` checked against :data:`FEATURES` (None: all of them)."""
    if features is None:
        return frozenset(FEATURES)
    if isinstance(features, str):
        raise TypeError(f'features must be a collection of feature names, got the string {features!r}')
    chosen = frozenset(features)
    for name in sorted(chosen):
        if name not in ALL_FEATURES:
            raise ValueError(f'unknown feature {name!r}; features are {", ".join(ALL_FEATURES)}')
        if name not in FEATURES:
            raise ValueError(f'the reference cluster does not implement {name!r}; it implements {", ".join(FEATURES)}')
    return chosen


def advertised_api_versions(overrides: Mapping[int, tuple[int, int] | None] | None) -> dict[int, tuple[int, int]]:
    """:data:`API_VERSIONS` narrowed by ``overrides`` (``{api_key: (min, max)}``; None leaves the API out)."""
    table = dict(API_VERSIONS)
    for api_key, versions in (overrides or {}).items():
        if api_key not in API_VERSIONS:
            raise ValueError(f'api key {api_key} is not implemented by the reference cluster; '
                             f'it implements {sorted(API_VERSIONS)}')
        if versions is None:
            if api_key == API_VERSIONS_KEY:
                raise ValueError('ApiVersions (18) cannot be left out: clients need it to learn the versions')
            del table[api_key]
            continue
        low, high = versions
        handled_low, handled_high = API_VERSIONS[api_key]
        if not handled_low <= low <= high <= handled_high:
            raise ValueError(f'versions {low}-{high} of api {api_key}: the reference cluster handles '
                             f'{handled_low}-{handled_high}; give a range within it')
        table[api_key] = (low, high)
    return table


def api_version_entries(table: Mapping[int, tuple[int, int]]) -> list:
    """The ``api_keys`` list of an ApiVersionsResponse advertising ``table``."""
    entry = RESPONSES[18].ApiVersion
    return [entry(api_key=key, min_version=low, max_version=high) for key, (low, high) in sorted(table.items())]
