"""``kafka-kip broker`` in a child process, for tests that read its memory or run its command line."""
from __future__ import annotations

import subprocess
import sys


class BrokerProcess:
    """``kafka-kip broker --brokers 1`` with ``configs`` (``--config key=value``, ``_`` for ``.`` in the key) and
    further ``flags`` in a child process; ``lines`` are the lines it printed first (the bootstrap servers, ...)."""

    def __init__(self, *flags: str, lines: int = 1, **configs: object) -> None:
        command = [sys.executable, '-m', 'kafka_kip', 'broker', '--brokers', '1', *flags]
        for key, value in configs.items():
            command += ['--config', f'{key.replace("_", ".")}={value}']
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = [self.process.stdout.readline().decode().strip() for _ in range(lines)]
        if not self.lines[0]:
            self.process.kill()
            raise RuntimeError(f'the broker did not start: {self.process.stderr.read().decode()}')
        host, port = self.lines[0].split(',')[0].split(':')
        self.address = (host, int(port))
        self.bootstrap_servers = self.lines[0]

    def peak_rss_mib(self) -> float:
        """The process's peak resident memory (VmHWM) in MiB."""
        with open(f'/proc/{self.process.pid}/status') as status:
            for line in status:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) / 1024
        raise AssertionError('no VmHWM in /proc')

    def reset_peak_rss(self) -> float:
        """Lower the peak to the current resident memory (``/proc/PID/clear_refs``), so that a later
        :meth:`peak_rss_mib` measures what one case took in a process several cases share; returns it in MiB."""
        with open(f'/proc/{self.process.pid}/clear_refs', 'w') as clear_refs:
            clear_refs.write('5')
        return self.peak_rss_mib()

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.process.stdout.close()
        self.process.stderr.close()

    def __enter__(self) -> BrokerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
