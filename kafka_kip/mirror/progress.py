"""Progress: a live status line while the mirror runs (on a terminal only) and the final summary.

The live line shows records copied, records/s over the last seconds, the total lag and the partitions
lagging most. It uses ``rich`` when installed and a plain carriage-return line otherwise.
"""
from __future__ import annotations

import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Any, TextIO

from kafka_kip.mirror.state import Incident, PartitionProgress

if TYPE_CHECKING:
    from kafka_kip.mirror.mirror import MirrorSummary

_RATE_WINDOW_S = 3.0
_WORST_SHOWN = 3


def _name(tp: Any) -> str:
    return f'{tp.topic}-{tp.partition}'


class RecordRate:
    """Records per second over a sliding window of (time, total records) samples."""

    def __init__(self, window_s: float = _RATE_WINDOW_S) -> None:
        self._window = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def update(self, now: float, total: int) -> float:
        self._samples.append((now, total))
        while len(self._samples) > 2 and now - self._samples[0][0] > self._window:
            self._samples.popleft()
        first_time, first_total = self._samples[0]
        return (total - first_total) / (now - first_time) if now > first_time else 0.0


def status_line(partitions: list[PartitionProgress], rate: float) -> str:
    """One line: records, records/s, total lag, the most lagging partitions, stopped partitions."""
    records = sum(p.records for p in partitions)
    lags = [(p.lag, _name(p.source)) for p in partitions if p.lag > 0]
    stopped = sum(1 for p in partitions if p.state == 'stopped')
    line = (f'mirror: {len(partitions)} partitions | {records:,} records | {rate:,.0f} rec/s | '
            f'lag {sum(lag for lag, _ in lags):,}')
    worst = sorted(lags, reverse=True)[:_WORST_SHOWN]
    if worst:
        line += ' (' + ', '.join(f'{name} {lag:,}' for lag, name in worst) + ')'
    if stopped:
        line += f' | {stopped} stopped'
    return line


class LiveProgress:
    """The live status line; pass it as ``Mirror.run(on_progress=...)`` (called a few times a second).

    Silent unless ``stream`` is a TTY (or ``enabled``); ``refresh_per_second`` is rich's redraw rate.
    """

    def __init__(self, stream: TextIO = sys.stdout, *, enabled: bool | None = None,
                 refresh_per_second: float = 4.0) -> None:
        self._stream = stream
        self.enabled = stream.isatty() if enabled is None else enabled
        self._rate = RecordRate()
        self._live: Any = None
        self._text: Any = None
        self._width = 0
        if self.enabled:
            try:
                from rich.console import Console
                from rich.live import Live
                from rich.text import Text
            except ImportError:
                return
            self._text = Text
            self._live = Live('', console=Console(file=stream, force_terminal=True),
                              refresh_per_second=refresh_per_second, transient=True)
            self._live.start()

    def __call__(self, partitions: list[PartitionProgress], elapsed: float) -> None:
        rate = self._rate.update(time.monotonic(), sum(p.records for p in partitions))
        if not self.enabled:
            return
        line = status_line(partitions, rate)
        if self._live is not None:
            self._live.update(self._text(line, no_wrap=True, overflow='ellipsis'), refresh=True)
        else:
            self._stream.write('\r' + line.ljust(self._width))
            self._width = len(line)
            self._stream.flush()

    def note(self, message: str) -> None:
        """Print a line (an incident) above the live line."""
        if self._live is not None:
            self._live.console.print(message, markup=False, highlight=False)
        else:
            if self._width:
                self._stream.write('\r' + ' ' * self._width + '\r')
            self._stream.write(message + '\n')
            self._stream.flush()

    def incident(self, incident: Incident) -> None:
        """``Mirror(on_incident=...)``: show an incident as it happens."""
        self.note(('STOPPED ' if incident.stopped else 'REPORTED ') + incident.message)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif self.enabled and self._width:
            self._stream.write('\r' + ' ' * self._width + '\r')
            self._stream.flush()


def render_summary(summary: MirrorSummary) -> str:
    """The human-readable end-of-run summary."""
    chosen = (summary.offset_mode if summary.offset_mode == summary.requested_mode
              else f'{summary.offset_mode} ({summary.requested_mode})')
    lines = [f'mirrored {summary.records:,} records ({summary.bytes:,} bytes) in {summary.seconds:.1f} s '
             f'= {summary.records_per_second:,.0f} records/s; offsets: {chosen}']
    lines += [f'  topic: {change}' for change in summary.topic_changes]
    lines.append(f'  {"partition":<28} {"mode":<11}{"state":<10} {"copied to":>12} {"source end":>12} {"lag":>10} '
                 f'{"records":>12}')
    for p in sorted(summary.partitions, key=lambda p: (p.source.topic, p.source.partition)):
        lines.append(f'  {_name(p.source):<28} {p.mode or "-":<11}{p.state:<10} {p.copied_to:>12,} '
                     f'{p.source_end:>12,} {p.lag:>10,} {p.records:>12,}')
    for incident in summary.incidents:
        lines.append(f'  {"STOPPED" if incident.stopped else "REPORTED"}: {incident.message}')
    for group, offsets in sorted(summary.groups.committed.items()):
        shown = ', '.join(f'{_name(tp)}@{c.offset}' for tp, c in sorted(offsets.items()))
        lines.append(f'  group {group}: committed on the target {shown}')
    for group, reason in sorted(summary.groups.skipped.items()):
        lines.append(f'  group {group}: not synced, {reason}')
    for group, reason in sorted(summary.groups.failed.items()):
        lines.append(f'  FAILED group {group}: {reason}')
    return '\n'.join(lines)
