"""Wire extensions: patched message specs, headers, feature negotiation.

Importing this package runs :func:`install`, so kafka-python encodes and decodes with the extensions as
soon as ``kafka_kip`` (or ``kafka_kip.protocol``) is imported.
"""
from __future__ import annotations

from kafka.protocol import api_message

from kafka_kip import errors as _errors
from kafka_kip.protocol import extensions, features, headers, messages


def install() -> None:
    """Make kafka-python use the wire extensions. Idempotent.

    - message headers: ``kafka.protocol.api_message`` resolves ``ApiMessage.header_class`` through its
      module globals ``RequestHeader`` / ``ResponseHeader``; they are rebound to the KIP-1243 headers in
      :mod:`kafka_kip.protocol.headers` (identical bytes while no consistency state is set);
    - responses: defining :mod:`kafka_kip.protocol.messages` registered the patched response classes in
      kafka-python's ``ResponseClassRegistry`` (nothing to do here; the module keeps them alive);
    - error codes: the extension error table is in ``kafka.errors.for_code``;
    - features: every connection records the SupportedFeatures of its ApiVersionsResponse.
    """
    api_message.RequestHeader = headers.RequestHeader
    api_message.ResponseHeader = headers.ResponseHeader
    _errors.register_extension_errors()
    features.install_feature_discovery()


install()

__all__ = ['install', 'extensions', 'features', 'headers', 'messages']
