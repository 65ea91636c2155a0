"""``kafka-kip broker`` (parsed in :mod:`kafka_kip.cli`): run a reference cluster in the foreground until Ctrl-C."""
from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import TextIO

from kafka_kip_reference.broker.cluster import ReferenceCluster
from kafka_kip_reference.broker.listener_config import split_listener_config


def run_broker(brokers: int = 1, port: int = 0, out: TextIO | None = None, stop: threading.Event | None = None,
               broker_config: Mapping[str, str] | None = None, features: Iterable[str] | None = None,
               data_dir: str | None = None, **security: object) -> int:
    """Start ``brokers`` brokers (ports ``port, port+1, ...`` or ephemeral) with ``broker_config``, ``features``,
    ``data_dir`` (:mod:`kafka_kip_reference.broker.data_dir`) and ``security`` (``users``, ``replicator_principals``, ``tls``, ``authorizer``, ``super_users``: see
    :class:`ReferenceCluster`), print the
    bootstrap servers (and ``ssl_cafile=PATH`` with TLS), and serve until Ctrl-C / SIGTERM (or until ``stop`` is set). A bad config or feature is reported on
    stderr with exit code 2. ``broker_config`` may hold Kafka's listener keys (``listeners``, ``ssl.keystore.*``:
    :mod:`kafka_kip_reference.broker.listener_config`)."""
    try:
        broker_config, listener = split_listener_config(broker_config or {})
        host = {}
        if listener is not None:
            if port and port != listener.port:
                raise ValueError(f'--port {port} and listeners port {listener.port} disagree')
            if listener.tls is not None and security.get('tls'):
                raise ValueError('--tls and an SSL listener with ssl.keystore.location: give one of them')
            port = listener.port
            host = {'host': listener.host} if listener.host else {}
            if listener.tls is not None:
                security['tls'] = listener.tls
        cluster = ReferenceCluster(brokers, ports=[port + i for i in range(brokers)] if port else None,
                                   broker_config=broker_config, features=features, data_dir=data_dir, **host,
                                   **security)
    except ValueError as exc:
        print(f'kafka-kip broker: {exc}', file=sys.stderr)
        return 2
    out = out or sys.stdout
    stop = stop or threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        with cluster:
            print(cluster.bootstrap_servers, file=out, flush=True)
            if cluster.ssl_cafile:
                print(f'ssl_cafile={cluster.ssl_cafile}', file=out, flush=True)
            while not stop.wait(0.5):
                pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
