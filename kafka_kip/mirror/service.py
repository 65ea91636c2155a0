"""Several mirror flows in one process: each in its own thread, stopped together, reported together.

A :class:`MirrorService` runs one :class:`~kafka_kip.mirror.mirror.Mirror` per flow (``a->b``, ``b->a``,
...; :mod:`kafka_kip.mirror.config`). A flow that fails (its cluster unreachable, an error out of its run)
stops alone: the others go on, and the failure is in :meth:`MirrorService.results` and the exit code.
:meth:`MirrorService.statuses` feeds the one metrics endpoint (:mod:`kafka_kip.mirror.metrics`).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka.errors import KafkaError

from kafka_kip.mirror.metrics import FlowStatus
from kafka_kip.mirror.mirror import EXIT_NOT_ALL_COPIED, EXIT_OK, Mirror, MirrorSummary
from kafka_kip.mirror.state import Incident, PartitionProgress

log = logging.getLogger(__name__)
EXIT_COULD_NOT_RUN = 1


@dataclass
class FlowResult:
    """How a flow ended: its summary, or the error that ended it (then exit code 1 for the flow)."""

    name: str
    summary: MirrorSummary | None = None
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_COULD_NOT_RUN if self.summary is None else self.summary.exit_code

    def to_dict(self) -> dict[str, Any]:
        if self.summary is None:
            return {'error': self.error, 'exit_code': self.exit_code}
        return self.summary.to_dict()


def service_exit_code(results: list[FlowResult]) -> int:
    """1 when no flow could run; else 2 when a flow failed or did not copy everything; else the worst other
    code (3: a stop did not finish its writes); else 0."""
    codes = [r.exit_code for r in results]
    if all(code == EXIT_COULD_NOT_RUN for code in codes):
        return EXIT_COULD_NOT_RUN
    if EXIT_COULD_NOT_RUN in codes or EXIT_NOT_ALL_COPIED in codes:
        return EXIT_NOT_ALL_COPIED
    return max(codes, default=EXIT_OK)


class MirrorService:
    """Runs the ``flows`` (flow name -> ``Mirror`` keyword arguments) until stopped or, with ``stop_at_end``,
    until each has copied what its source had at start.

    ``on_incident(flow, incident)`` and ``on_failure(flow, error)`` are called from the flows' threads;
    ``on_progress(partitions, seconds)`` gets every flow's partitions together.
    """

    def __init__(self, flows: Mapping[str, Mapping[str, Any]], *,
                 on_incident: Callable[[str, Incident], None] | None = None,
                 on_failure: Callable[[str, str], None] | None = None) -> None:
        self.mirrors: dict[str, Mirror] = {}
        for name, kwargs in flows.items():
            report = None if on_incident is None else (lambda incident, name=name: on_incident(name, incident))
            self.mirrors[name] = Mirror(on_incident=report, **kwargs)
        self._on_failure = on_failure
        self._results: dict[str, FlowResult] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._stopping = threading.Event()

    @property
    def shutdown_timeout_ms(self) -> int:
        return max(mirror.shutdown_timeout_ms for mirror in self.mirrors.values())

    def start(self, *, stop_at_end: bool = False,
              on_progress: Callable[[list[PartitionProgress], float], None] | None = None) -> None:
        """Start every flow in its own thread."""
        progress = None if on_progress is None or len(self.mirrors) > 1 else on_progress
        for name, mirror in self.mirrors.items():
            thread = threading.Thread(target=self._run_flow, args=(name, mirror, stop_at_end, progress),
                                      name=f'mirror {name}', daemon=True)
            self._threads[name] = thread
            thread.start()

    def _run_flow(self, name: str, mirror: Mirror, stop_at_end: bool, progress: Any) -> None:
        try:
            self._results[name] = FlowResult(name, mirror.run(stop_at_end=stop_at_end, on_progress=progress))
        except Exception as exc:  # a flow's failure ends that flow only
            error = str(exc) if isinstance(exc, KafkaError) else f'{type(exc).__name__}: {exc}'  # KafkaError names itself
            log.error('flow %s failed: %s', name, error, exc_info=not isinstance(exc, (KafkaError, OSError, ValueError)))
            self._results[name] = FlowResult(name, error=error)
            if self._on_failure is not None:
                self._on_failure(name, error)
        finally:
            mirror.close()

    def close(self) -> None:
        """Close the connections of the flows that never started (a started flow closes its own when it ends)."""
        for name, mirror in self.mirrors.items():
            if name not in self._threads:
                mirror.close()

    def wait(self, poll_s: float = 0.2) -> list[FlowResult]:
        """Wait for every flow to end (signals are handled meanwhile); their results, in flow order."""
        for thread in self._threads.values():
            while thread.is_alive():
                thread.join(poll_s)
        return self.results()

    def results(self) -> list[FlowResult]:
        return [self._results.get(name, FlowResult(name, error='did not end')) for name in self.mirrors]

    def stop(self, *, flush: bool = True) -> None:
        """Stop every flow (thread- and signal-safe; see :meth:`Mirror.stop`)."""
        self._stopping.set()
        for mirror in self.mirrors.values():
            mirror.stop(flush=flush)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def statuses(self) -> list[FlowStatus]:
        """Every flow's latest summary and whether it still runs (for the metrics endpoint)."""
        out = []
        for name, mirror in self.mirrors.items():
            thread = self._threads.get(name)
            result = self._results.get(name)
            up = thread is not None and thread.is_alive()
            out.append(FlowStatus(name, result.summary if result is not None and result.summary else mirror.latest, up))
        return out
