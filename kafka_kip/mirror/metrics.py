"""The mirror's metrics: an OpenMetrics / Prometheus endpoint (``prometheus_client``) over its summaries.

:class:`MirrorMetrics` is a ``prometheus_client`` collector: at each scrape it turns every flow's latest
:class:`~kafka_kip.mirror.mirror.MirrorSummary` (a snapshot at most a quarter of a second old, never the
live objects) into metric families; :func:`serve` exposes them over HTTP. The same figures are in the
``--json`` summary. Names follow Prometheus conventions (``_total`` counters, base units, ``flow`` label:
``source->target`` aliases); docs/MIRROR.md lists them beside MirrorMaker 2's.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from kafka_kip.mirror.mirror import MirrorSummary
from kafka_kip.mirror.state import ProgressState

PREFIX = 'kafka_kip_mirror_'
#: A partition's state as the metrics name it: waiting (starting or recovering), copying, stopped, done.
STATES = ('waiting', 'copying', 'stopped', 'done')
_STATE = {ProgressState.STARTING: 'waiting', ProgressState.RECOVERING: 'waiting', ProgressState.COPYING: 'copying',
          ProgressState.STOPPED: 'stopped', ProgressState.DONE: 'done'}


class FlowStatus(NamedTuple):
    """One flow as the metrics see it: its name, latest summary (None before its first) and whether it runs."""

    name: str
    summary: MirrorSummary | None
    up: bool


def partition_state(state: str) -> str:
    """The metrics' name (:data:`STATES`) of a partition's progress state."""
    return _STATE[ProgressState(state)]


class MirrorMetrics(Collector):
    """Metric families of the flows ``flows()`` returns (see the module docstring)."""

    def __init__(self, flows: Callable[[], list[FlowStatus]]) -> None:
        self._flows = flows

    def collect(self) -> Iterator[Metric]:
        partition_labels = ['flow', 'topic', 'partition', 'target_topic']
        up = GaugeMetricFamily(PREFIX + 'flow_up', 'Whether the flow is running (0: it failed or ended)',
                               labels=['flow'])
        records = CounterMetricFamily(PREFIX + 'copied_records', 'Records copied to the target (acknowledged)',
                                      labels=partition_labels)
        size = CounterMetricFamily(PREFIX + 'copied_bytes', 'Record batch bytes copied to the target (acknowledged)',
                                   labels=partition_labels)
        lag = GaugeMetricFamily(PREFIX + 'lag_records', "Replication lag: the source's end minus the offset copied "
                                'to (unknown until the first fetch answer)', labels=partition_labels)
        age = GaugeMetricFamily(PREFIX + 'last_copied_age_seconds', 'Seconds since the last write of the partition '
                                'was acknowledged (none before the first)', labels=partition_labels)
        state = GaugeMetricFamily(PREFIX + 'partition_state', 'The state of each partition (1 for the current one: '
                                  'waiting, copying, stopped, done)', labels=[*partition_labels, 'state'])
        incidents = CounterMetricFamily(PREFIX + 'incidents', 'Incidents by kind', labels=['flow', 'kind'])
        sync_age = GaugeMetricFamily(PREFIX + 'group_sync_age_seconds', "Seconds since the group's offsets were last "
                                     'synced to the target', labels=['flow', 'group'])
        group_lag = GaugeMetricFamily(PREFIX + 'group_lag_records', 'Source offsets the group committed beyond what '
                                      'is copied (its target commit cannot cover them yet)', labels=['flow', 'group'])
        latency = HistogramMetricFamily(PREFIX + 'produce_latency_seconds', 'Produce requests to the target, sent '
                                        'to answered', labels=['flow'])
        fetch_errors = CounterMetricFamily(PREFIX + 'fetch_errors', 'Fetch errors from the source by error',
                                           labels=['flow', 'error'])
        produce_errors = CounterMetricFamily(PREFIX + 'produce_errors', 'Produce errors from the target by error',
                                             labels=['flow', 'error'])
        requests = CounterMetricFamily(PREFIX + 'requests', 'Requests sent by API', labels=['flow', 'cluster', 'api'])
        for flow in self._flows():
            up.add_metric([flow.name], 1 if flow.up else 0)
            summary = flow.summary
            if summary is None:
                continue
            for p in summary.partitions:
                labels = [flow.name, p.source.topic, str(p.source.partition), p.target.topic]
                records.add_metric(labels, p.records)
                size.add_metric(labels, p.bytes)
                if p.lag >= 0:
                    lag.add_metric(labels, p.lag)
                copied_age = summary.last_copied_age(p)
                if copied_age is not None:
                    age.add_metric(labels, copied_age)
                current = partition_state(p.state)
                for name in STATES:
                    state.add_metric([*labels, name], 1 if name == current else 0)
            for kind, count in summary.incidents_by_kind().items():
                incidents.add_metric([flow.name, kind], count)
            for group, seconds in summary.groups.ages(summary.taken_at).items():
                sync_age.add_metric([flow.name, group], seconds)
            for group, behind in summary.groups.lag.items():
                group_lag.add_metric([flow.name, group], behind)
            histogram = summary.stats.produce_latency
            latency.add_metric([flow.name], histogram.cumulative(), histogram.total)
            for error, count in summary.stats.fetch_errors.items():
                fetch_errors.add_metric([flow.name, error], count)
            for error, count in summary.stats.produce_errors.items():
                produce_errors.add_metric([flow.name, error], count)
            for cluster, sent in summary.requests.items():
                for api, count in sent.items():
                    requests.add_metric([flow.name, cluster, api.removesuffix('Request')], count)
        yield from (up, records, size, lag, age, state, incidents, sync_age, group_lag, latency, fetch_errors,
                    produce_errors, requests)


def serve(flows: Callable[[], list[FlowStatus]], port: int, host: str = '0.0.0.0') -> tuple[str, Callable[[], None]]:
    """Serve the flows' metrics at ``http://host:port/metrics`` (``port`` 0: any free port) on a daemon thread;
    returns the URL and a function that stops the server."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MirrorMetrics(flows))
    server, thread = start_http_server(port, addr=host, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)

    return f'http://{host}:{server.server_port}/metrics', stop
