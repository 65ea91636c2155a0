"""The ``server.properties`` keys of a broker's listener: ``listeners`` and the TLS keystore (``ssl.*``).

``kafka-kip broker --config-file server.properties`` takes them as Kafka does: ``listeners=SSL://host:port`` (or
``PLAINTEXT://``) sets the first broker's address (the others take the next ports) and, with ``SSL``, the
certificate comes from ``ssl.keystore.location`` / ``ssl.keystore.password`` / ``ssl.keystore.type`` (JKS,
Kafka's default; PKCS12; PEM) / ``ssl.key.password`` (:class:`~kafka_kip_reference.broker.tls.KeystoreCertificates`).
``ssl.truststore.*`` is accepted and checked to name a file: it holds the CAs of client certificates, which the
reference cluster never asks for (Kafka's default ``ssl.client.auth=none``). Anything else about listeners is
refused naming the key or value.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka_kip_reference.broker.tls import KeystoreCertificates

#: The listener security protocols a ``listeners`` entry may name.
PROTOCOLS = ('PLAINTEXT', 'SSL')
KEYSTORE_KEYS = ('ssl.keystore.location', 'ssl.keystore.password', 'ssl.keystore.type', 'ssl.key.password')
TRUSTSTORE_KEYS = ('ssl.truststore.location', 'ssl.truststore.password', 'ssl.truststore.type')
LISTENER_KEYS = ('listeners', *KEYSTORE_KEYS, *TRUSTSTORE_KEYS)


@dataclass(frozen=True)
class Listener:
    """Where the first broker listens and with which certificate (None: PLAINTEXT)."""

    host: str | None
    port: int
    tls: KeystoreCertificates | None


def split_listener_config(config: Mapping[str, str]) -> tuple[dict[str, str], Listener | None]:
    """``config`` without the listener keys, and the :class:`Listener` they give (None when none is given)."""
    rest = {name: value for name, value in config.items() if name not in LISTENER_KEYS}
    given = {name: config[name] for name in LISTENER_KEYS if name in config}
    if not given:
        return rest, None
    if 'listeners' not in given:
        raise ValueError(f'{", ".join(given)} given without listeners=SSL://HOST:PORT')
    protocol, host, port = _parse_listeners(given['listeners'])
    if protocol == 'PLAINTEXT':
        stray = [name for name in given if name.startswith('ssl.')]
        if stray:
            raise ValueError(f'{", ".join(stray)} given for a PLAINTEXT listener; use listeners=SSL://{host}:{port}')
        return rest, Listener(host, port, None)
    if 'ssl.keystore.location' not in given:
        raise ValueError('listeners names an SSL listener but ssl.keystore.location is not set')
    location = given.get('ssl.truststore.location')
    if location is not None and not Path(location).is_file():
        raise ValueError(f'ssl.truststore.location {location!r} is no file')
    tls = KeystoreCertificates(given['ssl.keystore.location'], given.get('ssl.keystore.password'),
                               given.get('ssl.keystore.type', 'JKS'), given.get('ssl.key.password'))
    return rest, Listener(host, port, tls)


def _parse_listeners(value: str) -> tuple[str, str | None, int]:
    """``(protocol, host, port)`` of ``listeners``' one entry (an empty host: every interface)."""
    entries = [entry.strip() for entry in value.split(',') if entry.strip()]
    if len(entries) != 1:
        raise ValueError(f'listeners {value!r}: the reference cluster takes one listener, '
                         f'PLAINTEXT://HOST:PORT or SSL://HOST:PORT')
    name, _, address = entries[0].partition('://')
    protocol = name.upper()  # a listener's name is its protocol unless listener.security.protocol.map says otherwise
    if protocol not in PROTOCOLS:
        raise ValueError(f'listeners {value!r}: listener {name!r} is not supported; accepted: {", ".join(PROTOCOLS)}')
    host, _, port = address.rpartition(':')
    if not port.isdigit():
        raise ValueError(f'listeners {value!r}: expected {protocol}://HOST:PORT')
    return protocol, host.strip('[]') or None, int(port)
