"""The error of the record walkers (:mod:`kafka_kip._codec.record_walk`), shared by the compiled one."""
from __future__ import annotations


class MalformedRecords(ValueError):
    """The records of a batch do not parse as v2 records; ``index`` is the record at fault."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index
