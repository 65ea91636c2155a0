"""How the copier reads the brokers' answers: one-partition answers, which errors a retry or a new producer
session cures. The requests themselves are built by :mod:`kafka_kip.protocol.requests`."""
from __future__ import annotations

from typing import Any

import kafka_kip.errors as Errors
from kafka_kip.protocol.constants import (
    INVALID_PRODUCE_OFFSET,
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    UNKNOWN_PRODUCER_ID,
)

#: Produce errors after which the partition's producer session is renewed and the copy resumes
#: from the target's end: the write may or may not have landed, or the sequence chain broke.
SESSION_ERRORS = frozenset({
    OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID, INVALID_PRODUCE_OFFSET,
})


def only_partition(topics: list[Any]) -> Any:
    """The one partition of a one-partition response's topic list, or None when the broker left it out."""
    return topics[0].partitions[0] if topics and topics[0].partitions else None


def only_produced(response: Any) -> Any:
    """The one partition answer of a one-partition ProduceResponse, or None when the broker left it out."""
    topics = response.responses
    return topics[0].partition_responses[0] if topics and topics[0].partition_responses else None


def is_retriable(error_code: int) -> bool:
    """True for errors a retry (after a metadata refresh) can cure."""
    return issubclass(Errors.for_code(error_code), Errors.RetriableError)


def error_name(error_code: int) -> str:
    return Errors.for_code(error_code).__name__


#: A fetch that reads one partition at once: Tansu answers ``max_wait_ms=0`` with no partitions at all.
SINGLE_READ_MAX_WAIT_MS = 50
