"""MirrorMaker-style replication that keeps offsets (KIP-391) and never rewinds or hides loss (KIP-232/320).

``Mirror`` replicates topics between clusters; ``Copier`` / ``copy_range`` are its reusable copy core.
"""
from kafka_kip.mirror.copy import Copier, RangeResult, copy_range
from kafka_kip.mirror.groups import GroupSync, GroupSyncResult
from kafka_kip.mirror.mirror import Mirror, MirrorSummary
from kafka_kip.mirror.offset_map import MAP_TOPIC, PartitionMap, Run
from kafka_kip.mirror.state import CopyState, Incident, IncidentKind, PartitionProgress, ProgressState
from kafka_kip.mirror.translate import OffsetTranslator
from kafka_kip.policies import (
    AUTO,
    BROKER,
    CHECKED,
    CLOSEST,
    OFF,
    OFFSET_MODES,
    STOP,
    TRANSLATED,
    TRUNCATION_POLICIES,
)

__all__ = [
    'AUTO', 'BROKER', 'CHECKED', 'CLOSEST', 'MAP_TOPIC', 'OFF', 'OFFSET_MODES', 'STOP', 'TRANSLATED',
    'TRUNCATION_POLICIES', 'Copier', 'CopyState', 'GroupSync', 'GroupSyncResult', 'Incident', 'IncidentKind', 'Mirror',
    'MirrorSummary', 'OffsetTranslator', 'PartitionMap', 'PartitionProgress', 'ProgressState', 'RangeResult', 'Run',
    'copy_range',
]
