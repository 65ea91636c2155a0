"""A topic's own limit on a record batch's size (``max.message.bytes``), looked up through a producer's connections.

The producer checks a record against ``max_request_size`` only; a broker refuses a batch over the topic's
``max.message.bytes`` (default: the broker's ``message.max.bytes``, 1 MiB) with MESSAGE_TOO_LARGE, which names
neither the row nor the limit. Writers that know a row's topic and partition (the Arrow writer) look the limit up
once per topic and refuse an oversize row themselves, naming it.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from kafka_kip import errors as Errors
from kafka_kip.protocol import requests
from kafka_kip.protocol.features import manager_of

log = logging.getLogger(__name__)

#: The topic config that bounds a record batch on the broker.
MAX_MESSAGE_BYTES = 'max.message.bytes'
_DENIED = (Errors.TopicAuthorizationFailedError, Errors.ClusterAuthorizationFailedError)


def max_message_bytes(producer: Any, topic: str) -> int | None:
    """``topic``'s ``max.message.bytes`` (DescribeConfigs through ``producer``'s connections, waiting at most its
    ``request_timeout_ms``), or None where it cannot be read: the principal may not describe the topic's configs
    (authorization), or the broker did not answer. The broker enforces the limit either way."""
    manager = manager_of(producer)
    request = requests.describe_topic_configs([topic], keys=[MAX_MESSAGE_BYTES])

    async def ask() -> Any:
        return await manager.send(request)

    answered = threading.Event()
    future = manager.call_soon(ask)  # the producer's sender thread drives the connections
    future.add_both(lambda _: answered.set())
    producer._sender.wakeup()
    timeout_ms = producer.config['request_timeout_ms']
    if not answered.wait(timeout_ms / 1000):
        log.warning('%s of topic %r: no answer to DescribeConfigs within request_timeout_ms=%d; rows are checked '
                    'against max_request_size only', MAX_MESSAGE_BYTES, topic, timeout_ms)
        return None
    if future.failed():
        log.warning('%s of topic %r could not be read (%s); rows are checked against max_request_size only',
                    MAX_MESSAGE_BYTES, topic, future.exception)
        return None
    for result in future.value.results:
        if result.error_code:
            error = Errors.for_code(result.error_code)
            # a producer's principal need not be allowed DESCRIBE_CONFIGS: no warning for that
            level = logging.DEBUG if issubclass(error, _DENIED) else logging.WARNING
            log.log(level, '%s of topic %r could not be read (%s: %s); rows are checked against max_request_size '
                    'only', MAX_MESSAGE_BYTES, topic, error.__name__, result.error_message)
            return None
        for config in result.configs:
            if config.name == MAX_MESSAGE_BYTES and config.value is not None:
                return int(config.value)
    return None


__all__ = ['MAX_MESSAGE_BYTES', 'max_message_bytes']
