"""Defining kafka_kip's patched response classes leaves kafka-python's ``ResponseClassRegistry`` as it was.

kafka-python registers every response class defined anywhere (``ApiMessage.__init_subclass__``) in a
process-wide registry by API key, the last definition winning: defining kafka_kip's FetchResponse would
make every stock client in the process decode fetches with it. It does the same again for each versioned
class (``FetchResponse[12]``) when that is first built. kafka_kip's connections choose their response
classes themselves (:mod:`.parser_response_class`), so :mod:`kafka_kip.protocol.messages` takes a
:func:`snapshot` before its definitions, and :func:`install` builds every versioned class of the new
response classes (so none is built, and registered, later) and then puts the registry back.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.protocol.api_header import ResponseClassRegistry
from kafka.protocol.api_message import ApiMessage

from kafka_kip._patch.rebind import KAFKA_PYTHON_VERSION, KafkaPythonChanged


def _registry() -> dict[int, Any]:
    return ResponseClassRegistry._response_class_registry


def snapshot() -> dict[int, Any]:
    """kafka-python's registry entries now (api key -> registered class)."""
    return dict(_registry())


def install(before: dict[int, Any], defined: Iterable[type[ApiMessage]]) -> None:
    """Put kafka-python's registry back to ``before``, undoing the registration of the ``defined`` classes.

    The tripwire: raises KafkaPythonChanged unless every response class in ``defined`` was registered as
    kafka-python 3.0 does it (otherwise this restore would not undo whatever registration took its place).
    """
    registry = _registry()
    responses = [cls for cls in defined if not cls.is_request()]
    for cls in responses:
        if cls.API_KEY not in registry or registry[cls.API_KEY][None] is not cls:
            raise KafkaPythonChanged(
                f'kafka-python {KAFKA_PYTHON_VERSION} no longer registers {cls.__name__} in '
                'ResponseClassRegistry when it is defined; kafka_kip must be adapted to this kafka-python version')
        for version in range(cls.max_version + 1):
            cls[version]  # noqa: B018  (built and cached now, while the registry is restored below)
    for api_key in set(registry) - set(before):
        del registry[api_key]
    for api_key, entry in before.items():
        if registry.get(api_key) is not entry:
            registry[api_key] = entry
