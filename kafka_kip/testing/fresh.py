"""Scenario steps in a fresh Python process: how a figure labelled "kafka-python" is measured on stock code.

A process that imported kafka_kip is not a stock kafka-python process, so a scenario's stock side runs in a
:class:`FreshProcess`: a new interpreter that runs the functions of a scenario file (a plain Python file that
imports kafka, not kafka_kip) one call at a time, while the test drives the cluster in between. With
``stock=True`` (the default) closing it fails if kafka_kip was imported in it after all; the same scenario can
run its kafka_kip side in a fresh process too (``stock=False``), so both sides start from the same state::

    with FreshProcess(Path(__file__).with_name('scenario.py')) as stock:
        stock.call('start', cluster.bootstrap_servers)
        cluster.elect_leader(tp, 1)
        assert stock.call('consume', 5) == [...]

Arguments and results travel as JSON.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

_WORKER = Path(__file__).with_name('_fresh_worker.py')


class FreshProcessError(RuntimeError):
    """A call failed in the fresh process (the message holds its traceback), or the process broke its promise."""


class FreshProcess:
    """A new interpreter running the functions of ``scenario`` on request (see the module docstring)."""

    def __init__(self, scenario: str | os.PathLike[str], *, stock: bool = True, timeout: float = 120.0) -> None:
        self.scenario = Path(scenario)
        self.stock = stock
        self.timeout = timeout
        self._stderr = tempfile.TemporaryFile()
        self._process = subprocess.Popen([sys.executable, str(_WORKER), str(self.scenario)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._stderr, text=True, bufsize=1)

    def call(self, function: str, *args: Any, timeout: float | None = None) -> Any:
        """``function(*args)`` in the fresh process; its result, or FreshProcessError with its traceback."""
        reply = self._exchange({'call': function, 'args': list(args)}, self.timeout if timeout is None else timeout)
        if 'error' in reply:
            raise FreshProcessError(f'{self.scenario.name}: {function}() failed: {reply["error"]}\n'
                                    f'{reply["traceback"]}{self._stderr_tail()}')
        return reply['result']

    def kill(self) -> None:
        """End the process at once (SIGKILL), as a crash: it closes nothing and says goodbye to nobody."""
        self._process.kill()
        self._process.wait(timeout=self.timeout)
        self._stderr.close()

    def close(self) -> None:
        """End the process; with ``stock=True`` raise FreshProcessError if it imported kafka_kip."""
        if self._process.poll() is not None:
            return
        try:
            reply = self._exchange({'call': None}, self.timeout)
        finally:
            self._process.stdin.close()
            self._process.wait(timeout=self.timeout)
            self._stderr.close()
        if self.stock and reply['kafka_kip_imported']:
            raise FreshProcessError(f'{self.scenario.name} imported kafka_kip in a process meant to run stock '
                                    'kafka-python')

    def _exchange(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        self._process.stdin.write(json.dumps(request) + '\n')
        self._process.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._process.kill()
                raise FreshProcessError(f'{self.scenario.name}: no answer to {request} within {timeout} s'
                                        f'{self._stderr_tail()}')
            ready, _, _ = select.select([self._process.stdout], [], [], remaining)
            if ready:
                line = self._process.stdout.readline()
                if not line:
                    raise FreshProcessError(f'{self.scenario.name}: the process ended (exit status '
                                            f'{self._process.wait()}){self._stderr_tail()}')
                return json.loads(line)

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        tail = self._stderr.read()[-4000:].decode(errors='replace')
        return f'\n--- its stderr ---\n{tail}' if tail else ''

    def __enter__(self) -> FreshProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:
            self._process.kill()
            self._process.wait(timeout=self.timeout)
            self._stderr.close()


__all__ = ['FreshProcess', 'FreshProcessError']
