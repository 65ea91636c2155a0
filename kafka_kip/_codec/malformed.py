"""The error of the record walkers (:mod:`kafka_kip._codec.record_walk`), shared by the compiled one."""
from __future__ import annotations

import enum


class Finding(enum.Enum):
    """What a walker finds wrong, worded once for both walkers (the compiled one answers as the Python one)."""

    ENDS_EARLY = 'the batch ends after {index} of its {count} records'
    PAST_END = 'record {index} runs past the end of the batch'
    NEGATIVE_LENGTH = 'record {index} has a negative length'
    LONG_VARINT = 'record {index} has a {name} longer than {max_bytes} bytes'
    NEGATIVE_HEADERS = 'record {index} has {headers} headers'
    NEGATIVE_HEADER_KEY = 'header {header} of record {index} has a negative key length'
    NOT_FILLED = 'record {index} does not fill its length of {size} bytes exactly'
    TRAILING_BYTES = 'bytes follow the last of the {count} records'


class MalformedRecords(ValueError):
    """The records of a batch do not parse as v2 records; ``index`` is the record at fault, ``finding`` why."""

    def __init__(self, index: int, finding: Finding, **values: int | str) -> None:
        super().__init__(finding.value.format(index=index, **values))
        self.index = index
        self.finding = finding
