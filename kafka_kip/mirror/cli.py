"""``kafka-kip mirror``: the command line of the replicator, as a one-shot copy or a long-lived service.

Settings come from flags or from a MirrorMaker-style properties file (``--config``): one flow
(``source.bootstrap.servers``, ``target.bootstrap.servers``, ``source.``/``target.``-prefixed client settings
and the keys of docs/MIRROR.md's settings table) or several (``clusters = a, b``, ``a.bootstrap.servers``,
``a->b.enabled = true``, ``a->b.<setting>``; target topics ``a.<topic>``). Flags win.

SIGTERM or SIGINT stops reading, writes what was read and syncs groups once more within
``shutdown.timeout.ms``; a second signal exits at once. Exit codes: 0 every matching source partition was copied
(and every group synced), 1 the mirror could not run, 2 some partition or flow was not copied (see the
incidents), 3 a stop did not finish its writes in time, 130/143 a second SIGINT/SIGTERM. A restart after any
of them resumes from the target with no duplicate and no gap.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from typing import Any, TextIO

from kafka_kip.mirror.config import SINGLE_FLOW, flow_settings, process_settings
from kafka_kip.mirror.config import add_arguments as add_settings_arguments

#: After the shutdown bound, this long to print the summary before the watchdog ends the process.
_WATCHDOG_GRACE_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``mirror`` subcommand's options (and its description: this module's docstring)."""
    parser.description = __doc__.split('\n', 1)[1].strip().replace('``', "'")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_settings_arguments(parser)


class JsonLines(logging.Handler):
    """With ``--json``: log records on stderr as one JSON object per line (``{"event": "log", ...}``)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(logging.WARNING)
        self._stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        event(self._stream, 'log', level=record.levelname, logger=record.name, message=record.getMessage())


_output_lock = threading.RLock()  # re-entered by a signal handler on the main thread


def event(stream: TextIO, name: str, /, **fields: Any) -> None:
    """``{"event": name, **fields}`` on a line of ``stream`` (flows write from their own threads)."""
    with _output_lock:
        stream.write(json.dumps({'event': name, **fields}) + '\n')
        stream.flush()


def run_mirror(args: argparse.Namespace) -> int:
    """Run the mirror as the flags say; returns the exit code."""
    from kafka_kip.mirror.metrics import serve
    from kafka_kip.mirror.mirror import EXIT_SHUTDOWN_UNFINISHED
    from kafka_kip.mirror.progress import LiveProgress, render_summary
    from kafka_kip.mirror.service import MirrorService, service_exit_code

    def error(message: str) -> int:
        if args.json:
            event(sys.stderr, 'error', message=message)
        else:
            print(f'kafka-kip mirror: {message}', file=sys.stderr)
        return 1

    try:
        flows = flow_settings(args)
        process = process_settings(args)
    except (OSError, ValueError) as exc:
        return error(str(exc))
    single = list(flows) == [SINGLE_FLOW]
    progress = LiveProgress(sys.stdout, enabled=False if args.json else None)
    handler = JsonLines(sys.stderr) if args.json else None
    if handler is not None:
        logging.getLogger().addHandler(handler)

    def incident(flow: str, found: Any) -> None:
        if args.json:
            event(sys.stderr, 'incident', flow=flow, **found.to_dict())
        else:
            if single:
                progress.incident(found)
            else:
                progress.note(f'[{flow}] ' + found.message)

    def failed(flow: str, error: str) -> None:
        if args.json:
            event(sys.stderr, 'flow-failed', flow=flow, error=error)
        else:
            progress.note(f'kafka-kip mirror: {"" if single else f"flow {flow} failed: "}{error}')

    try:
        service = MirrorService(flows, on_incident=incident, on_failure=failed)
    except ValueError as exc:
        return error(str(exc))

    def on_signal(signum: int, frame: Any) -> None:
        if service.stopping:
            os._exit(128 + signum)  # the second signal: at once, the writes in flight abandoned
        service.stop()
        name = signal.Signals(signum).name
        if args.json:
            event(sys.stderr, 'stopping', signal=name, timeout_ms=service.shutdown_timeout_ms)
        else:
            progress.note(f'kafka-kip mirror: {name}: stopping, finishing the writes in flight within '
                          f'{service.shutdown_timeout_ms} ms (a second signal exits at once)')
        watchdog = threading.Timer(service.shutdown_timeout_ms / 1000 + _WATCHDOG_GRACE_S,
                                   os._exit, (EXIT_SHUTDOWN_UNFINISHED,))
        watchdog.daemon = True
        watchdog.start()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    stop_metrics = None
    try:
        if process['metrics_port'] is not None:
            try:
                url, stop_metrics = serve(service.statuses, process['metrics_port'], process['metrics_host'])
            except OSError as exc:
                return error(f'cannot serve metrics on {process["metrics_host"]}:{process["metrics_port"]} '
                             f'(--metrics-port / metrics.port): {exc.strerror or exc}')
            if args.json:
                event(sys.stderr, 'metrics', url=url)
            else:
                print(f'kafka-kip mirror: metrics at {url}', file=sys.stderr, flush=True)
        service.start(stop_at_end=args.stop_at_end, on_progress=progress)
        results = service.wait()
    finally:
        service.close()
        for sig, handler_ in previous.items():
            signal.signal(sig, handler_)
        if stop_metrics is not None:
            stop_metrics()
        progress.close()
        if handler is not None:
            logging.getLogger().removeHandler(handler)
    if single:
        [result] = results
        if result.summary is None:
            if args.json:
                print(json.dumps(result.to_dict(), indent=2))
            return result.exit_code
        print(json.dumps(result.summary.to_dict(), indent=2) if args.json else render_summary(result.summary))
        if args.stop_at_end and not result.summary.partitions:
            return error(f'no source topic matches {flows[SINGLE_FLOW].get("topics", ".*")!r} (--topics); nothing was '
                         'copied')
        return result.exit_code
    code = service_exit_code(results)
    if args.json:
        print(json.dumps({'flows': {r.name: r.to_dict() for r in results}, 'exit_code': code}, indent=2))
    else:
        for r in results:
            print(f'== {r.name} ==')
            print(render_summary(r.summary) if r.summary is not None else f'  FAILED: {r.error}')
    return code
