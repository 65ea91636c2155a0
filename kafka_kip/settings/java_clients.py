"""The one translator of Java client settings into kafka-python settings (the mirror's and Spark's).

``<prefix><java.style.name>`` (``kafka.security.protocol`` for Spark, ``source.security.protocol`` in a
mirror properties file) becomes kafka-python's ``security_protocol``, typed as kafka-python's default for it
is. ``sasl.jaas.config`` with the PLAIN or SCRAM login module becomes ``sasl_plain_username`` /
``sasl_plain_password`` (:mod:`.jaas`). Java-only settings are refused naming their kafka-python
replacement, and names kafka-python lacks are refused naming the name they became.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_kip.settings.coerce import SettingError, to_bool, to_float, to_int
from kafka_kip.settings.jaas import jaas_credentials

#: Java client settings kafka-python has no counterpart for under that name: what to use instead
#: (``{p}``: the prefix the user writes client settings with).
JAVA_ONLY = {
    'ssl_truststore_location': 'use {p}ssl.cafile (the CA certificates as a PEM file)',
    'ssl_truststore_password': 'use {p}ssl.cafile (a PEM file needs no store password)',
    'ssl_truststore_type': 'use {p}ssl.cafile (a PEM file)',
    'ssl_keystore_location': 'use {p}ssl.certfile and {p}ssl.keyfile (PEM files)',
    'ssl_keystore_password': 'use {p}ssl.password (the password of {p}ssl.keyfile)',
    'ssl_keystore_type': 'use {p}ssl.certfile and {p}ssl.keyfile (PEM files)',
    'ssl_key_password': 'use {p}ssl.password',
    'ssl_endpoint_identification_algorithm': 'use {p}ssl.check.hostname (true or false)',
    'interceptor_classes': 'interceptors can change records; Spark refuses this setting too',
    'partitioner_class': 'Java partitioners cannot run here; give the DataFrame a partition column',
}
_PLAIN_TYPES = (bool, int, float, str, type(None))


def client_configs(settings: Mapping[str, str], prefix: str, defaults: Mapping[str, Any], *,
                   handled: tuple[str, ...] = (), managed: Mapping[str, str] | None = None, label: str = 'option ',
                   error: type[ValueError] = SettingError) -> dict[str, Any]:
    """The ``<prefix><name>`` entries of ``settings`` as kafka-python configs, checked against ``defaults``
    (a ``DEFAULT_CONFIG``).

    ``bootstrap.servers`` and the kafka-python names in ``handled`` are left out (callers read them
    themselves); the names in ``managed`` are refused with the reason given there. ``label`` starts each
    error's name of the setting (``option `` for Spark, ``mm.properties: `` for a file).
    """
    configs: dict[str, Any] = {}
    for key, raw in settings.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):].replace('.', '_')
        where = label + key
        if name == 'bootstrap_servers' or name in handled:
            continue
        if managed and name in managed:
            raise error(f'{where} is not supported: {managed[name]}')
        if name in JAVA_ONLY:
            raise error(f'{where} is a Java client setting: {JAVA_ONLY[name].format(p=prefix)}')
        if name == 'sasl_jaas_config':
            explicit = [f'{prefix}sasl.plain.{n}' for n in ('username', 'password') if f'{prefix}sasl.plain.{n}' in settings]
            if explicit:
                raise error(f'{label.replace("option ", "options ")}{key} and {" and ".join(explicit)} both set the '
                            'SASL credentials; set one of them')
            configs.update(jaas_credentials(where, raw, prefix, error))
            continue
        if name not in defaults or not isinstance(defaults[name], _PLAIN_TYPES) or name == 'kafka_client':
            raise error(f'{where} is not a kafka-python client setting that can be passed on (it becomes {name!r}; '
                        "see kafka-python's KafkaConsumer/KafkaProducer docs)")
        configs[name] = _typed(name, raw, defaults[name], where, error)
    return configs


def _typed(name: str, raw: str, default: Any, where: str, error: type[ValueError]) -> Any:
    """``raw`` as the type of kafka-python's default for ``name`` (``acks`` may also be ``all``)."""
    if name == 'acks' and str(raw).strip().lower() == 'all':
        return 'all'
    if isinstance(default, bool):
        return to_bool(raw, where, error=error)
    if isinstance(default, int):
        return to_int(raw, where, error=error)
    if isinstance(default, float):
        return to_float(raw, where, error=error)
    return str(raw).strip()
