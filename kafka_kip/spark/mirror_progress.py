"""What a ``spark-mirror`` query copied, from its progress: the mirror's summary, incidents and exit status.

Each micro-batch's summary rows are observed (``Dataset.observe``) as :data:`OBSERVATION` in the query's progress
(``query.lastProgress["observedMetrics"]["kafka_kip_mirror"]``): ``copied_records`` and ``copied_bytes`` (the
mirror's ``kafka_kip_mirror_copied_records_total`` / ``_bytes_total``, per batch), ``incidents`` (the copier's
reports, ``"<kind>: <message>"``) and ``partitions`` (one entry per copied range, with the partition's offset mode,
source end and target end). :class:`CopyLedger` folds the batches' progress, once each, into a
:class:`~kafka_kip.mirror.mirror.MirrorSummary` -- the mirror's summary, so its rendering, JSON, exit status and
metrics (:mod:`kafka_kip.mirror.metrics`) serve ``spark-mirror`` unchanged.

A partition the copier had to stop (a truncation with ``onTruncation=fail``, a recreated topic, ...) fails its task,
so the batch is not committed and the query fails: :func:`failure_incident` reads the incident back from the
query's exception, and the summary shows the partition stopped (exit status 2, as ``kafka-kip mirror``).
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from kafka.structs import TopicPartition

from kafka_kip.mirror.groups import GroupSyncResult
from kafka_kip.mirror.mirror import MirrorSummary
from kafka_kip.mirror.state import Incident, IncidentKind, PartitionProgress, ProgressState

#: The name of the observed metrics in the query's progress.
OBSERVATION = 'kafka_kip_mirror'
#: The columns of a summary row that ``partitions`` entries keep.
PARTITION_FIELDS = ('topic', 'partition', 'startOffset', 'endOffset', 'records', 'bytes', 'mode', 'targetEnd',
                    'sourceEnd')
#: The error a task raises when the copier stopped a partition (its message: ``"<kind>: <incident message>"``).
STOPPED_ERROR = 'CopyStoppedError'
#: Errors a query fails with when a partition cannot be copied as the source has it, and the incident each is.
_FAILURE_KINDS = {
    'kafka_kip.errors.TruncatedPartitionError': IncidentKind.TRUNCATION,
    'kafka_kip.errors.InvalidPartitionEpochError': IncidentKind.RECREATED,
    'kafka.errors.OffsetOutOfRangeError': IncidentKind.RETENTION,
}
#: A partition's name in a message (``orders-0: ...``, ``orders-0 at offset 4 ...``).
_PARTITION = re.compile(r'(?<![\w.-])(?P<topic>[A-Za-z_][\w.-]*)-(?P<partition>\d+)(?=[:\s])')


def observe_copies(frame: Any) -> Any:
    """``frame`` (a ``kafka-kip-mirror`` stream) with its batches observed as :data:`OBSERVATION`."""
    from pyspark.sql import functions as F

    return frame.observe(
        OBSERVATION,
        F.coalesce(F.sum('records'), F.lit(0)).alias('copied_records'),
        F.coalesce(F.sum('bytes'), F.lit(0)).alias('copied_bytes'),
        F.flatten(F.collect_list('incidents')).alias('incidents'),
        F.collect_list(F.struct(*PARTITION_FIELDS)).alias('partitions'))


def failure_incident(text: str, topic_prefix: str = '') -> Incident | None:
    """The incident a failed query's error text reports (None: the failure is not an incident).

    The last line naming a known error counts (Spark wraps the task's traceback); the partition is the first
    ``topic-partition`` its message names.
    """
    found = None
    for line in (line.strip() for line in text.splitlines()):
        name, _, message = line.partition(': ')
        if name in _FAILURE_KINDS:
            found = (_FAILURE_KINDS[name], message)
        elif name.endswith('.' + STOPPED_ERROR):
            kind, _, rest = message.partition(': ')
            if kind in {k.value for k in IncidentKind}:
                found = (IncidentKind(kind), rest)
    if found is None:
        return None
    kind, message = found
    return incident_of(kind, message, stopped=True, topic_prefix=topic_prefix)


def incident_of(kind: IncidentKind, message: str, *, stopped: bool, topic_prefix: str = '') -> Incident:
    """An :class:`Incident` from its text: the partition is the first one ``message`` names (``-1`` if none)."""
    named = _PARTITION.search(message)
    source = TopicPartition(named['topic'], int(named['partition'])) if named else TopicPartition('', -1)
    return Incident(kind, source, TopicPartition(topic_prefix + source.topic, source.partition), stopped, message)


def progress_dict(progress: Any) -> dict[str, Any]:
    """A ``StreamingQueryProgress`` (or its JSON, or a dict) as a plain dict."""
    if isinstance(progress, str):
        return json.loads(progress)
    text = getattr(progress, 'json', None)
    return json.loads(text) if isinstance(text, str) else dict(progress)


class CopyLedger:
    """The query's batches folded (each once, by batch id) into the mirror's partition progress and incidents.

    ``on_incident`` is called with each incident as its batch is folded (the CLI prints them). Thread-safe: the
    listener folds on py4j's thread while the metrics endpoint reads.
    """

    def __init__(self, requested_mode: str, topic_prefix: str = '',
                 on_incident: Callable[[Incident], None] | None = None) -> None:
        self.requested_mode = requested_mode
        self.topic_prefix = topic_prefix
        self._on_incident = on_incident
        self._lock = threading.Lock()
        self._batches: set[int] = set()
        self._partitions: dict[TopicPartition, PartitionProgress] = {}
        self._incidents: list[Incident] = []
        self._started_at = time.monotonic()

    def fold(self, progress: Any) -> None:
        """Take in one progress update (a ``StreamingQueryProgress``, its JSON or a dict); repeats are ignored."""
        data = progress_dict(progress)
        observed = (data.get('observedMetrics') or {}).get(OBSERVATION)
        batch = data.get('batchId')
        if observed is None or batch is None:
            return
        found: list[Incident] = []
        with self._lock:
            if batch in self._batches:
                return
            self._batches.add(batch)
            now = time.monotonic()
            for entry in observed.get('partitions') or ():
                self._fold_range(entry, now)
            for text in observed.get('incidents') or ():
                found.append(self._incident(text))
            self._incidents.extend(found)
        if self._on_incident is not None:
            for incident in found:
                self._on_incident(incident)

    def _fold_range(self, entry: dict[str, Any], now: float) -> None:
        source = TopicPartition(entry['topic'], entry['partition'])
        before = self._partitions.get(source)
        records, copied = entry['records'], entry['endOffset']
        first = before.first_copied_at if before is not None else -1.0
        last = before.last_copied_at if before is not None else -1.0
        if records:
            first, last = (now if first < 0 else first), now
        self._partitions[source] = PartitionProgress(
            source, TopicPartition(self.topic_prefix + source.topic, source.partition), ProgressState.COPYING, copied,
            copied, entry['targetEnd'], entry['sourceEnd'], (before.records if before else 0) + records,
            (before.bytes if before else 0) + entry['bytes'], entry['mode'] or (before.mode if before else ''),
            before.copying_since if before is not None else now, first, last)

    def _incident(self, text: str) -> Incident:
        kind, _, message = text.partition(': ')
        return incident_of(IncidentKind(kind), message, stopped=False, topic_prefix=self.topic_prefix)

    def stopped(self, incident: Incident) -> None:
        """The query failed with ``incident``: its partition is stopped."""
        with self._lock:
            self._incidents.append(incident)
            p = self._partitions.get(incident.source)
            if p is not None:
                self._partitions[incident.source] = p._replace(state=ProgressState.STOPPED)
            elif incident.source.partition >= 0:
                self._partitions[incident.source] = PartitionProgress(
                    incident.source, incident.target, ProgressState.STOPPED, -1, -1, -1, -1, 0, 0)

    def ended(self) -> None:
        """The query copied what it was to copy (``availableNow``): partitions still copying are done."""
        with self._lock:
            self._partitions = {tp: p._replace(state=ProgressState.DONE) if p.state == ProgressState.COPYING else p
                                for tp, p in self._partitions.items()}

    def summary(self, groups: GroupSyncResult | None = None) -> MirrorSummary:
        """The mirror's summary of what the folded batches copied (and of the group sync's ``groups``)."""
        now = time.monotonic()
        with self._lock:
            return MirrorSummary(self.requested_mode, now - self._started_at, list(self._partitions.values()),
                                 list(self._incidents), groups=groups or GroupSyncResult(), taken_at=now)
