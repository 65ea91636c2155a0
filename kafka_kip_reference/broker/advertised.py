"""What the reference brokers advertise: API versions and extension features, and how a cluster narrows them.

The versions each API is handled at are declared beside its handler (:mod:`kafka_kip_reference.broker.registry`);
``ReferenceCluster(features=..., api_versions=...)`` narrows what the brokers advertise and accept.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.features import ALL_FEATURES, KIP_232, KIP_253, KIP_391, KIP_1243
from kafka_kip.protocol.messages import LEADER_EPOCHS_FOR_PARTITION_API_KEY, RESPONSES

#: The extensions whose broker side the reference cluster implements.
FEATURES: tuple[str, ...] = (KIP_232, KIP_253, KIP_391, KIP_1243)
#: The APIs an extension adds: advertised (and accepted) only by a cluster that implements it.
FEATURE_APIS: dict[str, tuple[int, ...]] = {KIP_253: (LEADER_EPOCHS_FOR_PARTITION_API_KEY,)}


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


def advertised_api_versions(handled: Mapping[int, tuple[int, int]],
                            overrides: Mapping[int, tuple[int, int] | None] | None,
                            features: Iterable[str] = FEATURES) -> dict[int, tuple[int, int]]:
    """``handled`` (``{api_key: (min, max)}``) narrowed by ``overrides`` (None as a range leaves the API out),
    without the APIs of extensions not in ``features`` (a stock broker closes the connection on them)."""
    table = dict(handled)
    for feature, api_keys in FEATURE_APIS.items():
        if feature not in features:
            for api_key in api_keys:
                table.pop(api_key, None)
    for api_key, versions in (overrides or {}).items():
        if api_key not in handled:
            raise ValueError(f'api key {api_key} is not implemented by the reference cluster; '
                             f'it implements {sorted(handled)}')
        if versions is None:
            if api_key == ApiKey.ApiVersions:
                raise ValueError('ApiVersions (18) cannot be left out: clients need it to learn the versions')
            del table[api_key]
            continue
        low, high = versions
        handled_low, handled_high = handled[api_key]
        if not handled_low <= low <= high <= handled_high:
            raise ValueError(f'versions {low}-{high} of api {api_key}: the reference cluster handles '
                             f'{handled_low}-{handled_high}; give a range within it')
        table[api_key] = (low, high)
    return table


def api_version_entries(table: Mapping[int, tuple[int, int]]) -> list:
    """The ``api_keys`` list of an ApiVersionsResponse advertising ``table``."""
    entry = RESPONSES[ApiKey.ApiVersions].ApiVersion
    return [entry(api_key=key, min_version=low, max_version=high) for key, (low, high) in sorted(table.items())]
