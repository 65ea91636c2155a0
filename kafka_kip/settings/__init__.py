"""Settings declared once: a table per component, and the one parser, coercer and translator each reads with.

* :mod:`.table`: :class:`Setting` (name, type, default, doc, choices, CLI flag, properties key, Spark option)
  and :class:`SettingsTable`, from which the argparse flags, the properties parsing, the typed values and the
  docs tables are generated (MirrorMaker 2's ``ConfigDef``, in Python);
* :mod:`.properties`: the one Java ``.properties`` grammar (the mirror, ``kafka-kip broker --config-file``);
* :mod:`.coerce`: the one set of bool / int / duration coercers, errors naming the setting, the value and
  what is accepted;
* :mod:`.java_clients`: Java client settings (``security.protocol``, ``sasl.jaas.config``, ...) as
  kafka-python settings, Java-only keys refused naming their replacement (the mirror and Spark);
* :mod:`.docs`: ``python -m kafka_kip.settings.docs`` rewrites the generated tables in docs/.
"""
from __future__ import annotations

from kafka_kip.settings.coerce import SettingError, to_bool, to_duration_ms, to_int
from kafka_kip.settings.properties import parse_properties
from kafka_kip.settings.table import Setting, SettingsTable

__all__ = ['Setting', 'SettingError', 'SettingsTable', 'parse_properties', 'to_bool', 'to_duration_ms', 'to_int']
