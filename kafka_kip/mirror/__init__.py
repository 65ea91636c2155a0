"""MirrorMaker-style replication that keeps offsets (KIP-391) and never rewinds or hides loss (KIP-232/320).

``Mirror`` replicates topics between clusters; ``Copier`` / ``copy_range`` are its reusable copy core.
"""
from kafka_kip.mirror.copy import (
    BROKER,
    CHECKED,
    CLOSEST,
    OFF,
    OFFSET_MODES,
    STOP,
    TRUNCATION_POLICIES,
    Copier,
    Incident,
    PartitionProgress,
    RangeResult,
    copy_range,
)
from kafka_kip.mirror.groups import GroupSync, GroupSyncResult
from kafka_kip.mirror.mirror import Mirror, MirrorSummary

__all__ = [
    'BROKER', 'CHECKED', 'CLOSEST', 'OFF', 'OFFSET_MODES', 'STOP', 'TRUNCATION_POLICIES', 'Copier', 'GroupSync',
    'GroupSyncResult', 'Incident', 'Mirror', 'MirrorSummary', 'PartitionProgress', 'RangeResult', 'copy_range',
]
