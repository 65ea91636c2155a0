"""Apache Kafka's own feature flags (KIP-584) as the reference cluster finalizes them, and UpdateFeatures' rules.

The cluster supports ``transaction.version`` 0-2 and finalizes level 2 from the start, as a Kafka 4.x cluster is
formatted: at level 2 transactions run KIP-890 part 2 (:mod:`kafka_kip_reference.broker.transactions`).
``group.version`` (0-1, finalized at 1) is supported while the cluster serves KIP-848's ConsumerGroupHeartbeat.
UpdateFeatures changes a level with Kafka 4.4's errors (INVALID_UPDATE_VERSION and its messages, checked against
Apache Kafka 4.4); every change increments the finalized features epoch ApiVersions reports. A level of 0 is not
listed as finalized.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafka.errors import InvalidUpdateVersionError

from kafka_kip.protocol import constants

TRANSACTION_VERSION = 'transaction.version'
GROUP_VERSION = 'group.version'
#: The ``transaction.version`` level from which transactions run KIP-890 part 2.
TRANSACTIONS_V2 = 2


@dataclass(frozen=True)
class KafkaFeature:
    """A Kafka feature the cluster supports at levels ``0..max_level``, finalized at ``default_level``."""

    name: str
    max_level: int
    default_level: int


#: Kafka 4.4's features this cluster implements, with the levels a new Kafka 4.4 cluster finalizes.
KAFKA_FEATURES: tuple[KafkaFeature, ...] = (
    KafkaFeature(GROUP_VERSION, 1, 1),
    KafkaFeature(TRANSACTION_VERSION, 2, 2),
)


#: What Kafka 4's controller puts before the refusal of the first feature it could not update.
ALL_FAILED = 'The update failed for all features since the following feature had an error: '


class UpgradeType(enum.IntEnum):
    """UpdateFeatures' ``upgrade_type`` (v1+; v0 is an UPGRADE whatever its ``allow_downgrade``, as Kafka 4.4 reads
    it)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: int


@dataclass(frozen=True)
class UpdateResult:
    error: int
    message: str | None = None


class FinalizedFeatures:
    """The finalized levels of :data:`KAFKA_FEATURES` in one cluster and their epoch."""

    def __init__(self, features: Iterable[KafkaFeature] = KAFKA_FEATURES) -> None:
        self._features = {feature.name: feature for feature in features}
        self._levels = {feature.name: feature.default_level for feature in self._features.values()}
        self.epoch = 0

    def level(self, name: str) -> int:
        """The finalized level of ``name`` (0 when not finalized)."""
        return self._levels.get(name, 0)

    def supported(self, names: Iterable[str]) -> dict[str, tuple[int, int]]:
        """``{name: (0, max level)}`` of the named features."""
        return {name: (0, self._features[name].max_level) for name in names}

    def finalized(self, names: Iterable[str]) -> dict[str, int]:
        """``{name: level}`` of the named features finalized above 0."""
        return {name: self._levels[name] for name in names if self._levels[name] > 0}

    def update(self, updates: list[FeatureUpdate], offered: Iterable[str], validate_only: bool,
               controller_id: int) -> UpdateResult:
        """Apply ``updates`` all or none (Kafka's controller, ``controller_id`` in its messages): the first refused
        one is the answer."""
        offered = set(offered)
        for update in updates:
            message = self._refusal(update, offered, controller_id)
            if message is not None:
                return UpdateResult(InvalidUpdateVersionError.errno, f'{ALL_FAILED}Invalid update version '
                                                                     f'{update.level} for feature {update.name}. {message}')
        if not validate_only and updates:
            self._apply({update.name: update.level for update in updates})
        return UpdateResult(constants.NONE)

    def _apply(self, levels: Mapping[str, int]) -> None:
        self._levels.update(levels)
        self.epoch += 1

    def _refusal(self, update: FeatureUpdate, offered: set[str], controller_id: int) -> str | None:
        if update.upgrade_type not in (UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE,
                                       UpgradeType.UNSAFE_DOWNGRADE):
            return 'The controller does not support the given upgrade type.'
        if update.level < 0:
            return 'A feature version cannot be less than 0.'
        feature = self._features.get(update.name)
        if feature is None or update.name not in offered:
            return f'Local controller {controller_id} does not support this feature.'
        if update.level > feature.max_level:
            return f'Local controller {controller_id} only supports versions 0-{feature.max_level}'
        current = self._levels[update.name]
        if update.level < current and update.upgrade_type == UpgradeType.UPGRADE:
            return ("Can't downgrade the version of this feature without setting the upgrade type to either safe "
                    'or unsafe downgrade.')
        if update.level > current and update.upgrade_type != UpgradeType.UPGRADE:
            return "Can't downgrade to a newer version."
        return None


__all__ = ['TRANSACTION_VERSION', 'GROUP_VERSION', 'TRANSACTIONS_V2', 'ALL_FAILED', 'KafkaFeature', 'KAFKA_FEATURES',
           'UpgradeType', 'FeatureUpdate', 'UpdateResult', 'FinalizedFeatures']
