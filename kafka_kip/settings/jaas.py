"""The one JAAS parser: a ``sasl.jaas.config`` value's PLAIN or SCRAM credentials for kafka-python."""
from __future__ import annotations

import re

from kafka_kip.settings.coerce import SettingError

_ENTRY = re.compile(r'\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\s*(?P<options>.*?)\s*;?\s*$',
                    re.DOTALL)
_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')
_ESCAPE = re.compile(r'\\(.)')
PASSWORD_MODULES = ('org.apache.kafka.common.security.plain.PlainLoginModule',
                    'org.apache.kafka.common.security.scram.ScramLoginModule')


def jaas_credentials(where: str, raw: str, prefix: str = 'kafka.',
                     error: type[ValueError] = SettingError) -> dict[str, str]:
    """``sasl_plain_username`` / ``sasl_plain_password`` of a PLAIN or SCRAM login module entry.

    ``where`` names the setting in errors, ``prefix`` is how the user spells the client settings (``kafka.``
    for Spark, ``source.`` for the mirror) in the advice for other login modules.
    """
    found = _ENTRY.fullmatch(str(raw))
    module = found.group('module') if found else None
    if found is None or module not in PASSWORD_MODULES:
        raise error(f'{where}: only the PlainLoginModule and ScramLoginModule login modules can be mapped (onto '
                    f'{prefix}sasl.plain.username / {prefix}sasl.plain.password); got {raw!r}. For GSSAPI set '
                    f'{prefix}sasl.mechanism=GSSAPI and {prefix}sasl.kerberos.service.name')
    values = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
              for m in _OPTION.finditer(found.group('options'))}
    if 'username' not in values or 'password' not in values:
        raise error(f'{where}: the {module.rsplit(".", 1)[1]} entry needs username="..." and password="..."')
    return {'sasl_plain_username': _ESCAPE.sub(r'\1', values['username']),
            'sasl_plain_password': _ESCAPE.sub(r'\1', values['password'])}
