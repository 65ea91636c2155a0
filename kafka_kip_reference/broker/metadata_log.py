"""The reference cluster's metadata log: Kafka's ``__cluster_metadata-0``, one record per metadata change.

Every change of the cluster metadata (topics created or deleted, partitions added, leaders and ISRs, broker
registrations) appends a record; a broker's metadata image contains the log up to some offset, and that
offset is KIP-1243's consistency token. A broker whose metadata is delayed
(``ReferenceCluster.delay_metadata``) keeps the image, and so the offset, it had. The records say what
changed, for tests and for the curious (``ReferenceCluster.metadata_log()``); nothing replays them.
"""
from __future__ import annotations

from dataclasses import dataclass

#: The offset an image of an empty log contains.
EMPTY_LOG_OFFSET = -1


@dataclass(frozen=True)
class MetadataRecord:
    """One metadata change at ``offset``, described in words (``'create topic t (3 partitions)'``)."""

    offset: int
    change: str


class MetadataLog:
    """The records of every metadata change, in order; offsets start at 0."""

    def __init__(self) -> None:
        self._records: list[MetadataRecord] = []

    def append(self, change: str) -> int:
        """Append a record of ``change``; returns its offset."""
        record = MetadataRecord(len(self._records), change)
        self._records.append(record)
        return record.offset

    @property
    def last_offset(self) -> int:
        """The offset of the last record (:data:`EMPTY_LOG_OFFSET` while the log is empty)."""
        return len(self._records) - 1

    def records(self, start: int = 0) -> list[MetadataRecord]:
        """The records from offset ``start`` on."""
        return self._records[max(start, 0):]


__all__ = ['EMPTY_LOG_OFFSET', 'MetadataLog', 'MetadataRecord']
