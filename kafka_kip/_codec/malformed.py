"""The error of the record walkers (:mod:`kafka_kip._codec.record_walk`), shared by the compiled one."""
from __future__ import annotations


class MalformedRecords(ValueError):
    """The records of a batch do not parse as v2 records; ``index`` is the record at fault."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index

    # What the walkers find, worded once for both: the compiled walker answers exactly as the Python one.

    @classmethod
    def ends_early(cls, index: int, count: int) -> MalformedRecords:
        return cls(index, f'the batch ends after {index} of its {count} records')

    @classmethod
    def past_end(cls, index: int) -> MalformedRecords:
        return cls(index, f'record {index} runs past the end of the batch')

    @classmethod
    def negative_length(cls, index: int) -> MalformedRecords:
        return cls(index, f'record {index} has a negative length')

    @classmethod
    def long_varint(cls, index: int, name: str, max_bytes: int) -> MalformedRecords:
        return cls(index, f'record {index} has a {name} longer than {max_bytes} bytes')

    @classmethod
    def negative_headers(cls, index: int, headers: int) -> MalformedRecords:
        return cls(index, f'record {index} has {headers} headers')

    @classmethod
    def negative_header_key(cls, index: int, header: int) -> MalformedRecords:
        return cls(index, f'header {header} of record {index} has a negative key length')

    @classmethod
    def not_filled(cls, index: int, size: int) -> MalformedRecords:
        return cls(index, f'record {index} does not fill its length of {size} bytes exactly')

    @classmethod
    def trailing_bytes(cls, index: int, count: int) -> MalformedRecords:
        return cls(index, f'bytes follow the last of the {count} records')
