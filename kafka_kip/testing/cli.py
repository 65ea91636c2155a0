"""``kafka-kip broker`` (parsed in :mod:`kafka_kip.cli`): run a reference cluster in the foreground until Ctrl-C."""
from __future__ import annotations

import signal
import sys
import threading
from typing import TextIO

from kafka_kip.testing.cluster import ReferenceCluster


def run_broker(brokers: int = 1, port: int = 0, out: TextIO | None = None,
               stop: threading.Event | None = None) -> int:
    """Start ``brokers`` brokers (ports ``port, port+1, ...`` or ephemeral), print the bootstrap
    servers, and serve until Ctrl-C / SIGTERM (or until ``stop`` is set)."""
    out = out or sys.stdout
    stop = stop or threading.Event()
    ports = [port + i for i in range(brokers)] if port else None
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        with ReferenceCluster(brokers, ports=ports) as cluster:
            print(cluster.bootstrap_servers, file=out, flush=True)
            while not stop.wait(0.5):
                pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
