"""``kafka.<setting>`` options: the Kafka client settings of a Spark job as kafka-python settings.

Spark hands ``kafka.*`` options to the Java clients; here they become kafka-python settings with the dots
turned into underscores (``kafka.security.protocol`` -> ``security_protocol``). Settings the data source
manages are refused with the reason, Java-only settings are refused naming their kafka-python
replacement, and ``kafka.sasl.jaas.config`` with the PLAIN or SCRAM login module is mapped onto
``sasl_plain_username`` / ``sasl_plain_password``, so a job's security options work unchanged.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: Client settings the data source sets itself (they decide what is read or how it is decoded).
_MANAGED = {
    'auto_offset_reset': 'use startingOffsets and failOnDataLoss (or onTruncation)',
    'enable_auto_commit': 'the data source never commits to Kafka; Spark checkpoints the offsets',
    'key_deserializer': 'key and value are returned as binary columns',
    'value_deserializer': 'key and value are returned as binary columns',
    'key_serializer': 'the key column is written as it is (binary or string)',
    'value_serializer': 'the value column is written as it is (binary or string)',
}
#: Java client settings kafka-python has no counterpart for under that name: what to use instead.
_JAVA_ONLY = {
    'ssl_truststore_location': 'use kafka.ssl.cafile (the CA certificates as a PEM file)',
    'ssl_truststore_password': 'use kafka.ssl.cafile (a PEM file needs no store password)',
    'ssl_truststore_type': 'use kafka.ssl.cafile (a PEM file)',
    'ssl_keystore_location': 'use kafka.ssl.certfile and kafka.ssl.keyfile (PEM files)',
    'ssl_keystore_password': 'use kafka.ssl.password (the password of kafka.ssl.keyfile)',
    'ssl_keystore_type': 'use kafka.ssl.certfile and kafka.ssl.keyfile (PEM files)',
    'ssl_key_password': 'use kafka.ssl.password',
    'ssl_endpoint_identification_algorithm': 'use kafka.ssl.check.hostname (true or false)',
    'interceptor_classes': 'interceptors can change records; Spark refuses this setting too',
    'partitioner_class': 'Java partitioners cannot run here; give the DataFrame a partition column',
}
_PLAIN_TYPES = (bool, int, float, str, type(None))
_JAAS = re.compile(r'\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\s*(?P<options>.*?)\s*;?\s*$',
                   re.DOTALL)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')
_JAAS_PASSWORD_MODULES = ('org.apache.kafka.common.security.plain.PlainLoginModule',
                          'org.apache.kafka.common.security.scram.ScramLoginModule')


class OptionError(ValueError):
    """A data source option is unknown, malformed or conflicts with another; the message names it."""


def _coerce(option: str, raw: str, default: Any) -> Any:
    text = str(raw).strip()
    if isinstance(default, bool):
        if text.lower() not in ('true', 'false'):
            raise OptionError(f'option {option} must be true or false, got {raw!r}')
        return text.lower() == 'true'
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise OptionError(f'option {option} must be an integer, got {raw!r}')
    if isinstance(default, float):
        try:
            return float(text)
        except ValueError:
            raise OptionError(f'option {option} must be a number, got {raw!r}')
    return text


def jaas_credentials(option: str, raw: str) -> dict[str, str]:
    """``sasl_plain_username`` / ``sasl_plain_password`` from a PLAIN or SCRAM ``sasl.jaas.config`` value."""
    found = _JAAS.fullmatch(str(raw))
    module = found.group('module') if found else None
    if module not in _JAAS_PASSWORD_MODULES:
        raise OptionError(f'option {option}: only the PlainLoginModule and ScramLoginModule login modules can be '
                          f'mapped (onto kafka.sasl.plain.username / kafka.sasl.plain.password); got {raw!r}. For '
                          'GSSAPI set kafka.sasl.mechanism=GSSAPI and kafka.sasl.kerberos.service.name')
    assert found is not None
    values = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
              for m in _JAAS_OPTION.finditer(found.group('options'))}
    if 'username' not in values or 'password' not in values:
        raise OptionError(f'option {option}: the {module.rsplit(".", 1)[1]} entry needs username="..." and '
                          'password="..."')
    unescape = re.compile(r'\\(.)')
    return {'sasl_plain_username': unescape.sub(r'\1', values['username']),
            'sasl_plain_password': unescape.sub(r'\1', values['password'])}


def client_configs(options: Mapping[str, str], prefix: str, defaults: Mapping[str, Any],
                   handled: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``<prefix><name>`` options as kafka-python configs, checked against ``defaults`` (a DEFAULT_CONFIG).

    ``bootstrap.servers`` and the settings named in ``handled`` (kafka-python names, e.g. ``group_id``) are
    left out: callers take them from their own options.
    """
    configs: dict[str, Any] = {}
    for key, raw in options.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):].replace('.', '_')
        option = prefix + key[len(prefix):]
        if name == 'bootstrap_servers' or name in handled:
            continue
        if name in _MANAGED:
            raise OptionError(f'option {option} is not supported: {_MANAGED[name]}')
        if name in _JAVA_ONLY:
            raise OptionError(f'option {option} is a Java client setting: {_JAVA_ONLY[name]}')
        if name == 'sasl_jaas_config':
            explicit = [f'{prefix}sasl.plain.{n}' for n in ('username', 'password') if f'{prefix}sasl.plain.{n}' in options]
            if explicit:
                raise OptionError(f'options {option} and {" and ".join(explicit)} both set the SASL credentials; '
                                  'set one of them')
            configs.update(jaas_credentials(option, raw))
            continue
        if name not in defaults or not isinstance(defaults[name], _PLAIN_TYPES) or name == 'kafka_client':
            raise OptionError(f'option {option} is not a kafka-python client setting this data source can pass '
                              f'on (it becomes {name!r}; see kafka-python\'s KafkaConsumer/KafkaProducer docs)')
        if name == 'acks' and str(raw).strip().lower() == 'all':
            configs[name] = 'all'
            continue
        configs[name] = _coerce(option, raw, defaults[name])
    return configs
