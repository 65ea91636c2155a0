"""``kafka.<setting>`` options: the Kafka client settings of a Spark job as kafka-python settings.

Translated by the one translator the mirror uses too (:mod:`kafka_kip.settings.java_clients`: dots become
underscores, Java-only settings are refused naming their replacement, a PLAIN or SCRAM
``kafka.sasl.jaas.config`` becomes ``sasl_plain_username`` / ``sasl_plain_password``); here only the
settings the data source manages itself are refused, with the reason.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_kip.settings import SettingError, java_clients

#: Client settings the data source sets itself (they decide what is read or how it is decoded).
_MANAGED = {
    'auto_offset_reset': 'use startingOffsets and failOnDataLoss (or onTruncation)',
    'enable_auto_commit': 'the data source never commits to Kafka; Spark checkpoints the offsets',
    'key_deserializer': 'key and value are returned as binary columns',
    'value_deserializer': 'key and value are returned as binary columns',
    'key_serializer': 'the key column is written as it is (binary or string)',
    'value_serializer': 'the value column is written as it is (binary or string)',
}


class OptionError(SettingError):
    """A data source option is unknown, malformed or conflicts with another; the message names it."""


def client_configs(options: Mapping[str, str], prefix: str, defaults: Mapping[str, Any],
                   handled: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``<prefix><name>`` options as kafka-python configs, checked against ``defaults`` (a DEFAULT_CONFIG).

    ``bootstrap.servers`` and the settings named in ``handled`` (kafka-python names, e.g. ``group_id``) are
    left out: callers take them from their own options.
    """
    return java_clients.client_configs(options, prefix, defaults, handled=handled, managed=_MANAGED,
                                       label='option ', error=OptionError)
